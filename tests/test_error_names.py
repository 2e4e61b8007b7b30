"""The CLI drops Prefect's traceback lines of the errors a run ends with in one line; the names it
looks for come from the error classes themselves (scorekeeper/errors.py), so a new error class is
known without a list to keep. Pure and fast."""

from __future__ import annotations

import logging

from scorekeeper import cli
from scorekeeper.errors import InputError, known_error_names


def _kept(message: str) -> bool:
    return cli._DropKnownErrors().filter(logging.LogRecord("prefect.flow_runs", logging.ERROR, "", 0, message, None, None))


def test_every_error_class_and_storage_failure_is_known_and_a_bug_is_not():
    class NovelRefusal(InputError):
        pass

    names = known_error_names()
    assert {"InputError", "NoInput", "LeaseLost", "OutputError", "NovelRefusal", "KeyboardInterrupt"} <= set(names)
    assert "No space left on device" in names and "EndpointConnectionError" in names
    assert not _kept("Finished in state Failed('Task run encountered an exception NovelRefusal: the column is empty')")
    assert not _kept("OSError: [Errno 28] No space left on device")
    assert _kept("Task run encountered an exception ZeroDivisionError: division by zero")

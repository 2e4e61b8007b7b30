"""Task retries: transient I/O is retried, a user's problem and a programming error never are."""

from __future__ import annotations

import socket

import aiohttp
import botocore.exceptions
import duckdb
import pytest
from fsspec.exceptions import FSTimeoutError
from prefect.states import Completed, Failed

from scorekeeper.errors import InputError, ScoringFailed
from scorekeeper.tasks.retries import retry_io_only


def _refused() -> ConnectionRefusedError:
    """A real refused connection: a loopback port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError as exc:
        return exc
    pytest.skip("something listens on a just-freed port")


def _raised_from(exc: BaseException, cause: BaseException) -> BaseException:
    try:
        raise exc from cause
    except BaseException as raised:
        return raised


TRANSIENT = {
    "connection refused": _refused,
    "timeout": lambda: TimeoutError("read timed out"),
    "fsspec timeout": lambda: FSTimeoutError(),
    "s3fs's translation of a 5xx": lambda: OSError(5, "We encountered an internal error. Please try again."),
    "botocore endpoint": lambda: botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
    "botocore read timeout": lambda: botocore.exceptions.ReadTimeoutError(endpoint_url="http://127.0.0.1:9"),
    "botocore connection closed": lambda: botocore.exceptions.ConnectionClosedError(endpoint_url="http://127.0.0.1:9"),
    "aiohttp payload cut off": lambda: aiohttp.ClientPayloadError("Response payload is not completed"),
    "aiohttp server disconnected": lambda: aiohttp.ServerDisconnectedError(),
    "duckdb read": lambda: duckdb.IOException("IO Error: Connection error for HTTP GET"),
    "raised from a connection error": lambda: _raised_from(RuntimeError("upload failed"), ConnectionResetError("reset by peer")),
}

NEVER = {
    "user's problem": lambda: InputError("column 'text' not found"),
    "user's problem raised from I/O": lambda: _raised_from(InputError("cannot read 'x.csv'"), FileNotFoundError("x.csv")),
    "scoring failed": lambda: ScoringFailed("scoring process rank 1 failed: killed by SIGKILL"),
    "TypeError": lambda: TypeError("unsupported operand type(s)"),
    "KeyError": lambda: KeyError("ground_truth"),
    "AttributeError": lambda: AttributeError("'NoneType' object has no attribute 'uri'"),
    "ValueError": lambda: ValueError("invalid literal for int()"),
    "botocore bad parameter": lambda: botocore.exceptions.ParamValidationError(report="Invalid bucket name"),
    "duckdb binder": lambda: duckdb.BinderException('Referenced column "x" not found'),
    "I/O only in the context": lambda: _context_only(),
}


def _context_only() -> BaseException:
    """A bug hit while handling an I/O error is still a bug."""
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError:
            raise KeyError("missing") from None
    except KeyError as exc:
        return exc


@pytest.mark.parametrize("name", TRANSIENT)
def test_transient_io_is_retried(name):
    assert retry_io_only(None, None, Failed(data=TRANSIENT[name]())) is True


@pytest.mark.parametrize("name", NEVER)
def test_user_errors_and_programming_errors_are_not_retried(name):
    assert retry_io_only(None, None, Failed(data=NEVER[name]())) is False


def test_a_completed_state_is_not_retried():
    assert retry_io_only(None, None, Completed(data=1)) is False


def test_every_io_task_retries_with_this_condition():
    from scorekeeper.tasks.evaluate import evaluate_task
    from scorekeeper.tasks.gather import gather_task
    from scorekeeper.tasks.open_run import open_run_task
    from scorekeeper.tasks.plan import plan_run_task
    from scorekeeper.tasks.read import read_inputs_task
    from scorekeeper.tasks.report import report_task

    for task in (open_run_task, read_inputs_task, plan_run_task, gather_task, evaluate_task, report_task):
        assert task.retries == 2 and task.retry_condition_fn is retry_io_only, task.name

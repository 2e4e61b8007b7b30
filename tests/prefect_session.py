"""One Prefect API server for the whole test session: the CLI's temporary server, started on the
first flow run a test asks for and stopped when pytest finishes (tests/conftest.py).

Flow runs called in the test process point Prefect at it for the call only (`api()`), so a test
that checks what happens without a Prefect server still sees none. One server for the session
costs its start-up once (seconds on 2 cores) instead of once per module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

_SERVER = []  # the session's TemporaryServer, once started


def api_url() -> str:
    """The session's server, started and waited for on the first call."""
    if not _SERVER:
        from scorekeeper.api_server import TemporaryServer

        server = TemporaryServer()
        try:
            server.wait_ready()
        except BaseException:
            server.stop()
            raise
        _SERVER.append(server)
    return _SERVER[0].api_url


@contextmanager
def api() -> Iterator[str]:
    """Prefect's settings pointed at the session's server inside the block: no UI (no "View at"
    links), and no flow-run heartbeats. Nothing watches a test run's heartbeats, and the engine
    joins its heartbeat thread at the end of every flow run, which sleeps in 1 s steps: up to a
    second per run, most of the flow's cost over calling its steps directly."""
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, PREFECT_UI_URL, temporary_settings

    url = api_url()
    with temporary_settings(updates={PREFECT_API_URL: url, PREFECT_UI_URL: "", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield url


def cli_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A `scorekeeper` subprocess's environment (os.environ, or `base`) pointed at the session's
    server, as an operator's is at a running one: the CLI then starts no temporary server of its own
    (about 14 s of CPU on 2 cores: a fresh database's migrations). Tests of the CLI's own temporary
    server leave PREFECT_API_URL out instead."""
    return {**(os.environ if base is None else base), "PREFECT_API_URL": api_url()}


def stop() -> None:
    """Send the logs and events Prefect still holds, within the CLI's bound, then stop the server:
    undrained, Prefect retries them against the stopped server for minutes."""
    if not _SERVER:
        return
    from scorekeeper.cli import _drain_prefect_clients

    try:
        _drain_prefect_clients()
    finally:
        _SERVER.pop().stop()

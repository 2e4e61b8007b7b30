"""Waiting in tests: poll a condition until it holds or time runs out, and wait for a server."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T], timeout: float, interval: float = 0.2) -> T:
    """Call `check` every `interval` seconds until it returns a true value or `timeout` seconds
    have passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def answers(url: str, expect: bytes | None = None) -> bool:
    """Whether an HTTP server answers at `url` (with the body `expect`, when given)."""
    try:
        body = urllib.request.urlopen(url, timeout=2).read()
    except urllib.error.HTTPError:  # an answer all the same
        return expect is None
    except OSError:
        return False
    return expect is None or body.strip() == expect


def wait_for_server(process: subprocess.Popen, url: str, what: str, log: Path, timeout: float, expect: bytes | None = None) -> None:
    """Block until the server `process` answers at `url`; RuntimeError with its log's last lines
    when it exits first, or when it does not answer within `timeout` seconds."""

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {log.read_text()[-3000:]}")
        return answers(url, expect)

    if not poll(ready, timeout, interval=0.2):
        raise RuntimeError(f"{what} did not answer on {url} within {timeout:.0f} s")

"""Prefect's temporary API server for `scorekeeper run`, started before anything heavy is imported.

Without an API URL, Prefect starts a temporary server on the flow's first API call: in the CLI
that comes after the flow module's imports, and Prefect first imports its whole server app into
the CLI's own process just to launch it (about 3 s on 2 cores), then waits for it (4 s more).
Starting the same server (uvicorn with Prefect's app factory and the settings Prefect gives its
own temporary server) as the CLI's first act lets its start-up run beside the CLI's imports and
the scoring processes' start. The CLI uses it only where Prefect would have started one itself.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from scorekeeper.errors import ScorekeeperError
from scorekeeper.launch.command import free_port

# What Prefect's own temporary server runs with (prefect.server.api.server.SubprocessASGIServer):
# no UI, and the app's ephemeral mode (no background services beyond what a local run needs).
# And no registration of block types at start-up: to decide that nothing changed since the last
# registration, Prefect imports every installed Prefect collection first (with prefect-docker and
# prefect-kubernetes in the environment, as in the test extras, about 1.4 CPU-s of a 4 s start). A
# local run needs none of it: saving a block registers its type from the client, and loading one
# reads the document that saving wrote.
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
}
PORT_IN_USE_EXIT = 3  # uvicorn's exit code when it cannot bind
STARTUP_TIMEOUT_S = 120.0
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an HTTP(S)_PROXY


class TemporaryServer:
    """A Prefect API server on a free loopback port, for the life of one CLI command."""

    def __init__(self) -> None:
        self._log = tempfile.TemporaryFile()
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._launch()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _launch(self) -> None:
        self.port = free_port()
        spec = importlib.util.find_spec("prefect")  # where it is, without importing it
        app_dir = str(Path(spec.origin).parent.parent) if spec and spec.origin else "."
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "uvicorn", "--app-dir", app_dir,
                "--factory", "prefect.server.api.server:create_app",
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "error", "--lifespan", "on",
            ],
            env={**os.environ, **SERVER_ENV},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            # A session of its own: the terminal's Ctrl-C goes to the CLI, which still needs the
            # server to record how the run ended, and stops it last.
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )  # fmt: skip

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        """Block until the API answers its health check; its URL."""
        deadline = time.monotonic() + timeout_s
        relaunches = 0
        while time.monotonic() < deadline:
            assert self.proc is not None, "launched by __init__"
            code = self.proc.poll()
            # uvicorn exits with 3 both when the port was taken meanwhile and when the app fails to
            # start: only the first is worth another port.
            if code == PORT_IN_USE_EXIT and not _port_free(self.port) and relaunches < 5:
                relaunches += 1
                self._launch()
                continue
            if code is not None:
                raise ScorekeeperError(f"Prefect's temporary server exited with code {code} while starting: {self._stderr()}")
            try:
                with _LOOPBACK.open(f"{self.api_url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self.api_url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        output = self._stderr()
        self.stop()
        raise ScorekeeperError(
            f"Prefect's temporary server did not answer within {timeout_s:.0f} s; set PREFECT_API_URL to a running "
            f"server (`prefect server start`). Its output: {output}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def _stderr(self) -> str:
        """The last lines the server wrote: where its error is, without its whole traceback."""
        self._log.seek(0)
        lines = [line for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        return "\n".join(lines[-6:])[-2000:] or "(nothing)"


def _die_with_parent(parent: int):
    """For the child, between fork and exec: on Linux, be killed when the CLI dies, even by
    SIGKILL (the kernel's parent-death signal), so no server outlives its command."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the CLI died before the signal was armed
            os._exit(1)

    return arm


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

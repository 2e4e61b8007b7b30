"""The owner of one job's scoring processes: start, hand-over, follow, stop.

Whoever starts the processes creates a ScoringProcesses and is the one who stops it: the CLI
(which starts them before it imports Prefect, so their imports overlap Prefect's start-up), or the
flow (before it reads its input). Everything else is handed the object explicitly; nothing is
registered in a process-wide list.

The CLI runs the flow in its own process as a function call, and the flow's parameters are
ScoreRequest's fields and nothing else (they are the Prefect UI's run form). So the CLI offers its
processes through a context variable, `offering(processes)`, scoped to the call: the flow reads it
once at its start (`offered`) and from then on passes the object on explicitly, to the score task.
A context variable, unlike a module global, is seen only by code running inside the CLI's `with`
block, in its own context: a flow run started any other way (a deployment, a test, another
thread) sees nothing offered and starts its own processes. The offer is taken only when the
processes were launched exactly as the flow needs them (process count, collective timeout,
environment) and still wait for a job.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from scorekeeper.launch.command import launch_command
from scorekeeper.launch.progress import Progress
from scorekeeper.launch.supervise import Launched


class ScoringProcesses:
    """One job's scoring processes, from launch to exit.

    `start()` launches them ahead of their job: they import torch and transformers and join their
    process group, then wait for the job's URI to appear in a local file (and leave on their own
    if this process dies meanwhile). `hand_over(job_uri)` writes that file; `start(job_uri)`
    launches them with their job instead. `follow` streams their progress until they exit and
    fails the job when one stalls. `stop` kills whatever still runs (processes no job was handed
    to, or left by a failure) and is a no-op once they have exited; leaving a `with` block stops
    them too.
    """

    def __init__(self, num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None):
        self.num_processes = num_processes
        self.collective_timeout_s = float(collective_timeout_s)
        self.env = dict(env or {})
        self.job_uri: str | None = None
        self._launched: Launched | None = None
        self._job_file: str | None = None

    def __enter__(self) -> ScoringProcesses:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self, job_uri: str | None = None) -> ScoringProcesses:
        """Launch the processes, with their job, or (None) ahead of it."""
        if self._launched is not None:
            raise RuntimeError("these scoring processes were started already")
        if job_uri is None:
            self._job_file = os.path.join(tempfile.mkdtemp(prefix="scorekeeper-job-"), "job")
            cmd = launch_command(self.num_processes, None, self.collective_timeout_s, job_from=self._job_file)
        else:
            self.job_uri = job_uri
            cmd = launch_command(self.num_processes, job_uri, self.collective_timeout_s)
        self._launched = Launched(cmd, self.env, num_processes=self.num_processes)
        return self

    @property
    def waiting(self) -> bool:
        """Started ahead, still running, and not handed a job yet."""
        return self._launched is not None and self.job_uri is None and self._launched.alive()

    @property
    def pid(self) -> int | None:
        """The launcher's process id (the worker itself when one process runs)."""
        return self._launched.proc.pid if self._launched else None

    @property
    def job_file(self) -> str | None:
        """The local file processes started ahead wait on for their job's URI."""
        return self._job_file

    def fits(self, num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None) -> bool:
        """Whether these are waiting processes launched exactly as a job with these settings needs."""
        return (
            self.waiting
            and self.num_processes == num_processes
            and self.collective_timeout_s == float(collective_timeout_s)
            and self.env == dict(env or {})
        )

    def hand_over(self, job_uri: str) -> None:
        """Give the processes their job. Processes waiting for it find it in their file (written,
        then renamed: it appears whole); where none wait (never started, or exited meanwhile),
        they are launched with it."""
        if self.job_uri is not None:
            raise RuntimeError(f"these scoring processes have a job already: {self.job_uri}")
        if not self.waiting:
            self._launched = None
            self._remove_job_file()
            self.start(job_uri)
            return
        job_file = self._job_file
        assert job_file is not None, "processes started ahead of their job wait on its file"
        staging = job_file + ".tmp"
        with open(staging, "w") as f:
            f.write(job_uri)
        os.replace(staging, job_file)
        self.job_uri = job_uri

    def follow(self, progress: Progress, on_progress: Callable[[Progress], None] | None = None) -> Progress:
        """Stream the processes' events into `progress` until they exit; ScoringFailed when one
        fails or stops sending heartbeats for the collective timeout (see Launched.follow)."""
        if self._launched is None or self.job_uri is None:
            raise RuntimeError("hand the scoring processes their job before following them")
        try:
            return self._launched.follow(progress, on_progress, stall_timeout_s=self.collective_timeout_s)
        finally:
            self._remove_job_file()

    def stop(self) -> None:
        """Kill every process still running and remove the hand-over file. Safe to call at any
        time and more than once."""
        if self._launched is not None:
            self._launched.kill()
        self._remove_job_file()

    def _remove_job_file(self) -> None:
        if self._job_file:
            shutil.rmtree(os.path.dirname(self._job_file), ignore_errors=True)


_OFFERED: ContextVar[ScoringProcesses | None] = ContextVar("scorekeeper_offered_processes", default=None)


@contextmanager
def offering(processes: ScoringProcesses | None) -> Iterator[None]:
    """Offer `processes` to a flow run called inside the block (see the module's docstring)."""
    token = _OFFERED.set(processes)
    try:
        yield
    finally:
        _OFFERED.reset(token)


def offered(num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None) -> ScoringProcesses | None:
    """The processes offered to this call, when they fit a job with these settings."""
    processes = _OFFERED.get()
    return processes if processes is not None and processes.fits(num_processes, collective_timeout_s, env) else None

"""One launch of the scoring processes: its output streamed, a stall watchdog, and a kill that
reaches every rank.

A failure raises ScoringFailed in one line: the worker's own message when it explained the problem
itself, else which process failed and how (torchrun's summary, the exit code), and the path of a
log file holding the processes' whole stderr (torchrun's dump, a traceback).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

import psutil

from scorekeeper.boundary import Finished, MalformedEvent, RangeDone, RankEvent, parse_event
from scorekeeper.errors import ScoringFailed
from scorekeeper.launch.clock import RunningClock
from scorekeeper.launch.progress import Progress

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 30
STARTUP_GRACE_S = 300.0
WATCH_EVERY_S = 0.5


class Launched:
    """A launcher process (the worker itself, or `accelerate launch` and its ranks) from start to exit.

    Its output is read from the start (events wait in a queue until `follow`), so processes
    waiting for their job never block on a full pipe. It runs in a session of its own, so a
    Ctrl-C meant for the flow does not reach it; `kill` does.
    """

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, *, num_processes: int = 1):
        self.cmd = cmd
        self.num_processes = num_processes
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        # Every stderr line goes to a log file too: a failure says its cause in one line and names
        # this file for the rest (torchrun's dump, a traceback); it is removed after a clean exit.
        fd, self.log_path = tempfile.mkstemp(prefix="scorekeeper-scoring-", suffix=".log")
        self._log = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None, "started with stdout=PIPE"
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None, "started with stderr=PIPE"
        for line in self.proc.stderr:
            self._log.write(line)
            self._log.flush()
            line = line.rstrip("\n")
            self.tail.append(line)
            log.debug("worker: %s", line)
        self._log.close()

    def follow(
        self, progress: Progress, on_progress: Callable[[Progress], None] | None = None, *, stall_timeout_s: float = 120.0
    ) -> Progress:  # fmt: skip
        """Stream the workers' events into `progress` until they exit; raise ScoringFailed on failure.

        A watchdog fails the job when a process stops sending heartbeats for `stall_timeout_s`
        (stopped, wedged or lost), so a scoring job never hangs. Silence is measured on a
        RunningClock, never across a time this process itself was not running (a suspended laptop,
        a paused virtual machine: every rank would otherwise look stalled at once when it wakes).
        Anything raised meanwhile (a failed `on_progress`, KeyboardInterrupt) kills the processes
        before it propagates."""
        proc = self.proc
        clock = RunningClock(every_s=WATCH_EVERY_S)  # the watchdog below reads it that often
        # Before its first event a process gets extra time: imports and the model load come first.
        # It counts from now, not from the launch: a process started ahead may have waited for
        # its job longer than any grace while the flow read a big input.
        last_seen = {rank: clock.now() + STARTUP_GRACE_S for rank in range(self.num_processes)}
        finished: set[int] = set()
        stalled: list[str] = []
        stdout_closed = threading.Event()

        def watch() -> None:
            # torchrun starts each rank in a session of its own, so the process group alone does not
            # reach them: remember every descendant seen, and kill those that outlive the launcher.
            known: dict[int, psutil.Process] = {}
            while proc.poll() is None:
                known.update((p.pid, p) for p in _descendants(proc.pid))
                now = clock.now()
                for rank, seen in last_seen.items():
                    if rank not in finished and now - seen > stall_timeout_s:
                        stalled.append(
                            f"scoring process rank {rank} stopped responding (no heartbeat for {stall_timeout_s:.0f} s); "
                            "the job was stopped and nothing was published. Rerun with the same run_name to resume"
                        )
                        _kill_tree(proc, known.values())
                        return
                time.sleep(WATCH_EVERY_S)
            if not stdout_closed.wait(5.0):
                _kill_tree(proc, known.values())

        threading.Thread(target=watch, daemon=True).start()
        try:
            self._read_events(progress, on_progress, clock, last_seen, finished)
            stdout_closed.set()
            rc = proc.wait()
        except BaseException:
            self.kill()
            raise
        if stalled:
            raise ScoringFailed(stalled[0] + self._log_named())
        if rc != 0:
            time.sleep(0.2)  # let the stderr reader drain
            tail = list(self.tail)
            if progress.errors:
                raise ScoringFailed(ranks_own_errors(rc, progress.errors, tail) + self._log_named())
            raise ScoringFailed(failure_message(rc, tail) + self._log_named())
        self._remove_log()
        return progress

    def _read_events(
        self,
        progress: Progress,
        on_progress: Callable[[Progress], None] | None,
        clock: RunningClock,
        last_seen: dict[int, float],
        finished: set[int],
    ) -> None:
        """The workers' output until it ends: each event into `progress` (and `on_progress` after a
        range), each rank's last sign of life into `last_seen` (the watchdog reads it), the ranks
        done into `finished`; other lines logged."""
        while (line := self.lines.get()) is not None:
            try:
                event = parse_event(line)
            except MalformedEvent as exc:
                log.warning("worker: %s", exc)
                continue
            if event is None:
                if line.strip():
                    log.info("worker: %s", line)
                continue
            if isinstance(event, RankEvent):
                last_seen[event.rank] = clock.now()
                if isinstance(event, Finished):
                    finished.add(event.rank)
            progress.update(event)
            if isinstance(event, RangeDone) and on_progress:
                on_progress(progress)

    def _log_named(self) -> str:
        return f" (the scoring processes' whole output: {self.log_path})"

    def _remove_log(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)

    def kill(self) -> None:
        """SIGKILL the launcher and every scoring process under it; nothing once it has exited
        (its pid may belong to another process by then)."""
        if self.proc.poll() is None:
            _kill_tree(self.proc, _descendants(self.proc.pid))


def ranks_own_errors(rc: int, errors: list[str], stderr_tail: list[str]) -> str:
    """The failing ranks' own one-line errors ("rank N: ..."), the rank torchrun names as the root
    cause first: the others often fail only because it went (a collective whose peer is gone).
    When that rank said nothing (it was killed), torchrun's account of it comes first."""
    errors = list(dict.fromkeys(errors))
    root = root_cause_rank(stderr_tail)
    if root is None:
        return "; ".join(errors)
    own = [e for e in errors if e.startswith(f"rank {root}: ")]
    return "; ".join((own or [failure_message(rc, stderr_tail)]) + [e for e in errors if e not in own])


def root_cause_rank(stderr_tail: list[str]) -> int | None:
    """The rank torchrun's failure summary names as the first observed failure, if it printed one."""
    text = "\n".join(stderr_tail)
    found = re.search(r"rank\s*:\s*(\d+)", text.split("Root Cause", 1)[1]) if "Root Cause" in text else None
    return int(found.group(1)) if found else None


def failure_message(rc: int, stderr_tail: list[str]) -> str:
    """Which process failed and how, from torchrun's failure summary (or the exit code alone)."""
    # torchrun lists the ranks it terminated itself first; the root cause names the one that failed.
    text = "\n".join(stderr_tail).split("Root Cause", 1)[-1]
    rank = re.search(r"rank\s*:\s*(\d+)", text)
    code = re.search(r"exitcode\s*:\s*(-?\d+)", text)
    exit_code = int(code.group(1)) if code else rc
    how = f"exit code {exit_code}"
    if exit_code < 0:
        try:
            how = f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            how = f"killed by signal {-exit_code}"
    who = f"scoring process rank {rank.group(1) if rank else 0}" if rank or rc < 0 else "scoring"
    return f"{who} failed: {how}; nothing was published. Rerun with the same run_name to resume"


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _kill_tree(proc: subprocess.Popen, descendants) -> None:
    """SIGKILL the launcher and every scoring process (stopped ones included)."""
    for p in [*descendants, *_descendants(proc.pid)]:
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()

"""Launch the scoring worker under `accelerate launch`, stream its output, and report progress.

The subprocess boundary is a file (work/job.json); what comes back is commit records in the run
folder and progress events on stdout. A failure raises with the exit code and the tail of stderr,
or with the worker's own one-line message when it explained the problem itself.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from scorekeeper.errors import ScoringFailed
from scorekeeper.worker.job import EVENT_PREFIX

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 30
STARTUP_GRACE_S = 300.0


def visible_gpus() -> int:
    """GPUs the worker would see, without importing torch's CUDA runtime into the flow process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_command(
    num_processes: int, job_uri: str | None, collective_timeout_s: float, *, job_from: str | None = None, owner_pid: int | None = None
) -> list[str]:  # fmt: skip
    """The worker's command line. Several processes go through `accelerate launch`; without GPUs,
    --multi_gpu still starts one process per rank, and the worker's PartialState(cpu=True) makes
    them a gloo group (docs/facts.md). One process runs the worker directly: the same code path
    (PartialState without a launcher), without the launcher's few seconds of start-up.

    With `job_from` instead of `job_uri` the worker starts ahead of its job and waits for the job's
    URI to appear in that local file (see WorkerProcess.ahead)."""
    target = [job_uri] if job_uri is not None else ["--job-from", job_from, "--owner-pid", str(owner_pid or os.getpid())]
    worker = ["-m", "scorekeeper.worker", *target, "--timeout", str(collective_timeout_s)]
    if num_processes == 1:
        return [sys.executable, *worker]
    return [
        sys.executable, "-m", "accelerate.commands.launch",
        "--num_machines", "1",
        "--num_processes", str(num_processes),
        "--mixed_precision", "no",
        "--dynamo_backend", "no",
        "--multi_gpu",
        "--main_process_ip", "127.0.0.1",
        "--main_process_port", str(free_port()),
        "--monitor_interval", "1",
        *worker,
    ]  # fmt: skip


@dataclass
class Progress:
    """Rows and tokens scored so far, from the workers' range_done events."""

    total_rows: int
    rows_done: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    truncated: int = 0
    ranges_done: int = 0
    started: float = field(default_factory=time.time)
    errors: list[str] = field(default_factory=list)
    pipeline: list[dict] = field(default_factory=list)  # one `pipeline` event per pipeline: stages, bubble
    engine: dict | None = None  # how rank 0 fed its device (worker/runtime.py engine_facts)

    def update(self, event: dict) -> None:
        if event.get("event") == "range_done":
            self.rows_done += event["rows"]
            self.tokens += event["tokens"]
            self.padded_tokens += event.get("padded_tokens", 0)
            self.truncated += event.get("truncated", 0)
            self.ranges_done += 1
        elif event.get("event") == "started" and event.get("rank") == 0 and "engine" in event:
            self.engine = event["engine"]
        elif event.get("event") == "pipeline":
            self.pipeline.append({k: v for k, v in event.items() if k not in ("event", "t")})
        elif event.get("event") == "error":
            self.errors.append(f"rank {event.get('rank')}: {event.get('message')}")

    @property
    def elapsed(self) -> float:
        return max(time.time() - self.started, 1e-9)

    def line(self) -> str:
        return (
            f"scored {self.rows_done}/{self.total_rows} rows ({100 * self.rows_done / max(self.total_rows, 1):.0f}%), "
            f"{self.rows_done / self.elapsed:.1f} rows/s, {self.tokens / self.elapsed:.0f} tokens/s"
        )

    def summary(self) -> dict:
        return {
            "rows_scored": self.rows_done,
            "tokens": self.tokens,
            "padded_tokens": self.padded_tokens,
            "truncated": self.truncated,
            "seconds": round(self.elapsed, 3),
            "rows_per_s": round(self.rows_done / self.elapsed, 2),
            "tokens_per_s": round(self.tokens / self.elapsed, 1),
            **({"pipeline": self.pipeline} if self.pipeline else {}),
            **({"engine": self.engine} if self.engine else {}),
        }


class WorkerProcess:
    """The scoring processes, from launch to exit.

    Launched with their job, or ahead of it (`ahead`): then they import torch and transformers
    and join their process group while the flow reads and plans, and `submit` hands them the job.
    Their output is read from the launch on (events wait in a queue until `follow`), so a worker
    waiting for its job never blocks on a full pipe.
    """

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, *, num_processes: int = 1, job_file: str | None = None):
        self.cmd = cmd
        self.env = dict(env or {})
        self.num_processes = num_processes
        self.job_file = job_file
        self.launched_as: tuple | None = None  # set by `ahead`: what a job must need to take it
        self.launched = time.time()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @classmethod
    def ahead(cls, num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None) -> WorkerProcess:
        """Workers started before their job exists; `submit` gives them one."""
        job_file = os.path.join(tempfile.mkdtemp(prefix="scorekeeper-job-"), "job")
        cmd = launch_command(num_processes, None, collective_timeout_s, job_from=job_file)
        worker = cls(cmd, env, num_processes=num_processes, job_file=job_file)
        worker.launched_as = _launch_key(num_processes, collective_timeout_s, env)
        return worker

    def submit(self, job_uri: str) -> None:
        """Hand a worker started ahead its job (the file appears whole: written, then renamed)."""
        staging = self.job_file + ".tmp"
        with open(staging, "w") as f:
            f.write(job_uri)
        os.replace(staging, self.job_file)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            self.tail.append(line)
            log.debug("worker: %s", line)

    def follow(
        self, progress: Progress, on_progress: Callable[[Progress], None] | None = None, *, stall_timeout_s: float = 120.0
    ) -> Progress:  # fmt: skip
        """Stream the workers' events into `progress` until they exit; raise ScoringFailed on failure.

        A watchdog fails the job when a process stops sending heartbeats for `stall_timeout_s`
        (stopped, wedged or lost), so a scoring job never hangs."""
        proc = self.proc
        # Before its first event a process gets extra time: imports and the model load come first.
        # It counts from now, not from the launch: a process started ahead may have waited for
        # its job longer than any grace while the flow read a big input.
        last_seen = {rank: time.time() + STARTUP_GRACE_S for rank in range(self.num_processes)}
        finished: set[int] = set()
        stalled: list[str] = []
        stdout_closed = threading.Event()

        def watch() -> None:
            # torchrun starts each rank in a session of its own, so the process group alone does not
            # reach them: remember every descendant seen, and kill those that outlive the launcher.
            known: dict[int, psutil.Process] = {}
            while proc.poll() is None:
                known.update((p.pid, p) for p in _descendants(proc.pid))
                now = time.time()
                for rank, seen in last_seen.items():
                    if rank not in finished and now - seen > stall_timeout_s:
                        stalled.append(
                            f"scoring process rank {rank} stopped responding (no heartbeat for {stall_timeout_s:.0f} s); "
                            "the job was stopped and nothing was published. Rerun with the same run_name to resume"
                        )
                        _kill_tree(proc, known.values())
                        return
                time.sleep(0.5)
            if not stdout_closed.wait(5.0):
                _kill_tree(proc, known.values())

        threading.Thread(target=watch, daemon=True).start()
        try:
            while (line := self.lines.get()) is not None:
                if not line.startswith(EVENT_PREFIX):
                    if line.strip():
                        log.info("worker: %s", line)
                    continue
                try:
                    event = json.loads(line[len(EVENT_PREFIX) :])
                except ValueError:
                    log.info("worker: %s", line)
                    continue
                rank = event.get("rank")
                if isinstance(rank, int):
                    last_seen[rank] = time.time()
                    if event.get("event") == "finished":
                        finished.add(rank)
                progress.update(event)
                if event.get("event") == "range_done" and on_progress:
                    on_progress(progress)
            stdout_closed.set()
            rc = proc.wait()
        except BaseException:
            self.kill()
            raise
        finally:
            self._remove_job_file()
        if stalled:
            raise ScoringFailed(stalled[0])
        if rc != 0:
            time.sleep(0.2)  # let the stderr reader drain
            if progress.errors:
                raise ScoringFailed("; ".join(dict.fromkeys(progress.errors)))
            raise ScoringFailed(failure_message(rc, list(self.tail)) + "\nlast lines of its stderr:\n" + "\n".join(self.tail))
        return progress

    def kill(self) -> None:
        _kill_tree(self.proc, _descendants(self.proc.pid))
        self._remove_job_file()

    def _remove_job_file(self) -> None:
        if self.job_file:
            shutil.rmtree(os.path.dirname(self.job_file), ignore_errors=True)


def run_worker(
    cmd: list[str],
    progress: Progress,
    on_progress: Callable[[Progress], None] | None = None,
    env: dict[str, str] | None = None,
    *,
    num_processes: int = 1,
    stall_timeout_s: float = 120.0,
) -> Progress:
    """Launch the worker command with its job and follow it to the end (see WorkerProcess.follow)."""
    return WorkerProcess(cmd, env, num_processes=num_processes).follow(progress, on_progress, stall_timeout_s=stall_timeout_s)


# Workers started ahead of their job (by the CLI before Prefect's server is up, or by the flow
# before it reads its input), not handed a job yet. The score task takes a matching one.
_ahead: list[WorkerProcess] = []
_ahead_lock = threading.Lock()


def _launch_key(num_processes: int, collective_timeout_s: float, env: dict[str, str] | None) -> tuple:
    return (num_processes, float(collective_timeout_s), tuple(sorted((env or {}).items())))


def start_ahead(num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None) -> WorkerProcess:
    """Workers started now, for a score task of this process to take later (or the matching ones
    already waiting)."""
    key = _launch_key(num_processes, collective_timeout_s, env)
    with _ahead_lock:
        for w in _ahead:
            if w.alive() and w.launched_as == key:
                return w
        worker = WorkerProcess.ahead(num_processes, collective_timeout_s, env)
        _ahead.append(worker)
        return worker


def take_ahead(num_processes: int, collective_timeout_s: float, env: dict[str, str] | None = None) -> WorkerProcess | None:
    """A waiting worker launched exactly as this job needs it (process count, timeout, environment)."""
    key = _launch_key(num_processes, collective_timeout_s, env)
    with _ahead_lock:
        for w in list(_ahead):
            if w.alive() and w.launched_as == key:
                _ahead.remove(w)
                return w
    return None


def stop_ahead(worker: WorkerProcess) -> None:
    """Kill `worker` if no score task took it (a refused input, nothing left to score)."""
    with _ahead_lock:
        if worker not in _ahead:
            return
        _ahead.remove(worker)
    worker.kill()


def failure_message(rc: int, stderr_tail: list[str]) -> str:
    """Which process failed and how, from torchrun's failure summary (or the exit code alone)."""
    import re

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

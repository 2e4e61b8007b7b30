"""The scoring processes' command line: one process runs the worker directly, several go through
`accelerate launch`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


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
    them a gloo group (accelerate's --cpu would start one process only). One process runs the
    worker directly: the same code path (PartialState without a launcher), without the launcher's
    few seconds of start-up.

    With `job_from` instead of `job_uri` the worker starts ahead of its job and waits for the job's
    URI to appear in that local file; it gives up when `owner_pid` (default: this process) is gone
    (see ScoringProcesses)."""
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

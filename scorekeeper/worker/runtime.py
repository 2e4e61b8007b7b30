"""Process facts computed once, range claiming, and the worker's progress events.

Only these named facts decide who writes or logs (docs/style.md, 3). Ranges are claimed dynamically
through an atomic counter in the job's rendezvous store, so a fast process takes more ranges and
a resume may run with any process count.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch

from scorekeeper.worker.job import EVENT_PREFIX, IndexRange


@dataclass(frozen=True)
class Ranks:
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(timeout_s: float) -> Ranks:
    """Join the job's process group. Without a GPU, gloo over CPU (docs/facts.md: cpu=True is required)."""
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available(), timeout=timedelta(seconds=timeout_s))
    return Ranks(state.process_index, state.num_processes, state.local_process_index, state.device)


def claim(ranges: list[IndexRange], ranks: Ranks, key: str = "scorekeeper/next-range") -> Iterator[IndexRange]:
    """Ranges for this process: each handed out exactly once across all processes."""
    if ranks.world == 1 or not torch.distributed.is_initialized():
        yield from ranges
        return
    store = torch.distributed.distributed_c10d._get_default_store()
    while True:
        k = store.add(key, 1) - 1
        if k >= len(ranges):
            return
        yield ranges[k]


def emit(event: str, **fields) -> None:
    """One progress line on stdout; the flow parses these (a single write keeps lines whole)."""
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


HEARTBEAT_S = 2.0


def start_heartbeat(rank: int, every_s: float = HEARTBEAT_S) -> None:
    """A `heartbeat` event every few seconds from a daemon thread. A stopped (SIGSTOP) or wedged
    process stops beating, and the flow's watchdog fails the job instead of waiting forever."""

    def beat() -> None:
        while True:
            emit("heartbeat", rank=rank)
            time.sleep(every_s)

    threading.Thread(target=beat, name="scorekeeper-heartbeat", daemon=True).start()


_DONE = object()


def prefetch(items: Iterable, depth: int) -> Iterator:
    """Run `items` in a background thread, `depth` ahead: tokenising and collating off the
    critical path. Errors in the thread are re-raised in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            q.put(exc)

    thread = threading.Thread(target=run, name="scorekeeper-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def tune_allocator() -> None:
    """Keep tensor-sized blocks in glibc's heap instead of fresh mappings.

    By default glibc serves big allocations with mmap and unmaps them when freed, so each
    activation of each batch lands on new pages that the kernel must fault in and zero: on CPU
    about half of a worker's system time, and 3-5% of its throughput (bench/README.md). Blocks
    up to 32 MiB (a 2,048-token batch's largest activation of a 1,024-wide layer is 8 MiB) now
    come from the heap, and freed memory is kept for the next batch. A no-op without glibc.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 512 << 20)


ACCELERATOR_PATH_ENV = "SCOREKEEPER_ACCELERATOR_PATH"
"""Set to 1 to take the accelerator's host-side path on CPU (a test and debugging switch: the
prefetch thread, one batch at a time, the accelerator's batch size), so that the code a GPU runs
around the model is exercised, and checked against the CPU path, on machines without one."""


def accelerator_path(device: torch.device) -> bool:
    """Whether this process feeds its device the accelerator's way: ranges prepared ahead by a
    thread, one batch at a time, big batches. True on a GPU, or where ACCELERATOR_PATH_ENV asks."""
    return device.type != "cpu" or os.environ.get(ACCELERATOR_PATH_ENV) == "1"


def pin_host_memory(device: torch.device) -> bool:
    """Page-locked host batches, so the copy to the device does not block. Pinning needs the
    accelerator's runtime, so the forced path on CPU leaves it out."""
    return accelerator_path(device) and torch.cuda.is_available()


def engine_facts(device: torch.device, tokens_per_batch: int | None, mode: str) -> dict:
    """How this process feeds its device, for the run record (and for tests to check the path taken)."""
    from scorekeeper.worker.replica import cpu_batch_threads  # the replica runner owns the batch threads

    pipeline = mode == "pipeline"  # the pipeline runner always prepares ahead, one micro-batch schedule at a time
    return {
        "device": str(device),
        "accelerator_path": accelerator_path(device),
        "prefetch_thread": pipeline or accelerator_path(device),
        "pinned_memory": pin_host_memory(device),
        "batch_threads": 1 if pipeline else cpu_batch_threads(device),
        "tokens_per_batch": tokens_per_batch or default_tokens_per_batch(device),
    }


def default_tokens_per_batch(device: torch.device) -> int:
    """Padded tokens per batch. A GPU wants big batches to fill it; on CPU each batch runs on one
    core, and a batch whose activations stay in cache is faster per token than a big one
    (bench/README.md: 2,048 against 16,384 is about 20% faster on 2 cores, for a 256-wide and a
    768-wide BERT alike)."""
    return 131072 if accelerator_path(device) else 2048

"""Process facts computed once, range claiming, and the worker's progress events.

Only these named facts decide who writes or logs (docs/style.md, 3). Ranges are claimed dynamically
through an atomic counter in the job's rendezvous store, so a fast process takes more ranges and
a resume may run with any process count. How a process feeds its device is in `device.py`.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch

from scorekeeper.boundary import Event, Heartbeat, event_line
from scorekeeper.run_folder import IndexRange


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


def emit(event: Event) -> None:
    """One event on stdout (scorekeeper/boundary.py); the flow parses these (a single write keeps lines whole)."""
    sys.stdout.write(event_line(event))
    sys.stdout.flush()


HEARTBEAT_S = 2.0


def start_heartbeat(rank: int, every_s: float = HEARTBEAT_S) -> None:
    """A `heartbeat` event every few seconds from a daemon thread. A stopped (SIGSTOP) or wedged
    process stops beating, and the flow's watchdog fails the job instead of waiting forever."""

    def beat() -> None:
        while True:
            emit(Heartbeat(rank=rank))
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

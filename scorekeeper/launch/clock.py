"""The clock a watchdog measures silence on: seconds this process was running.

A watchdog that fails a job after some seconds without a sign of life must not count a time it was
not running itself. When a laptop suspends, or a virtual machine is paused or snapshotted, every
process stops at once, and when it wakes every clock has moved on. On the wall clock, or on a
monotonic clock that kept counting, every rank then looks silent at once. This clock runs on
time.monotonic() but stops while its owner was frozen. A freeze is any stretch between two of the
owner's regular calls of now() that is more than FROZEN_AFTER_S longer than the owner's own
period.
"""

from __future__ import annotations

import threading
import time

FROZEN_AFTER_S = 10.0


class RunningClock:
    """Monotonic seconds, less every stretch in which the owner, which calls now() every
    `every_s` seconds, was not running (a gap more than FROZEN_AFTER_S past `every_s`).
    Safe to read from several threads."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self._last = time.monotonic()
        self._frozen = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            real = time.monotonic()
            if real - self._last > self.every_s + FROZEN_AFTER_S:
                self._frozen += real - self._last - self.every_s
            self._last = real
            return real - self._frozen

"""The scoring job's stall watchdog (scorekeeper/launch/supervise.py) over real processes that print
real event lines: a rank that goes silent fails the job after stall_timeout_s, and a time the
watchdog itself was not running (a suspended laptop, a paused or snapshotted virtual machine: every
clock jumps at once) is never counted as the ranks' silence."""

from __future__ import annotations

import sys
import time
import types

import pytest

from scorekeeper.errors import ScoringFailed
from scorekeeper.launch import clock as clock_module
from scorekeeper.launch import supervise
from scorekeeper.launch.progress import Progress

# A stand-in for the worker, not a stub of what is tested: the watchdog only reads its stdout.
# Heartbeats every 0.1 s for `beats` times, then silence for `silent_s`, then Finished.
FAKE_RANK = """
import sys, time
from scorekeeper.boundary import Finished, Heartbeat, event_line
beats, silent_s = int(sys.argv[1]), float(sys.argv[2])
for _ in range(beats):
    sys.stdout.write(event_line(Heartbeat(rank=0))); sys.stdout.flush(); time.sleep(0.1)
time.sleep(silent_s)
sys.stdout.write(event_line(Finished(rank=0))); sys.stdout.flush()
"""


def launch(beats: int, silent_s: float) -> supervise.Launched:
    return supervise.Launched([sys.executable, "-c", FAKE_RANK, str(beats), str(silent_s)])


class JumpingClock:
    """time as the watchdog's RunningClock sees it, both clocks jumping `jump_s` ahead once, after
    `after_s` real seconds: what every process sees when the machine was frozen meanwhile."""

    def __init__(self, after_s: float, jump_s: float):
        self.began, self.after_s, self.jump_s = time.monotonic(), after_s, jump_s

    def _jump(self) -> float:
        return self.jump_s if time.monotonic() - self.began > self.after_s else 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self._jump()

    def time(self) -> float:
        return time.time() + self._jump()


def freeze(monkeypatch, after_s: float, jump_s: float) -> None:
    """The machine freezes once, `after_s` seconds from now, for `jump_s` seconds, as every module
    of the watchdog sees time."""
    clock = JumpingClock(after_s, jump_s)
    seen = types.SimpleNamespace(monotonic=clock.monotonic, time=clock.time, sleep=time.sleep)
    for module in (clock_module, supervise):
        monkeypatch.setattr(module, "time", seen)


def test_a_rank_that_goes_silent_fails_the_job_after_the_stall_timeout():
    launched = launch(beats=5, silent_s=30)
    began = time.monotonic()
    with pytest.raises(ScoringFailed, match=r"rank 0 stopped responding \(no heartbeat for 2 s\)"):
        launched.follow(Progress(total_rows=1), stall_timeout_s=2)
    assert time.monotonic() - began < 10
    assert not launched.alive()


def test_a_frozen_machine_is_not_a_stall(monkeypatch):
    """The clock jumps 1,000 s ahead one second in, while the rank keeps beating: the job finishes.
    Before, the watchdog measured the jump as 1,000 s of silence and killed every rank."""
    freeze(monkeypatch, after_s=1.0, jump_s=1000.0)
    launched = launch(beats=30, silent_s=0)
    launched.follow(Progress(total_rows=1), stall_timeout_s=2)
    assert launched.proc.returncode == 0


def test_a_rank_silent_across_a_freeze_still_fails_the_job(monkeypatch):
    """The freeze is credited, the silence before and after it is not: the stall is still found,
    stall_timeout_s of real silence later."""
    freeze(monkeypatch, after_s=1.0, jump_s=1000.0)
    launched = launch(beats=5, silent_s=30)
    began = time.monotonic()
    with pytest.raises(ScoringFailed, match="rank 0 stopped responding"):
        launched.follow(Progress(total_rows=1), stall_timeout_s=2)
    assert time.monotonic() - began < 10

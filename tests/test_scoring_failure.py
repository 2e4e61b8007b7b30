"""A failed scoring process is one line (scorekeeper/launch/supervise.py): its cause and the path of
a log file holding the processes' whole stderr, not 30 lines of torchrun's dump; a clean exit
leaves no log behind. Real processes (a stand-in worker that writes to stderr), no launcher mocked."""

from __future__ import annotations

import os
import sys

import pytest

from scorekeeper.errors import ScoringFailed
from scorekeeper.launch import supervise
from scorekeeper.launch.progress import Progress

NOISY = """
import sys
from scorekeeper.boundary import Finished, event_line
for i in range(40):
    print(f"torchrun dump line {i}", file=sys.stderr)
if sys.argv[1] == "fail":
    sys.exit(3)
sys.stdout.write(event_line(Finished(rank=0))); sys.stdout.flush()
"""


def test_a_failed_scoring_process_is_one_line_naming_its_log():
    launched = supervise.Launched([sys.executable, "-c", NOISY, "fail"])
    with pytest.raises(ScoringFailed) as failed:
        launched.follow(Progress(total_rows=0), stall_timeout_s=60)
    message = str(failed.value)
    assert "\n" not in message and "scoring failed: exit code 3" in message and "torchrun dump" not in message
    assert message.endswith(f"(the scoring processes' whole output: {launched.log_path})")
    with open(launched.log_path) as f:
        assert f.read().splitlines() == [f"torchrun dump line {i}" for i in range(40)]
    os.unlink(launched.log_path)


def test_a_clean_exit_leaves_no_log():
    launched = supervise.Launched([sys.executable, "-c", NOISY, "ok"])
    launched.follow(Progress(total_rows=0), stall_timeout_s=60)
    assert not os.path.exists(launched.log_path)

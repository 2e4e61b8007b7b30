"""bench/chaos.py, the fault campaign, stays working: two of its trials (a CLI killed while the run
reads its input, a scoring process killed while scoring), against the session's Prefect server.
Each trial's rerun must complete, score exactly the ranges the fault left uncommitted and publish
the clean run's rows and metrics; the script exits non-zero otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prefect_session

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]


def test_two_chaos_trials_end_exact_with_minimal_resumes(tmp_path):
    out = tmp_path / "chaos.json"
    command = [
        sys.executable, str(REPO / "bench" / "chaos.py"), "--seed", "1", "--only", "0", "--only", "4",
        "--prefect-api", prefect_session.api_url(), "--no-control", "--json", str(out), "--work", str(tmp_path / "work"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    trials = json.loads(out.read_text())["trials"]
    assert [(t["number"], t["config"], t["part"]) for t in trials] == [(0, "local", "cli"), (4, "local", "scoring")]
    for t in trials:
        assert t["faulted_exit"] != 0 or t["moment"] == "done", t  # the kill ended the run, unless it had completed
        assert t["rerun_exit"] == 0 and t["minimal"] and t["rescored"] == t["pending_before"], t
        assert t["rows"] == 36 and t["lost"] == t["duplicated"] == t["mismatched"] == 0 and not t["metric_diffs"], t
        assert not t["half_published"] and not t["left_behind"] and not t["problems"], t
    assert "lost 0, duplicated 0, mismatched 0" in done.stdout and "resumes minimal 2 of 2" in done.stdout

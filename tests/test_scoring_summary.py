"""The scoring summary (metrics.json `scoring`) is one typed record, scoring_summary.ScoringSummary, and
its rates are computed in one place: a single-machine run's (launch/progress.py) and a fanned-out
run's (tasks/fan_out.py) both come from ScoringSummary.measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from scorekeeper.launch.progress import Progress
from scorekeeper.scoring_summary import ScoringSummary

ROOT = Path(__file__).resolve().parents[1]


def test_measured_rounds_its_rates_and_leaves_unset_fields_out():
    summary = ScoringSummary.measured(10, 2000, 2500, 1, 3.14159, processes=2)
    assert summary.as_dict() == {
        "rows_scored": 10, "tokens": 2000, "padded_tokens": 2500, "truncated": 1, "seconds": 3.142,
        "rows_per_s": 3.18, "tokens_per_s": 636.6, "processes": 2,
    }  # fmt: skip
    assert ScoringSummary.measured(0, 0, 0, 0, 0.0).as_dict()["rows_per_s"] == 0.0
    with pytest.raises(ValidationError):
        ScoringSummary.measured(1, 1, 1, 0, 1.0, rows_total=3)


def test_a_runs_progress_summary_is_a_scoring_summary():
    progress = Progress(total_rows=4)
    progress.rows_done, progress.tokens = 4, 40
    summary = progress.summary(processes=1)
    assert isinstance(summary, ScoringSummary) and ScoringSummary.model_validate(summary.as_dict()) == summary
    assert summary.processes == 1 and "pipeline" not in summary.as_dict()


def test_only_the_boundary_computes_the_rates():
    sources = [p for folder in ("scorekeeper", "tasks", "flows") for p in (ROOT / folder).rglob("*.py")]
    computing = sorted(str(p.relative_to(ROOT)) for p in sources if '"rows_per_s": round(' in p.read_text())
    assert computing == []

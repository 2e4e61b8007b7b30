"""The scoring summary (metrics.json `scoring`) is one typed record, scoring_summary.ScoringSummary, and
its rates are computed in one place: a single-machine run's (launch/progress.py) and a fanned-out
run's (tasks/fan_out.py) both come from ScoringSummary.measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from scorekeeper.boundary import ModelLoaded, PipelineReport, PrecisionChecked, RangeDone, Started
from scorekeeper.launch.progress import Progress
from scorekeeper.long_text import LongTextCounts
from scorekeeper.scoring_summary import EngineFacts, GroupSummary, PrecisionCheck, ScoringSummary

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


def test_the_typed_parts_keep_metrics_json_scoring_as_the_events_said_it():
    """A pipeline's unmeasured bubble and a group's unknown machine stay null, a precision check keeps
    only the figures its head has, a group run's error only when it has one; and the summary read
    back from metrics.json is the same summary (what the report renders)."""
    engine = EngineFacts(
        device="cpu", accelerator_path=False, prefetch_thread=False, pinned_memory=False, batch_threads=1, tokens_per_batch=64
    )
    pipe = {"pipeline": 0, "ranks": [0, 1], "stages": [[0, 2], [2, 4]], "microbatches": 4, "schedule": "gpipe", "steps": 6}
    pipe |= {"short_steps": 0, "dummy_rows": 0, "schedules_built": 1, "stage_busy_s": [0.5, 0.5], "stage_step_s": [0.1, 0.1]}
    pipe |= {"bubble_measured": None, "bubble_theoretical": 0.2}
    progress = Progress(total_rows=4)
    for event in (
        Started(rank=0, world=2, device="cpu", ranges=1, engine=engine),
        ModelLoaded(rank=0, seconds=1.0, dtype="bfloat16"),
        PipelineReport(**pipe),
        PrecisionChecked(rank=0, check=PrecisionCheck(dtype="bfloat16", rows=4, max_probability_difference=0.01, changed_predictions=0)),
        RangeDone(rank=0, range=0, rows=4, tokens=40, padded_tokens=48, committed=True, elapsed=1.0),
    ):
        progress.update(event)
    written = progress.summary(processes=2).as_dict()
    assert written["engine"] == engine.model_dump() and written["pipeline"] == [pipe]  # bubble_measured: null kept
    assert written["precision_check"] == {"dtype": "bfloat16", "rows": 4, "max_probability_difference": 0.01, "changed_predictions": 0}
    assert "groups" not in written and "fan_out" not in written

    run = {"flow_run_id": "f1", "flow_run_name": "a", "machine": None, "worker": "w", "ranges": [0], "rows": 4, "rows_per_s": None}
    run |= {"dtype": None}
    lost = run | {"flow_run_id": "f2", "state": "CRASHED", "error": "lost: no sign of life"}
    group = {"group": 1, "status": "completed", "machine": None, "worker": "w", "flow_run_id": "f2", "ranges": [0], "rows": 4}
    group |= {"rows_per_s": None, "dtype": None, "attempts": 2, "runs": [run | {"state": "COMPLETED"}, lost]}
    fanned = ScoringSummary.measured(4, 40, 48, 0, 2.0, processes=2, fan_out=2, groups=[GroupSummary.model_validate(group)])
    assert fanned.as_dict()["groups"] == [group]  # the completed run has no `error` key, nulls kept
    counts = LongTextCounts(
        mode="truncate", max_length=16, window=14, rows_over_length=1, tokens_content=9, tokens_scored=8, tokens_dropped=1
    )
    truncated = ScoringSummary.measured(4, 40, 48, 1, 2.0, long_text=counts)
    assert truncated.as_dict()["long_text"] == counts.model_dump(exclude_none=True)  # no chunk-mode keys in a truncate run
    for summary in (progress.summary(processes=2), fanned, truncated):
        again = ScoringSummary.model_validate(json.loads(json.dumps(summary.as_dict())))
        assert again == summary and again.as_dict() == summary.as_dict()

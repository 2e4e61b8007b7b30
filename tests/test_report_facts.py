"""What the report says about a run is what happened: the real counts of flipped rows (not the
number of samples shown), the dtype the scoring processes used (not `auto`), and a "model changed"
marker in the history when only the adapter changed.
"""

from __future__ import annotations

import copy
import re

import pytest

from scorekeeper.boundary import ModelLoaded
from scorekeeper.launch.progress import Progress
from scorekeeper.report import plots
from scorekeeper.report.report import render_html, run_facts
from scorekeeper.run_facts import RunFacts
from scorekeeper.scoring_summary import GroupRunSummary, GroupSummary, ScoringSummary
from tests.helpers import make_rows, run_flow, write_rows
from tests.report_fixture import document, full_metrics


def test_rows_that_flipped_gives_the_real_counts_not_the_samples_shown():
    metrics, run_info = copy.deepcopy(full_metrics(n=1200))
    comparison = metrics["comparison"]
    comparison["samples"] = {k: v[:3] for k, v in comparison["samples"].items()}
    flipped = comparison["flipped"]
    assert flipped["right_to_wrong"] > 3 and flipped["wrong_to_right"] > 3
    page = render_html(document(metrics), run_info)
    summary = re.search(r"<summary>Rows that flipped[^<]*</summary>", page).group(0)
    assert f"({flipped['right_to_wrong']} right → wrong, {flipped['wrong_to_right']} wrong → right; 6 shown)" in summary


def _group(number: int, dtype: str | None) -> GroupSummary:
    where = {"flow_run_id": f"f{number}", "machine": None, "worker": None, "ranges": [number], "rows": 1, "rows_per_s": 1.0, "dtype": dtype}
    run = GroupRunSummary.model_validate(where | {"flow_run_name": "r", "state": "COMPLETED"})
    return GroupSummary.model_validate(where | {"group": number, "status": "completed", "attempts": 1, "runs": [run]})


def test_run_facts_show_the_dtype_the_workers_used():
    progress = Progress(total_rows=1)
    progress.update(ModelLoaded(rank=1, seconds=1.0, dtype="float16"))  # rank 0 speaks for the job
    progress.update(ModelLoaded(rank=0, seconds=1.0, dtype="bfloat16"))
    scoring = progress.summary()
    assert scoring.dtype == "bfloat16"
    metrics, run_info = copy.deepcopy(full_metrics(n=100))
    facts = dict(run_facts(document(metrics | {"scoring": scoring.as_dict()}), RunFacts.of(run_info | {"dtype": "auto"})))
    assert "dtype bfloat16" in facts["mode"] and "auto" not in facts["mode"]
    groups = [_group(1, "bfloat16"), _group(2, "float32"), _group(3, None)]
    fanned = ScoringSummary.measured(2, 20, 20, 0, 1.0, groups=groups).as_dict()
    assert (
        "dtype bfloat16, float32"
        in dict(run_facts(document(metrics | {"scoring": fanned}), RunFacts.of(run_info | {"dtype": "auto"})))["mode"]
    )


@pytest.mark.integration
def test_a_real_cpu_run_reports_float32_for_auto(tmp_path, models):
    write_rows(tmp_path / "in.csv", make_rows(3))
    result = run_flow(input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "out"), dtype="auto")
    assert result.scoring["dtype"] == "float32"


def test_history_marks_a_changed_adapter_as_a_changed_model():
    runs = [
        {"run_id": "a", "accuracy": 0.8, "macro_f1": 0.7, "model_fingerprint": "m", "adapter_fingerprint": "x"},
        {"run_id": "b", "accuracy": 0.82, "macro_f1": 0.71, "model_fingerprint": "m", "adapter_fingerprint": "x"},
        {"run_id": "c", "accuracy": 0.85, "macro_f1": 0.75, "model_fingerprint": "m", "adapter_fingerprint": "y"},
    ]
    counts = {"finished_at": None, "rows": 10, "evaluated": 10, "input_fingerprint": "i"}
    svg = plots.history_svg(document(full_metrics(n=100)[0] | {"history": [counts | r for r in runs]}))
    assert svg.count("<title>model changed</title>") == 1  # between b and c: the adapter changed, the base did not

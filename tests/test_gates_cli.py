"""A failed quality gate fails the run (CLI exit 4, one line) with every output published; a second
run compares itself with the first (`--compare-to previous`)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.helpers import make_rows, write_rows
from tests.test_flow_cli import _cli

pytestmark = pytest.mark.integration


def test_failed_gate_exits_4_with_outputs_published_then_a_run_compares_with_it(tmp_path, models):
    write_rows(tmp_path / "test.csv", make_rows(13))
    common = ["run", "--input-uri", "test.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--num-processes", "1"]
    failed = _cli(*common, "--run-name", "base", "--gates", "accuracy>=0.99", "--gates", "evaluated>=13", cwd=tmp_path)
    assert failed.returncode == 4, failed.stderr[-3000:]
    assert "Traceback" not in failed.stdout + failed.stderr
    error = [line for line in failed.stderr.splitlines() if line.startswith("scorekeeper: error:")]
    assert len(error) == 1
    assert "1 of 2 quality gate(s) failed: accuracy >= 0.99: accuracy is " in error[0]
    assert f"the outputs are published in {tmp_path / 'runs' / 'base'}" in error[0]
    base = tmp_path / "runs" / "base"
    metrics = json.loads((base / "report" / "metrics.json").read_text())
    assert [(g["gate"], g["passed"]) for g in metrics["gates"]] == [("accuracy >= 0.99", False), ("evaluated >= 13", True)]
    assert (base / "report" / "report.html").exists() and pq.read_table(base / "predictions.parquet").num_rows == 13

    compared = _cli(
        *common,
        "--run-name",
        "cand",
        "--compare-to",
        "previous",
        "--gates",
        "accuracy_drop<=0 if significant",
        "--slice-columns",
        "label",
        "--slice-columns",
        "review_id",
        cwd=tmp_path,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    metrics = json.loads((tmp_path / "runs" / "cand" / "report" / "metrics.json").read_text())
    comparison = metrics["comparison"]
    assert comparison["run"] == "base" and comparison["matched_on"] == "row_index" and comparison["rows_compared"] == 13
    assert comparison["flipped"] == {"right_to_wrong": 0, "wrong_to_right": 0, "other": 0} and comparison["mcnemar_p"] == 1.0
    assert comparison["deltas"]["accuracy"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["gates"][0]["passed"] and [h["run_id"] for h in metrics["history"]] == ["base", "cand"]
    assert list(metrics["slices"]) == ["label", "review_id"] and len(metrics["slices"]["review_id"]) == 13

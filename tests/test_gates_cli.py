"""A failed quality gate fails the run (CLI exit 4, one line) with every output published; a second
run compares itself with the first (`compare_to previous`) and fails a gate in its flow run (what
Prefect's UI shows). Two scored runs, shared by the module's tests: the first through the command,
the second in this process."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.helpers import make_rows, write_rows
from tests.test_flow_cli import _cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gated_runs(tmp_path_factory, models):
    """Run `base` through the CLI with a failed gate; then run `cand` in this process against the
    session's Prefect server, comparing with `previous` (base) under a gate that passes and one that
    fails. Returns the folder, the CLI's CompletedProcess, and cand's final state, logs and task runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    from scorekeeper.flows.score import score_dataset
    from tests import prefect_session

    tmp_path = tmp_path_factory.mktemp("gates")
    write_rows(tmp_path / "test.csv", make_rows(13))
    common = ["run", "--input-uri", "test.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--num-processes", "1"]
    failed = _cli(*common, "--run-name", "base", "--gates", "accuracy>=0.99", "--gates", "evaluated>=13", cwd=tmp_path)

    params = dict(input_uri=str(tmp_path / "test.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "runs"), run_name="cand")
    params |= {"compare_to": "previous", "slice_columns": ["label", "review_id"]}
    with prefect_session.api():
        gates = {"accuracy_drop": "<=0 if significant", "accuracy": ">=0.99"}
        state = score_dataset(num_processes=1, gates=gates, return_state=True, **params)
        APILogWorker.drain_all(timeout=10)
        flow_run_id = state.state_details.flow_run_id
        with get_client(sync_client=True) as client:
            logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return tmp_path, failed, state, logs, tasks


def test_failed_gate_exits_4_with_outputs_published_then_a_run_compares_with_it(gated_runs):
    tmp_path, failed, _, _, _ = gated_runs
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

    # the second run compared itself with the first (its failed accuracy gate: the next test)
    metrics = json.loads((tmp_path / "runs" / "cand" / "report" / "metrics.json").read_text())
    comparison = metrics["comparison"]
    assert comparison["run"] == "base" and comparison["matched_on"] == "row_index" and comparison["rows_compared"] == 13
    assert comparison["flipped"] == {"right_to_wrong": 0, "wrong_to_right": 0, "other": 0} and comparison["mcnemar_p"] == 1.0
    assert comparison["deltas"]["accuracy"] == pytest.approx(0.0, abs=1e-12)
    assert [(g["gate"], g["passed"]) for g in metrics["gates"]] == [
        ("accuracy_drop <= 0 if significant", True),
        ("accuracy >= 0.99", False),
    ]
    assert [h["run_id"] for h in metrics["history"]] == ["base", "cand"]
    assert list(metrics["slices"]) == ["label", "review_id"] and len(metrics["slices"]["review_id"]) == 13


def test_a_failed_gate_is_one_log_line_and_a_failed_flow_run_without_a_traceback(gated_runs):
    """In the flow run (what an operator sees in Prefect's UI): the flow run Failed with the gates'
    line as its message, that line logged once at ERROR, no traceback, every task Completed."""
    tmp_path, _, state, logs, tasks = gated_runs
    line = "1 of 2 quality gate(s) failed: accuracy >= 0.99: accuracy is "
    assert state.is_failed() and state.message.startswith(line), state.message
    assert state.message.endswith(f"the outputs are published in {tmp_path / 'runs' / 'cand'}")
    assert not [log.message for log in logs if "Traceback" in log.message or "GateFailed" in log.message], [log.message for log in logs]
    errors = [log.message for log in logs if log.level >= 40]
    assert errors == [state.message], errors
    assert tasks and all(t.state.is_completed() for t in tasks), [(t.name, t.state.name) for t in tasks]
    assert (tmp_path / "runs" / "cand" / "report" / "report.html").exists()

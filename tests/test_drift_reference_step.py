"""The drift_reference step (tasks/drift.py) without a server: which run `previous` is, and what is
refused before anything is scored; and the parameters' own checks."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest
from scorekeeper.report.publish import publish_complete
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.drift import resolve_drift_reference, resolve_drift_reference_task


def completed(root, name: str, model: str, adapter: str | None = None, finished: str = "2026-01-01", head: str = "single_label"):
    (root / name).mkdir()
    (root / name / RunFolder.PREDICTIONS).write_bytes(b"")
    (root / name / RunFolder.PLAN).write_text(json.dumps({"files": [], "model_fingerprint": model, "adapter_fingerprint": adapter}))
    run = RunFolder.from_uri(str(root / name))
    metrics = {"rows": 1, "scored": 1, "evaluated": 0, "head": head, "finished_at": finished}
    publish_complete(run, {"metrics.json": json.dumps(metrics).encode()}, finished)


def request(root, reference: str | None, **extra) -> ScoreRequest:
    return ScoreRequest(input_uri="in.csv", model_uri="m", output_uri=str(root), drift_reference=reference, **extra)


def test_previous_is_the_latest_completed_run_of_the_same_model_and_adapter(tmp_path):
    completed(tmp_path, "old", "model-a", finished="2026-01-01")
    completed(tmp_path, "mid", "model-a", finished="2026-01-02")
    completed(tmp_path, "other-model", "model-b", finished="2026-01-03")
    completed(tmp_path, "adapted", "model-a", adapter="lora", finished="2026-01-04")
    completed(tmp_path, "new", "model-a", finished="2026-01-05")
    assert resolve_drift_reference(request(tmp_path, "previous"), "new", "model-a", None) == "mid"  # this run excluded
    assert resolve_drift_reference(request(tmp_path, "previous"), "next", "model-a", "lora") == "adapted"
    assert resolve_drift_reference(request(tmp_path, None), "next", "model-a", None) is None
    with pytest.raises(InputError, match="no completed run under .* was scored with this run's model and adapter"):
        resolve_drift_reference(request(tmp_path, "previous"), "next", "model-c", None)


def test_an_unknown_unfinished_or_other_kind_of_reference_is_refused(tmp_path):
    completed(tmp_path, "base", "model-a")
    with pytest.raises(InputError, match="run 'nope' under .* does not exist"):
        resolve_drift_reference(request(tmp_path, "nope"), "new", "model-a", None)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / RunFolder.PLAN).write_text("{}")
    with pytest.raises(InputError, match="run 'half' under .* has not completed"):
        resolve_drift_reference(request(tmp_path, "half"), "new", "model-a", None)
    with pytest.raises(InputError, match="names this run"):
        resolve_drift_reference(request(tmp_path, "base"), "base", "model-a", None)
    context = SimpleNamespace(run_id="new", head="regression", model_fingerprint="model-a", adapter_fingerprint=None)
    with pytest.raises(InputError, match="scored a single_label head and this run a regression head"):
        resolve_drift_reference_task.fn(request(tmp_path, "base"), context)


def test_drift_parameters_are_checked_up_front():
    with pytest.raises(ValidationError, match="drift_reference '../x' must be 'previous' or the name of a run"):
        ScoreRequest(input_uri="in.csv", model_uri="m", output_uri="out", drift_reference="../x")
    with pytest.raises(ValidationError, match="gates drifted_signals measure against a reference run: set drift_reference too"):
        ScoreRequest(input_uri="in.csv", model_uri="m", output_uri="out", gates={"drifted_signals": "<=0"})
    with pytest.raises(ValidationError, match="drift_reference names this run"):
        ScoreRequest(input_uri="in.csv", model_uri="m", output_uri="out", run_name="a", drift_reference="a")
    with pytest.raises(ValidationError):
        ScoreRequest(input_uri="in.csv", model_uri="m", output_uri="out", drift_min_psi=-0.1)
    for auc in (0.49, 1.01, float("nan")):
        with pytest.raises(ValidationError, match="drift_min_auc"):
            ScoreRequest(input_uri="in.csv", model_uri="m", output_uri="out", drift_min_auc=auc)
    ok = ScoreRequest(
        input_uri="in.csv", model_uri="m", output_uri="out", drift_reference="previous", gates={"estimated_accuracy": ">=0.8"}
    )
    assert ok.drift_min_psi == 0.1 and ok.drift_min_auc == 0.55


def test_a_reference_whose_predictions_changed_since_it_completed_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "base").mkdir()
    pq.write_table(pa.table({"row_index": [0, 1, 2]}), tmp_path / "base" / RunFolder.PREDICTIONS)
    (tmp_path / "base" / RunFolder.PLAN).write_text(json.dumps({"files": [], "model_fingerprint": "m"}))
    metrics = {"rows": 3, "scored": 3, "evaluated": 0, "head": "single_label"}
    publish_complete(RunFolder.from_uri(str(tmp_path / "base")), {"metrics.json": json.dumps(metrics).encode()}, "2026-01-01")
    assert resolve_drift_reference(request(tmp_path, "base"), "new", "m", None) == "base"
    pq.write_table(pa.table({"row_index": [0, 1]}), tmp_path / "base" / RunFolder.PREDICTIONS)
    with pytest.raises(InputError, match="drift_reference: run 'base' .*predictions.parquet has 2 rows"):
        resolve_drift_reference(request(tmp_path, "base"), "new", "m", None)

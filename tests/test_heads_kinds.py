"""Which kind of head a model is, the head parameters, and how a range's outputs become its table
(pure functions: no model, no process)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from pydantic import ValidationError

from scorekeeper.cli import build_parser, request_options
from scorekeeper.errors import InputError, ModelError
from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import check_head_options, resolve_head, threshold_vector
from scorekeeper.params import SCORING_PARAMETERS, STAGING_PARAMETERS, ScoreRequest
from scorekeeper.worker.outputs import HeadOutputs, activate

BASE = {"input_uri": "in.csv", "model_uri": "m", "output_uri": "out"}
LABELS = ["toxic", "spam", "off_topic"]


def _config(outputs: int, problem_type=None) -> dict:
    return {"id2label": {str(i): f"LABEL_{i}" for i in range(outputs)}, "num_labels": outputs, "problem_type": problem_type}


@pytest.mark.parametrize(
    "requested, config, expected",
    [
        ("auto", _config(3), "single_label"),
        ("auto", _config(3, "single_label_classification"), "single_label"),
        ("auto", _config(3, "multi_label_classification"), "multi_label"),
        ("auto", _config(1, "multi_label_classification"), "multi_label"),
        ("auto", _config(1, "regression"), "regression"),
        ("auto", _config(2, "regression"), "regression"),
        ("regression", _config(1), "regression"),
        ("multi_label", _config(1), "multi_label"),
        ("multi_label", _config(3, "single_label_classification"), "multi_label"),  # the parameter wins
        ("single_label", _config(2, "multi_label_classification"), "single_label"),
    ],
)
def test_the_kind_follows_the_parameter_then_the_config(requested, config, expected):
    assert resolve_head(requested, config, "m") == expected


def test_one_logit_without_problem_type_is_refused_with_one_message_naming_both_choices():
    with pytest.raises(ModelError) as refused:
        resolve_head("auto", _config(1), "models/reward")
    message = str(refused.value)
    assert message.startswith("model in models/reward has a single output (num_labels=1) and its config names no problem_type")
    assert "'regression' scores the raw value" in message and "'multi_label' scores a one-logit binary classifier or reranker" in message
    with pytest.raises(ModelError, match="a softmax over one output is always 1.0"):
        resolve_head("single_label", _config(1, "regression"), "m")
    with pytest.raises(ModelError, match="config problem_type 'token_classification' is not one of"):
        resolve_head("auto", _config(3, "token_classification"), "m")


def test_head_parameters_change_predictions_and_staging_as_declared():
    assert {"head", "thresholds"} <= SCORING_PARAMETERS
    assert {"head", "label_delimiter", "label_columns"} <= STAGING_PARAMETERS
    assert ScoreRequest(**BASE).head == "auto" and ScoreRequest(**BASE).thresholds == 0.5


def test_thresholds_from_the_command_line_and_json():
    parser = build_parser()

    def parsed(*args):
        options = {k: v for k, v in vars(parser.parse_args(["run", *BASE_ARGS, *args])).items() if k != "command"}
        return ScoreRequest(**request_options(options))

    assert parsed("--thresholds", "0.4").thresholds == 0.4
    assert parsed("--thresholds", '{"spam": 0.3}').thresholds == {"spam": 0.3}
    assert parsed("--label-columns", "toxic,spam", "--label-columns", "off_topic").label_columns == LABELS
    assert parsed("--head", "multi_label", "--label-delimiter", ";").label_delimiter == ";"
    for bad in ("1.5", '{"spam": -0.1}', "{}", "lots", "nan"):
        with pytest.raises(ValidationError, match="thresholds"):
            parsed("--thresholds", bad)
    with pytest.raises(ValidationError, match="label_columns names 'spam' more than once"):
        ScoreRequest(**BASE, label_columns=["spam", "spam"])


BASE_ARGS = ["--input-uri", "in.csv", "--model-uri", "m", "--output-uri", "out"]


def test_head_options_are_checked_against_the_models_labels():
    check_head_options("multi_label", LABELS, {"spam": 0.3}, LABELS, {"micro_f1": ">=0.5", "subset_accuracy_drop": "<=0.01"})
    with pytest.raises(InputError, match=r"thresholds name label\(s\) the model does not have: 'ham'"):
        check_head_options("multi_label", LABELS, {"ham": 0.3}, [])
    with pytest.raises(InputError, match="thresholds apply to multi_label heads; this model's head is regression"):
        check_head_options("regression", ["score"], 0.4, [])
    with pytest.raises(InputError, match=r"'ham' is not a label of the model; the model's label\(s\) 'off_topic' have no column"):
        check_head_options("multi_label", LABELS, 0.5, ["toxic", "spam", "ham"])
    with pytest.raises(InputError, match="label_columns .* apply to multi_label heads"):
        check_head_options("single_label", LABELS, 0.5, LABELS)
    with pytest.raises(InputError, match=r"gate 'accuracy': unknown metric; gates read mae, .*\(this model's head is regression\)"):
        check_head_options("regression", ["score"], 0.5, [], {"accuracy": ">=0.9"})
    check_head_options("regression", ["score"], 0.5, [], {"mae": "<=0.1", "rmse_delta": "<=0", "r2": ">=0.5"})


def test_outputs_per_kind_in_float64():
    logits = torch.tensor([[0.0, 2.0, -1.0], [3.0, -3.0, 0.5]], dtype=torch.float32)
    assert torch.equal(activate(HeadKind.SINGLE_LABEL, logits), torch.softmax(logits.double(), -1))
    assert torch.equal(activate(HeadKind.MULTI_LABEL, logits), torch.sigmoid(logits.double()))
    assert torch.equal(activate(HeadKind.REGRESSION, logits), logits.double())
    assert activate(HeadKind.REGRESSION, logits).dtype == torch.float64


def _rows(n: int) -> pa.Table:
    return pa.table({"row_index": pa.array(range(10, 10 + n), pa.int64()), "id": pa.array([f"r{i}" for i in range(n)])})


def test_multi_label_table_predicts_strictly_above_each_threshold():
    probabilities = np.array([[0.5, 0.3, 0.9], [0.50000001, 0.2999, 0.1], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    outputs = HeadOutputs.of(HeadKind.MULTI_LABEL, LABELS, {"spam": 0.3})
    assert outputs.thresholds.tolist() == threshold_vector({"spam": 0.3}, LABELS) == [0.5, 0.3, 0.5]
    table = outputs.table(_rows(4), probabilities)
    assert table.column_names == ["row_index", "id", "predicted_labels", "probabilities"]
    assert table.schema.field("predicted_labels").type == pa.list_(pa.string())
    assert table.schema.field("probabilities").type == pa.list_(pa.float64())
    assert table.column("predicted_labels").to_pylist() == [["off_topic"], ["toxic"], [], LABELS]
    assert table.column("probabilities").to_pylist() == probabilities.tolist()


def test_multi_label_table_over_random_outputs_matches_a_row_by_row_rule():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n, k = int(rng.integers(0, 30)), int(rng.integers(1, 6))
        labels = [f"l{j}" for j in range(k)]
        probabilities = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=(n, k)) if rng.random() < 0.5 else rng.random((n, k))
        thresholds = {name: float(rng.choice([0.0, 0.25, 0.5, 1.0])) for name in labels if rng.random() < 0.5}
        table = HeadOutputs.of(HeadKind.MULTI_LABEL, labels, thresholds).table(_rows(n), probabilities)
        expected = [[name for j, name in enumerate(labels) if row[j] > thresholds.get(name, 0.5)] for row in probabilities]
        assert table.column("predicted_labels").to_pylist() == expected


def test_regression_table_one_output_and_several():
    one = HeadOutputs.of(HeadKind.REGRESSION, ["score"], 0.5).table(_rows(2), np.array([[1.5], [-2.25]]))
    assert one.column_names == ["row_index", "id", "prediction"] and one.schema.field("prediction").type == pa.float64()
    assert one.column("prediction").to_pylist() == [1.5, -2.25]
    several = HeadOutputs.of(HeadKind.REGRESSION, ["a", "b"], 0.5).table(_rows(2), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert several.schema.field("prediction").type == pa.list_(pa.float64())
    assert several.column("prediction").to_pylist() == [[1.0, 2.0], [3.0, 4.0]]


def test_compare_to_a_run_of_another_kind_of_head_is_refused_before_scoring(tmp_path):
    import hashlib
    import json
    from types import SimpleNamespace

    from scorekeeper.run_folder import CompletionRecord, RunFolder
    from scorekeeper.run_seal import seal_outputs
    from scorekeeper.tasks.compare import resolve_baseline_task

    (tmp_path / "in.csv").write_text("review_id,text\nr1,a\n")
    base = tmp_path / "runs" / "base"
    (base / "report").mkdir(parents=True)
    metrics = json.dumps({"head": "single_label"}).encode()
    (base / "report" / "metrics.json").write_bytes(metrics)
    (base / "plan.json").write_text(json.dumps({"files": []}))
    (base / "request.json").write_text(json.dumps({"id_column": "review_id"}))
    (base / "predictions.parquet").write_bytes(b"")
    record = CompletionRecord(
        run_id="base", finished_at="2026-12-01T00:00:00+00:00", files={"metrics.json": hashlib.sha256(metrics).hexdigest()},
        outputs=seal_outputs(RunFolder.from_uri(str(base))),
    )  # fmt: skip
    (base / "complete.json").write_bytes(record.to_bytes())  # a completed run: history and compare_to trust only this
    request = ScoreRequest(
        input_uri=str(tmp_path / "in.csv"), model_uri="m", output_uri=str(tmp_path / "runs"), id_column="review_id", compare_to="base"
    )
    with pytest.raises(InputError, match="compare_to: run 'base' scored a single_label head and this run a regression head"):
        resolve_baseline_task.fn(request, SimpleNamespace(run_id="new", head="regression", templates={}))
    assert resolve_baseline_task.fn(request, SimpleNamespace(run_id="new", head="single_label", templates={})) == "base"


def test_paired_error_changes_from_block_sums():
    from scorekeeper.evaluation.regression import paired_error_changes

    rng = np.random.default_rng(3)
    y = rng.normal(size=200)
    this, other = y + rng.normal(scale=0.5, size=200), y + rng.normal(scale=0.7, size=200)
    e1, e0 = this - y, other - y
    sums = np.column_stack([np.ones(200), np.abs(e1), np.abs(e0), e1**2, e0**2])  # one row per block
    found = paired_error_changes(sums)
    assert found["mae"]["delta"] == pytest.approx(np.abs(e1).mean() - np.abs(e0).mean(), rel=1e-12)
    assert found["rmse"]["delta"] == pytest.approx(np.sqrt((e1**2).mean()) - np.sqrt((e0**2).mean()), rel=1e-12)
    for name in ("mae", "rmse"):
        low, high = found[name]["ci"]
        assert low < found[name]["delta"] < high < 0  # the noisier run is worse, and the interval says so
    same = paired_error_changes(np.column_stack([np.ones(5), np.ones(5), np.ones(5), np.ones(5), np.ones(5)]))
    assert same["mae"]["delta"] == 0.0 and same["mae"]["ci"] == [0.0, 0.0]


def test_the_finite_score_check_reads_every_heads_table():
    from scorekeeper.worker.shards import non_finite_rows

    multi = HeadOutputs.of(HeadKind.MULTI_LABEL, LABELS, 0.5).table(
        _rows(3), np.array([[0.1, 0.9, 0.5], [np.nan, 0.2, 0.3], [0.0, 1.0, 1.0]])
    )
    assert non_finite_rows(multi).tolist() == [1]
    one = HeadOutputs.of(HeadKind.REGRESSION, ["score"], 0.5).table(_rows(3), np.array([[1.0], [np.inf], [-2.0]]))
    assert non_finite_rows(one).tolist() == [1]
    several = HeadOutputs.of(HeadKind.REGRESSION, ["a", "b"], 0.5).table(_rows(2), np.array([[1.0, np.nan], [3.0, 4.0]]))
    assert non_finite_rows(several).tolist() == [0]


def test_gates_are_parsed_against_a_head_given_as_a_parameter():
    from pydantic import ValidationError

    base = {"input_uri": "in.csv", "model_uri": "m", "output_uri": "out"}
    ScoreRequest(**base, head="regression", gates={"mae": "<=0.1", "r2": ">=0.5"})
    with pytest.raises(ValidationError, match="gate 'accuracy': unknown metric; gates read mae"):
        ScoreRequest(**base, head="regression", gates={"accuracy": ">=0.9"})
    # `auto`: any head's names until the model is opened (then check_head_options parses them again)
    ScoreRequest(**base, gates={"accuracy": ">=0.9", "mae": "<=0.1"})

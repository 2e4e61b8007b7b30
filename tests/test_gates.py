"""Quality gates: the forms accepted, refused up front (exit 2, nothing written), their verdicts, and a
failed gate failing the run (CLI exit 4) with its outputs published."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from scorekeeper.cli import main
from scorekeeper.errors import GateFailed
from scorekeeper.gates import evaluate_gates, failure_message, gates_from_options, parse_gate
from scorekeeper.params import ScoreRequest
from scorekeeper.request_record import RequestRecord, check_resumable
from scorekeeper.tasks.gates import enforce_gates

METRICS = {
    "evaluated": 200,
    "accuracy": 0.82,
    "macro_f1": 0.75,
    "log_loss": 0.4,
    "roc_auc": {"macro": None, "per_class": {}},
    "top_k_accuracy": {"2": 0.93},
    "accuracy_ci": [0.76, 0.87],
    "comparison": {"mcnemar_p": 0.2, "deltas": {"macro_f1": -0.03, "accuracy": 0.01}, "flipped": {"right_to_wrong": 4}},
}


@pytest.mark.parametrize(
    "spec,op,limit,significant",
    [
        (">=0.9", ">=", 0.9, False),
        (" > 1e-3 ", ">", 0.001, False),
        ("<=0.01 if significant", "<=", 0.01, True),
        ("<.5 WHEN significant", "<", 0.5, True),
    ],
)
def test_gate_forms(spec, op, limit, significant):
    gate = parse_gate("macro_f1_drop", spec)
    assert (gate.op, gate.limit, gate.if_significant) == (op, limit, significant)


@pytest.mark.parametrize(
    "metric,spec,message",
    [
        ("acuracy", ">=0.9", "gate 'acuracy': unknown metric"),
        ("accuracy", "=0.9", "is not OP NUMBER"),
        ("accuracy", ">= high", "is not OP NUMBER"),
        ("accuracy", ">=0.9 if significant", "'if significant' applies to comparison gates only"),
    ],
)
def test_bad_gates_are_refused_naming_the_gate(metric, spec, message):
    with pytest.raises(ValueError, match=message):
        parse_gate(metric, spec)
    with pytest.raises(ValidationError, match=message):
        ScoreRequest(input_uri="x", model_uri="m", output_uri="o", gates={metric: spec})


def test_comparison_gates_need_compare_to_and_compare_to_is_not_this_run():
    with pytest.raises(ValidationError, match="gates macro_f1_drop compare with another run: set compare_to too"):
        ScoreRequest(input_uri="x", model_uri="m", output_uri="o", gates={"macro_f1_drop": "<=0.01"})
    with pytest.raises(ValidationError, match="compare_to names this run"):
        ScoreRequest(input_uri="x", model_uri="m", output_uri="o", run_name="r1", compare_to="r1")
    with pytest.raises(ValidationError, match="compare_to '../x' must be 'previous' or the name of a run"):
        ScoreRequest(input_uri="x", model_uri="m", output_uri="o", compare_to="../x")


def test_cli_gate_options_repeated_or_json():
    assert gates_from_options(["accuracy>=0.9", "macro_f1_drop <= 0.01 if significant", '{"ece": "<0.1"}']) == {
        "accuracy": ">=0.9",
        "macro_f1_drop": "<= 0.01 if significant",
        "ece": "<0.1",
    }
    with pytest.raises(ValueError, match="more than one gate on 'accuracy'"):
        gates_from_options(["accuracy>=0.9", '{"accuracy": ">0.8"}'])
    with pytest.raises(ValueError, match="is not METRIC OP NUMBER"):
        gates_from_options(["accuracy"])


@pytest.mark.parametrize(
    "gates",
    [["--gates", "acuracy>=0.9"], ["--gates", "accuracy=>0.9"], ["--gates", "macro_f1_drop<=0.01"], ["--gates", "{bad json"]],
)
def test_cli_refuses_a_bad_gate_before_anything_is_written(tmp_path, capsys, gates):
    code = main(["run", "--input-uri", "x.csv", "--model-uri", "m", "--output-uri", str(tmp_path / "runs"), *gates])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("scorekeeper: error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def test_verdicts():
    gates = {
        "accuracy": ">=0.8",
        "macro_f1": ">0.8",
        "roc_auc_macro": ">=0.5",
        "top_2_accuracy": ">=0.9",
        "accuracy_ci_low": ">0.75",
        "macro_f1_drop": "<=0.01",
        "accuracy_drop": "<=0",
        "right_to_wrong": "<5",
    }
    results = {r.metric: r.model_dump(exclude_unset=True) for r in evaluate_gates(gates, METRICS)}
    assert [r.metric for r in evaluate_gates(gates, METRICS)] == list(gates)
    assert results["accuracy"] == {"gate": "accuracy >= 0.8", "metric": "accuracy", "value": 0.82, "limit": 0.8, "passed": True}
    assert not results["macro_f1"]["passed"]
    assert results["roc_auc_macro"]["value"] is None and not results["roc_auc_macro"]["passed"]  # cannot be checked: fails
    assert results["top_2_accuracy"]["passed"] and results["accuracy_ci_low"]["passed"] and results["right_to_wrong"]["passed"]
    assert results["macro_f1_drop"]["value"] == pytest.approx(0.03) and not results["macro_f1_drop"]["passed"]  # drop = other - this
    assert results["accuracy_drop"]["value"] == pytest.approx(-0.01) and results["accuracy_drop"]["passed"]

    # `if significant` reads the gated metric's own paired test, not McNemar's test on accuracy
    noise = {"delta": -0.03, "ci": [-0.07, 0.01], "p": 0.2, "method": "paired_bootstrap", "se": 0.02}
    tested = METRICS | {"comparison": METRICS["comparison"] | {"mcnemar_p": 0.01, "metric_tests": {"macro_f1": noise}}}
    significant = evaluate_gates({"macro_f1_drop": "<=0.01 if significant"}, tested)[0]
    assert significant.passed and significant.significant is False and significant.p == 0.2  # noise: passes
    assert significant.method == "paired_bootstrap" and significant.ci == [-0.01, 0.07]  # a drop's interval: the delta's, negated
    strict = METRICS | {"comparison": METRICS["comparison"] | {"mcnemar_p": 0.5, "metric_tests": {"macro_f1": noise | {"p": 0.01}}}}
    assert not evaluate_gates({"macro_f1_drop": "<=0.01 if significant"}, strict)[0].passed

    message = failure_message(evaluate_gates(gates, METRICS))
    assert message.startswith("3 of 8 quality gate(s) failed: macro_f1 > 0.8: macro_f1 is 0.75")
    assert "roc_auc_macro >= 0.5: roc_auc_macro is no value" in message and "macro_f1_drop <= 0.01: macro_f1_drop is 0.03" in message
    with pytest.raises(GateFailed, match="quality gate.*published in /runs/r1") as failed:
        enforce_gates(evaluate_gates(gates, METRICS), "/runs/r1")
    assert failed.value.exit_code == 4
    enforce_gates(evaluate_gates({"accuracy": ">=0.8"}, METRICS), "/runs/r1")
    enforce_gates(None, "/runs/r1")


def test_a_resume_may_change_compare_to_and_gates():
    base = ScoreRequest(input_uri="x", model_uri="m", output_uri="o", run_name="r")
    now = ScoreRequest(input_uri="x", model_uri="m", output_uri="o", run_name="r", compare_to="previous", gates={"accuracy_drop": "<=0.01"})
    check_resumable(RequestRecord.of(base, "r", "a", None), RequestRecord.of(now, "r", "a", None))
    assert json.loads(json.dumps(now.public_dict()))["gates"] == {"accuracy_drop": "<=0.01"}


def test_a_drop_equal_to_its_limit_passes_despite_float_rounding():
    """0.90 - 0.89 is 0.010000000000000009 in floats: a gate `<= 0.01` on it must pass."""
    metrics = {"accuracy": 0.89, "comparison": {"deltas": {"accuracy": 0.89 - 0.90}, "mcnemar_p": 0.5}}
    (result,) = evaluate_gates({"accuracy_drop": "<=0.01"}, metrics)
    assert result.value > 0.01 and result.passed
    (strict,) = evaluate_gates({"accuracy_drop": "<0.01"}, metrics)
    assert not strict.passed


def test_a_gate_on_a_metric_the_head_lacks_is_an_input_error_naming_it_and_the_heads_metrics():
    """evaluate_gates checks the gates against the run's head as opening the run does (one place,
    gates.head_gates): a regression run's metrics.json gated on hamming_loss is refused in words."""
    from scorekeeper.errors import InputError
    from scorekeeper.heads import check_head_options

    for check in (
        lambda: evaluate_gates({"hamming_loss": "<=0.1"}, {"head": "regression", "mae": 0.3}),
        lambda: check_head_options("regression", ["score"], 0.5, [], {"hamming_loss": "<=0.1"}),
    ):
        with pytest.raises(InputError) as refused:
            check()
        message = str(refused.value)
        assert "'hamming_loss'" in message and "mae" in message and "kendall_tau_b" in message and "head is regression" in message

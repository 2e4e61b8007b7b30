"""The labelling loop through the real flow and command (docs/labelling.md): a labelled reference run,
a nightly run without labels that draws a plan against it, the plan's labels handed back under the
same run name (nothing scored again; one plan row left unlabelled, rows outside the plan labelled),
the plan pinned to the reference it was drawn against when the rerun names none, and the refusals (another budget,
the labels of another run's plan, a plan over no rows): one line, exit 2, nothing published."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.run_folder import RunFolder
from tests import labelling_reference as ref
from tests.helpers import cli_in_process, make_rows, run_flow, write_rows
from tests.test_flow_cli import _cli

pytestmark = pytest.mark.integration


def metrics_of(run) -> dict:
    return json.loads((run / "report" / "metrics.json").read_text())


def test_the_nightly_loop_plan_labels_back_pinned_plan_and_refusals(tmp_path, models):
    labelled = make_rows(80, seed=1)
    nightly = make_rows(100, seed=2)
    write_rows(tmp_path / "reference.csv", labelled)
    write_rows(tmp_path / "nightly.csv", [{k: v for k, v in r.items() if k != "label"} for r in nightly])
    common = {"model_uri": models["bert"], "output_uri": str(tmp_path / "runs"), "id_column": "review_id"}
    run_flow(input_uri=str(tmp_path / "reference.csv"), run_name="reference", **common)

    # the nightly run draws its plan against the reference; the summary says what to label and how.
    # Its runs go through the flow in this process; the command is used where it refuses (exit 2, below)
    nightly_run = {"input_uri": str(tmp_path / "nightly.csv"), "run_name": "day1", "label_budget": 40, **common}
    run_flow(label_column=None, drift_reference="reference", **nightly_run)
    day1 = tmp_path / "runs" / "day1"
    plan = metrics_of(day1)["label_plan"]
    assert plan["budget"] == 40 and plan["sampling"] == "active" and plan["key"] == "day1" and plan["reference"] == "reference"
    assert "prediction_powered" not in metrics_of(day1)
    file = pq.read_table(day1 / "report" / "label_plan.parquet").to_pydict()
    assert len(file["row_index"]) == plan["rows"] > 0
    # the draw recomputed from the run id and the file's own inclusion probabilities
    assert all((ref.draw("day1", i) < p) for i, p in zip(file["row_index"], file["inclusion_probability"], strict=True))
    report = (day1 / "report" / "report.md").read_text()
    assert f"Label the {plan['rows']} rows" in report and "--ground-truth-uri labels.csv" in report and "--run-name day1" in report
    assert "prefect deployment run" in report

    # labels back: every plan row but one, and five rows outside the plan, as labels.csv joined on review_id
    truth = {r["review_id"]: r["label"] for r in nightly}
    plan_ids = file["id"]
    outside = [r["review_id"] for r in nightly if r["review_id"] not in set(plan_ids)][:5]
    write_rows(tmp_path / "labels.csv", [{"review_id": i, "label": truth[i]} for i in plan_ids[1:] + outside])
    shard_times = {p.name: p.stat().st_mtime_ns for p in (day1 / "work" / "commits").rglob("*") if p.is_file()}
    # without drift_reference now: the pinned plan keeps the reference it was drawn against
    run_flow(label_column="label", ground_truth_uri=str(tmp_path / "labels.csv"), **nightly_run)
    assert {
        p.name: p.stat().st_mtime_ns for p in (day1 / "work" / "commits").rglob("*") if p.is_file()
    } == shard_times  # nothing scored again
    metrics = metrics_of(day1)
    assert metrics["label_plan"] == plan  # pinned: the same rows, the reference it was drawn against
    assert pq.read_table(day1 / "report" / "label_plan.parquet").to_pydict() == file
    pp = metrics["prediction_powered"]
    assert pp["plan_rows"] == plan["rows"] and pp["labelled"] == plan["rows"] - 1 and pp["unlabelled_plan_rows"] == 1
    assert pp["labelled_outside_plan"] == 5 and pp["response_rate"] == pytest.approx((plan["rows"] - 1) / plan["rows"])
    assert pp["small_sample"] is True and set(pp["metrics"]) == {"accuracy", "macro_f1"}
    # accuracy recomputed from the plan file and the labels (section 13, the reference's f = label_free)
    labels = metrics["labels"]
    predicted = dict(zip(file["id"], file["predicted_id"], strict=True))
    keep = [k for k, i in enumerate(file["id"]) if i in set(plan_ids[1:])]
    y = np.array([float(labels.index(truth[file["id"][k]]) == predicted[file["id"][k]]) for k in keep])
    f = np.array(file["label_free"])[keep]
    pi = np.array(file["inclusion_probability"])[keep] * pp["response_rate"]
    lam = ref.lam_of(y, f, pi)
    total_f = _all_rows_label_free(day1)
    value = (lam * total_f + np.sum((y - lam * f) / pi)) / pp["rows"]
    assert pp["metrics"]["accuracy"]["lambda"] == pytest.approx(lam, rel=1e-9)
    assert pp["metrics"]["accuracy"]["value"] == pytest.approx(value, rel=1e-9)
    report = (day1 / "report" / "report.md").read_text()
    assert "## Prediction-powered metrics" in report and "a sample chosen by uncertainty" in report

    # refusals by the command, before anything is published: another budget; another run's plan (these
    # two by its main() here: its prechecks refuse them before anything starts); a plan over no rows
    # (refused by the flow: the command in a process of its own)
    base = ["run", "--input-uri", "nightly.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--id-column", "review_id"]
    before = (day1 / "report" / "metrics.json").read_bytes()
    other = cli_in_process(*base, "--label-column", "none", "--label-budget", "50", "--run-name", "day1", cwd=tmp_path)
    assert other.returncode == 2 and "label_budget 40 and label_sampling active" in other.stderr, other.stderr[-2000:]
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
    write_rows(tmp_path / "elsewhere.csv", [{"review_id": i, "label": truth[i]} for i in outside])
    wrong = cli_in_process(*base, "--label-column", "label", "--ground-truth-uri", "elsewhere.csv", "--label-budget", "40",
                 "--drift-reference", "reference", "--run-name", "day1", cwd=tmp_path)  # fmt: skip
    assert wrong.returncode == 2 and "labels none of the" in wrong.stderr and "another run's plan" in wrong.stderr, wrong.stderr[-2000:]
    assert wrong.stderr.count("\n") == 1 and "Traceback" not in wrong.stderr, wrong.stderr[-2000:]  # refused before the flow starts
    assert (day1 / "report" / "metrics.json").read_bytes() == before
    (tmp_path / "empty.csv").write_text("review_id,text\n")
    empty = _cli(*base[:2], "empty.csv", *base[3:], "--label-column", "none", "--label-budget", "10", "--run-name", "empty", cwd=tmp_path)
    assert empty.returncode == 2 and "no rows" in empty.stderr and empty.stderr.count("\n") == 1, empty.stderr[-2000:]
    assert not (tmp_path / "runs" / "empty" / RunFolder.METRICS).exists()


def _all_rows_label_free(run) -> float:
    """sum over every scored row of accuracy's f: the reference's a_b of the row's score bin."""
    reference = metrics_of(run.parent / "reference")
    score = np.array(pq.read_table(run / "predictions.parquet").column("score").to_pylist())
    probs = np.array(pq.read_table(run / "predictions.parquet").column("probabilities").to_pylist())
    f, _ = ref.single_label_f(probs, probs.argmax(1), reference, reference["labels"])
    assert len(f) == len(score)
    return float(f.sum())


def test_a_budget_over_the_runs_rows_takes_every_row_with_certainty(tmp_path, models):
    """A budget of N rows or more: sum pi = min(B, N) = N with every pi <= 1 takes every row with pi
    exactly 1. With every row labelled (the labels in the input), the prediction-powered values are the
    run's own: no width, every lambda 0 (its denominator sums (1 - pi) = 0), the classical the same, and
    estimate_bias's interval of width 0, its p from the label-free estimate's own variance alone."""
    n = 45
    rows = make_rows(n, seed=3)
    write_rows(tmp_path / "in.csv", rows)
    result = run_flow(
        input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "runs"), run_name="all",
        id_column="review_id", label_budget=n + 7,
    )  # fmt: skip
    metrics = result.metrics
    plan = metrics["label_plan"]
    assert (plan["rows"], plan["expected_rows"], plan["budget"], plan["sampling"]) == (n, n, n + 7, "active")
    file = pq.read_table(tmp_path / "runs" / "all" / "report" / "label_plan.parquet").to_pydict()
    assert file["row_index"] == list(range(n)) and file["inclusion_probability"] == [1.0] * n
    pp = metrics["prediction_powered"]
    assert (pp["rows"], pp["plan_rows"], pp["labelled"], pp["unlabelled_plan_rows"], pp["labelled_outside_plan"]) == (n, n, n, 0, 0)
    assert pp["response_rate"] == 1.0 and pp["small_sample"] is True and "assumptions" not in pp

    labels = metrics["labels"]
    predicted = np.array(result.predictions.column("predicted_id").to_pylist())
    truth = np.array([labels.index(r["label"]) for r in rows])
    accuracy = pp["metrics"]["accuracy"]
    assert accuracy["value"] == pytest.approx(float(np.mean(predicted == truth)), abs=1e-12) == metrics["accuracy"]
    assert accuracy["lambda"] == 0.0 and accuracy["ci"] == [accuracy["value"]] * 2
    assert accuracy["classical"] == pytest.approx(accuracy["value"], abs=1e-12) and accuracy["classical_ci"] == [accuracy["classical"]] * 2
    macro = pp["metrics"]["macro_f1"]
    f1s = []
    for k in range(len(labels)):
        tp, fp, fn = (
            int(np.sum(c)) for c in ((predicted == k) & (truth == k), (predicted == k) & (truth != k), (predicted != k) & (truth == k))
        )
        if 2 * tp + fp + fn:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    assert macro["value"] == pytest.approx(float(np.mean(f1s)), abs=1e-12) and macro["ci"] == [macro["value"]] * 2
    assert set(macro["lambda"]) == {f"{part}:{label}" for label in labels for part in ("TP", "FP", "FN")}
    assert set(macro["lambda"].values()) == {0.0} and macro["classical_ci"] == [macro["classical"]] * 2

    score = np.array(result.predictions.column("score").to_pylist())  # no reference: f is the score
    bias = pp["estimate_bias"]
    value = float(score.mean() - np.mean(predicted == truth))
    assert bias["metric"] == "accuracy" and bias["label_free"] == pytest.approx(float(score.mean()), rel=1e-12)
    assert bias["value"] == pytest.approx(value, abs=1e-12) and bias["ci"] == [bias["value"]] * 2
    assert bias["p"] == pytest.approx(ref.bias_p(value, 0.0, float(np.sum(score * (1 - score))) / n**2), rel=1e-9)

    # the plan is pinned: a rerun with its budget but another sampling is refused, one line, exit 2, nothing written
    published = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "all" / "report").iterdir() if p.is_file()}
    other = cli_in_process(
        "run", "--input-uri", "in.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--id-column", "review_id",
        "--run-name", "all", "--label-budget", str(n + 7), "--label-sampling", "uniform", cwd=tmp_path,
    )  # fmt: skip
    assert other.returncode == 2 and f"label_budget {n + 7} and label_sampling active" in other.stderr, other.stderr[-2000:]
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "all" / "report").iterdir() if p.is_file()} == published


def _head_input(path, head: str, n: int, seed: int, outputs: tuple[str, ...] = ()) -> None:
    """n rows of a head's input (Parquet) with review_id, text and its ground truth in `truth`: every
    5th row without one. multi_label: lists of the model's label names (row 2: an unknown name as well,
    row 3: an empty list); regression: a number, or a list of numbers with several outputs."""
    rng = np.random.default_rng(seed)
    rows = make_rows(n, seed=seed)
    if head == "multi_label":
        values: list = [[name for name in ML_LABELS if rng.random() < 0.35] for _ in range(n)]
        values[2], values[3] = [*values[2], "ham"], []
        column = pa.array([None if i % 5 == 4 else v for i, v in enumerate(values)], pa.list_(pa.string()))
    elif len(outputs) > 1:
        column = pa.array([None if i % 5 == 4 else rng.normal(0, 0.5, len(outputs)).tolist() for i in range(n)], pa.list_(pa.float64()))
    else:
        column = pa.array([None if i % 5 == 4 else float(rng.normal(0, 0.5)) for i in range(n)], pa.float64())
    table = pa.table({"review_id": [r["review_id"] for r in rows], "text": [r["text"] for r in rows], "truth": column})
    pq.write_table(table, path)


ML_LABELS = ("toxic", "spam", "off_topic", "praise")


@pytest.mark.parametrize(
    ("kind", "sampling", "with_reference"),
    # The flow's wiring of a drift reference into the plan once (regression2); the head kinds' own
    # statements under every kind x sampling x reference: tests/test_labelling.py on generated runs
    [("multi_label", "active", False), ("regression", "uniform", False), ("regression2", "active", True)],
)
def test_every_head_kind_through_the_flow_is_section_13s(tmp_path, kind, sampling, with_reference):
    """A multi-label run and regression runs (one output, two outputs) scored by the flow with their
    labels in the input, with and without a drift reference: metrics.json label_plan,
    report/label_plan.parquet and prediction_powered recomputed from the run's published files by the
    independent implementation (tests/labelling_reference.py, as tests/test_labelling.py does from
    generated runs): plan rows without a label, labels outside the plan."""
    from tests.models import build_multi_label_classifier, build_regression_model
    from tests.test_labelling import close, expected_plan, expected_pp, truth_targets

    outputs = ("helpful", "harmless") if kind == "regression2" else ("score",)
    if kind == "multi_label":
        model = str(build_multi_label_classifier(tmp_path / "model", "bert", labels=ML_LABELS, seed=41))
    else:
        model = str(build_regression_model(tmp_path / "model", "bert", outputs=outputs, seed=42, num_layers=1))
    head = "multi_label" if kind == "multi_label" else "regression"
    common = {"model_uri": model, "output_uri": str(tmp_path / "runs"), "id_column": "review_id", "label_column": "truth"}
    reference = None
    if with_reference:
        _head_input(tmp_path / "ref.parquet", head, 80, 21, outputs)
        run_flow(input_uri=str(tmp_path / "ref.parquet"), run_name="ref", **common)
        reference = metrics_of(tmp_path / "runs" / "ref")
    budget, n = 25, 70
    _head_input(tmp_path / "cur.parquet", head, n, 22, outputs)
    drift = {"drift_reference": "ref"} if with_reference else {}
    result = run_flow(
        input_uri=str(tmp_path / "cur.parquet"), run_name="cur", label_budget=budget, label_sampling=sampling, **common, **drift
    )
    metrics = result.metrics
    assert metrics["head"] == head

    root = tmp_path / "runs"
    plan = expected_plan(root, "cur", kind, reference, budget, sampling)
    want_plan = {
        "sampling": sampling, "budget": budget, "rows": int(plan["planned"].sum()), "expected_rows": float(plan["pi"].sum()),
        "key": "cur", "reference": "ref" if with_reference else None,
    }  # fmt: skip
    close(metrics["label_plan"], want_plan, "label_plan")
    file = pq.read_table(root / "cur" / "report" / "label_plan.parquet").to_pydict()
    rows = np.flatnonzero(plan["planned"])
    assert list(file) == ["row_index", "id", "text", *[c for c in result.predictions.column_names if c not in ("row_index", "id")],
                          "inclusion_probability", "uncertainty", "label_free"]  # fmt: skip
    assert file["row_index"] == rows.tolist() and file["id"] == [f"r{i:05d}" for i in rows]
    schema = pq.read_schema(root / "cur" / "report" / "label_plan.parquet")
    assert str(schema.field("row_index").type) == "int64" and str(schema.field("id").type) == "string"
    assert [str(schema.field(c).type) for c in ("inclusion_probability", "uncertainty", "label_free")] == ["double"] * 3
    close(file["inclusion_probability"], plan["pi"][rows].tolist(), "inclusion_probability")
    close(file["uncertainty"], plan["u"][rows].tolist(), "uncertainty")
    close(file["label_free"], plan["f"][rows].tolist(), "label_free")

    targets = truth_targets(root, "cur", kind, plan)
    want = expected_pp(plan, targets, kind, reference, sampling, 0.0)
    got = dict(metrics["prediction_powered"])
    assert (got.pop("assumptions", None) is not None) == (want["unlabelled_plan_rows"] > 0)
    close(got, want, "prediction_powered")
    assert want["labelled"] > 0 and want["labelled_outside_plan"] > 0


def test_a_first_run_with_labels_outside_its_new_plan_is_evaluated_not_refused(tmp_path, models):
    """SPEC 13: ground truth on rows outside the plan takes no part (labelled_outside_plan). A run that
    draws its plan and is given, at once, ground_truth_uri labels for a few of its rows, none of them
    in the plan just drawn (a partial backfill), is evaluated over those rows with its plan and no
    prediction_powered: exit 0. (The refusal of "another run's plan's labels" is for labels handed
    back to a run whose plan was drawn before; this one's did not exist when the labels were made.)"""
    n, budget = 60, 10
    rows = make_rows(n, seed=5)
    write_rows(tmp_path / "in.csv", [{k: v for k, v in r.items() if k != "label"} for r in rows])
    planned = [ref.draw("backfill", i) < budget / n for i in range(n)]  # uniform: pi = B / N
    outside = [r for r, p in zip(rows, planned, strict=True) if not p][:5]
    write_rows(tmp_path / "labels.csv", [{"review_id": r["review_id"], "label": r["label"]} for r in outside])
    run = _cli(
        "run", "--input-uri", "in.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--id-column", "review_id",
        "--run-name", "backfill", "--ground-truth-uri", "labels.csv", "--label-budget", str(budget), "--label-sampling", "uniform",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = metrics_of(tmp_path / "runs" / "backfill")
    assert metrics["evaluated"] == 5 and metrics["label_plan"]["rows"] == sum(planned) > 0
    assert "prediction_powered" not in metrics
    file = pq.read_table(tmp_path / "runs" / "backfill" / "report" / "label_plan.parquet").to_pydict()
    assert file["row_index"] == [i for i, p in enumerate(planned) if p]

"""A multi-label and a regression run evaluated end to end: every ground-truth form gives the same
evaluation of the same predictions, unknown label names are counted, metrics.json says the head,
a failed gate exits 4 and a second run compares itself with the first."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import make_rows, run_flow, write_rows

pytestmark = pytest.mark.integration

LABELS = ["toxic", "spam", "off_topic", "praise"]
SCALARS = ("subset_accuracy", "hamming_loss", "micro_f1", "macro_f1", "log_loss", "lrap")


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    from tests.models import build_multi_label_classifier, build_regression_model

    root = tmp_path_factory.mktemp("eval_models")
    return {
        "multi_label": str(build_multi_label_classifier(root / "ml", "bert", labels=LABELS, seed=41)),
        "regression": str(build_regression_model(root / "reward", "llama", seed=42)),
    }


@pytest.fixture(scope="module")
def ml_run(tmp_path_factory, heads):
    """The multi-label input scored once by the flow (run ml, truth in the `labels` column, sliced by
    `source`), the input of both multi-label tests: (the flow's parameters, the truth, the result)."""
    root = tmp_path_factory.mktemp("ml_run")
    truth = _multi_label_input(root / "in.parquet")
    common = dict(input_uri=str(root / "in.parquet"), model_uri=heads["multi_label"], output_uri=str(root / "runs"), run_name="ml")
    common |= {"slice_columns": ["source"], "id_column": "review_id"}
    return common, truth, run_flow(1, label_column="labels", **common)


def _multi_label_input(path, n: int = 14):
    rng = np.random.default_rng(5)
    rows = make_rows(n, seed=6)
    truth = [[name for name in LABELS if rng.random() < 0.4] for _ in range(n)]
    truth[3] = []  # a row with no label
    with_unknown = [list(t) for t in truth]
    with_unknown[5] = with_unknown[5] + ["ham"]  # a name the model does not have: counted, not evaluated
    lists = pa.array([None if i == 7 else t for i, t in enumerate(with_unknown)], pa.list_(pa.string()))  # row 7: no truth
    delimited = pa.array([None if i == 7 else "|".join(t) for i, t in enumerate(with_unknown)])
    columns = {name: pa.array([None if i == 7 else int(name in t) for i, t in enumerate(truth)], pa.int64()) for name in LABELS}
    table = pa.table(
        {
            "review_id": [r["review_id"] for r in rows],
            "text": [r["text"] for r in rows],
            "labels": lists,
            "labels_text": delimited,
            "source": pa.array([None if i % 5 == 0 else "orphan" if i == 7 else ("web", "app")[i % 2] for i in range(n)]),
            **columns,
        }
    )
    pq.write_table(table, path)
    return truth


def test_every_ground_truth_form_evaluates_the_same_multi_label_predictions(ml_run):
    from sklearn.metrics import accuracy_score, f1_score, hamming_loss

    common, truth, first = ml_run
    metrics = first.metrics
    assert metrics["head"] == "multi_label" and metrics["rows"] == metrics["scored"] == 14 and metrics["evaluated"] == 13
    assert metrics["unknown_labels"] == {"ham": 1}
    assert metrics["truth_matching"]["rule"] == "name" and metrics["truth_matching"]["column_type"] == "text"
    assert set(metrics["per_label"]) == set(LABELS) and "accuracy" not in metrics
    # the wiring, checked against scikit-learn on the predictions as written
    kept = [i for i in range(14) if i != 7]
    y = np.array([[name in truth[i] for name in LABELS] for i in kept])
    predicted = first.predictions.column("predicted_labels").to_pylist()
    p = np.array([[name in predicted[i] for name in LABELS] for i in kept])
    assert metrics["subset_accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
    assert metrics["hamming_loss"] == pytest.approx(hamming_loss(y, p), abs=1e-12)
    # slices: the null group apart, the value of row 7 alone (no truth) has no group
    source = [None if i % 5 == 0 else ("web", "app")[i % 2] for i in kept]
    assert set(metrics["slices"]["source"]) == {"∅ (null)", "web", "app"}
    for value, group in metrics["slices"]["source"].items():
        rows = [k for k, v in enumerate(source) if v == (None if value == "∅ (null)" else value)]
        assert group["rows"] == len(rows) and group["subset_accuracy"] == pytest.approx(accuracy_score(y[rows], p[rows]), abs=1e-12)
        assert group["micro_f1"] == pytest.approx(f1_score(y[rows], p[rows], average="micro", zero_division=0), abs=1e-12)
    recorded = json.loads((first.run_dir / "report" / "metrics.json").read_text())
    assert recorded["head"] == "multi_label" and recorded["subset_accuracy"] == metrics["subset_accuracy"]

    # The same run again with the truth in other forms: nothing is scored again (the label
    # parameters change no prediction), the evaluation is the same.
    delimited = run_flow(1, label_column="labels_text", **common)
    assert delimited.scoring["rows_scored"] == 0
    assert {k: delimited.metrics[k] for k in SCALARS} == {k: metrics[k] for k in SCALARS}
    assert delimited.metrics["unknown_labels"] == {"ham": 1}
    columns = run_flow(1, label_columns=LABELS, **common)
    assert columns.metrics["evaluated"] == 13 and columns.metrics["unknown_labels"] == {}
    assert {k: columns.metrics[k] for k in SCALARS} == {k: metrics[k] for k in SCALARS}
    assert delimited.metrics["slices"] == columns.metrics["slices"] == metrics["slices"]


@pytest.fixture(scope="module")
def regression_runs(tmp_path_factory, heads):
    """Two scored runs of the regression head over one input (12 rows, row 4 without truth, a slice
    column with a null value): `base` through the command with a gate that fails, then `cand` by
    the flow in this process, compared with it (`previous`) under gates that pass. Returns the
    folder, the input's rows, the command's CompletedProcess and cand's result."""
    from tests.test_flow_cli import _cli

    root = tmp_path_factory.mktemp("regression")
    rows = make_rows(12, seed=8)
    for i, r in enumerate(rows):
        r["quality"] = "" if i == 4 else str(round(0.25 * i - 1.0, 2))  # row 4: no truth
        r["channel"] = "orphan" if i == 4 else "" if i % 4 == 0 else ("web", "app")[i % 2]  # "": a null slice value
        del r["label"]
    write_rows(root / "in.csv", rows)
    common = ["run", "--input-uri", "in.csv", "--model-uri", heads["regression"], "--output-uri", "runs", "--num-processes", "1"]
    common += ["--label-column", "quality", "--id-column", "review_id", "--slice-columns", "channel"]
    failed = _cli(*common, "--run-name", "base", "--gates", "mae<=0", "--gates", "r2>=-1000000", cwd=root)
    compared = run_flow(
        1, input_uri=str(root / "in.csv"), model_uri=heads["regression"], output_uri=str(root / "runs"), run_name="cand",
        label_column="quality", id_column="review_id", slice_columns=["channel"], compare_to="previous",
        gates={"mae_delta": "<=0", "rmse_drop": ">=0"},
    )  # fmt: skip
    return root, rows, failed, compared


def test_a_regression_run_with_ground_truth(regression_runs):
    """The module's first regression run (base), read back from its folder."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    root, rows, _, _ = regression_runs
    metrics = json.loads((root / "runs" / "base" / "report" / "metrics.json").read_text())
    predictions = pq.read_table(root / "runs" / "base" / "predictions.parquet")
    assert metrics["head"] == "regression" and metrics["evaluated"] == 11
    kept = [i for i in range(12) if i != 4]
    y = np.array([float(rows[i]["quality"]) for i in kept])
    yhat = predictions.column("prediction").to_numpy()[kept]
    assert metrics["mae"] == pytest.approx(mean_absolute_error(y, yhat), rel=1e-12)
    assert metrics["rmse"] == pytest.approx(mean_squared_error(y, yhat) ** 0.5, rel=1e-12)
    channel = [rows[i]["channel"] or None for i in kept]
    assert set(metrics["slices"]["channel"]) == {"∅ (null)", "web", "app"}  # row 4's value has no truth: no group
    for value, group in metrics["slices"]["channel"].items():
        members = [k for k, v in enumerate(channel) if v == (None if value == "∅ (null)" else value)]
        assert group["rows"] == len(members) and group["mae"] == pytest.approx(mean_absolute_error(y[members], yhat[members]), rel=1e-12)
        assert group["mae_ci"][0] <= group["mae"] <= group["mae_ci"][1]


def test_a_scoring_only_run_of_a_regression_head_with_two_outputs(tmp_path):
    """No ground truth, two outputs: the evaluation checked the truth's list lengths on an empty
    table whose value is a number, a DuckDB binder error after every row was scored."""
    from tests.models import build_regression_model

    model = str(build_regression_model(tmp_path / "two", "bert", outputs=("helpful", "harmless"), seed=43, num_layers=1))
    rows = make_rows(5, seed=9)
    for r in rows:
        del r["label"]
    write_rows(tmp_path / "in.csv", rows)
    result = run_flow(
        1, input_uri=str(tmp_path / "in.csv"), model_uri=model, output_uri=str(tmp_path / "runs"), run_name="s", id_column="review_id"
    )
    assert result.metrics["head"] == "regression" and result.metrics["scoring_only"] and result.metrics["labels"] == ["helpful", "harmless"]
    assert [len(v) for v in result.predictions.column("prediction").to_pylist()] == [2] * 5


def test_a_failed_regression_gate_exits_4_then_a_second_run_compares_with_it(regression_runs):
    """The module's two regression runs: the command's exit 4 and line; the second run (the flow in
    this process; the command's exit codes are the first run's and tests/test_gates_cli.py's)
    compared with the first."""
    root, _, failed, compared = regression_runs
    assert failed.returncode == 4, failed.stderr[-3000:]
    assert "Traceback" not in failed.stdout + failed.stderr
    assert "1 of 2 quality gate(s) failed: mae <= 0: mae is " in failed.stderr
    base = json.loads((root / "runs" / "base" / "report" / "metrics.json").read_text())
    assert base["head"] == "regression" and [g["passed"] for g in base["gates"]] == [False, True]
    assert (root / "runs" / "base" / "report" / "report.html").exists()

    assert [g["passed"] for g in compared.metrics["gates"]] == [True, True]
    comparison = compared.metrics["comparison"]
    assert comparison["run"] == "base" and comparison["rows_compared"] == 11 and comparison["matched_on"] == "row_index"
    assert comparison["mae"]["delta"] == 0.0 and comparison["mae"]["ci"] == [0.0, 0.0] and comparison["deltas"]["mae"] == 0.0
    # the same paired tests as a single-label comparison: per-row means by paired normal, rmse by the bootstrap
    tests = comparison["metric_tests"]
    assert set(tests) == set(comparison["deltas"])
    assert {k: (tests[k]["method"], tests[k]["delta"], tests[k]["p"]) for k in ("mae", "mse", "mape", "rmse")} == {
        "mae": ("paired_normal", 0.0, 1.0),
        "mse": ("paired_normal", 0.0, 1.0),
        "mape": ("paired_normal", 0.0, 1.0),
        "rmse": ("paired_bootstrap", 0.0, 1.0),
    }
    # every other delta has its test too (the same predictions: no change, p = 1)
    assert all(t["p"] is not None for t in tests.values()) and comparison["tests_counted"]["metric_tests"] == len(tests) == 12
    assert {k: tests[k]["method"] for k in ("r2", "pearson", "max_error", "spearman", "kendall_tau_b")} == dict.fromkeys(
        ("r2", "pearson", "max_error", "spearman", "kendall_tau_b"), "paired_bootstrap"
    )
    assert all(tests[k]["delta"] == 0.0 and tests[k]["p"] == 1.0 for k in ("r2", "explained_variance", "wmape", "median_absolute_error"))


def test_a_multi_label_comparison_counts_exact_match_and_per_label_flips(ml_run):
    """Against a copy of the run whose predictions were edited: the flips, McNemar and the per-label
    flips equal a row-by-row count in Python. (The run is the module's one scored multi-label run,
    evaluated again here, with the copy as its baseline.)"""
    import shutil

    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.evaluation.statistics.paired_tests import mcnemar_exact
    from scorekeeper.report.publish import publish_complete
    from scorekeeper.run_folder import RunFolder
    from scorekeeper.storage import Location
    from tests.helpers import open_run_and_plan

    common, truth, this = ml_run
    other = this.run_dir.parent / "other"
    shutil.copytree(this.run_dir, other)
    before = this.predictions.column("predicted_labels").to_pylist()
    before[0], before[1], before[2] = [], list(LABELS), list(truth[2])  # right or wrong on purpose
    table = pq.read_table(other / "predictions.parquet")
    pq.write_table(table.set_column(2, "predicted_labels", pa.array(before, pa.list_(pa.string()))), other / "predictions.parquet")
    # the copy completed with its edited predictions: sealed again, as the comparison checks every run it reads
    sealed = Location.from_uri(str(other))
    publish_complete(RunFolder(sealed.fs, sealed.path), {"metrics.json": (other / "report" / "metrics.json").read_bytes()}, "2026-01-01")

    request, context, manifest, _ = open_run_and_plan(label_column="labels", **common)
    comparison = evaluate_run(
        context.run, context.labels, manifest, EvaluationSettings(baseline=Location.from_uri(str(other)), head="multi_label")
    ).as_dict()["comparison"]
    after = this.predictions.column("predicted_labels").to_pylist()
    kept = [i for i in range(14) if i != 7]
    right = lambda predicted, i: set(predicted) == set(truth[i])  # noqa: E731
    r2w = sum(right(before[i], i) and not right(after[i], i) for i in kept)
    w2r = sum(not right(before[i], i) and right(after[i], i) for i in kept)
    assert comparison["rows_compared"] == 13 and comparison["matched_on"] == "row_index"
    assert comparison["flipped"]["right_to_wrong"] == r2w and comparison["flipped"]["wrong_to_right"] == w2r and r2w + w2r > 0
    assert comparison["mcnemar_p"] == mcnemar_exact(r2w, w2r)
    for name in LABELS:
        cell = lambda predicted, i: (name in predicted) == (name in truth[i])  # noqa: E731, B023
        b = sum(cell(before[i], i) and not cell(after[i], i) for i in kept)
        c = sum(not cell(before[i], i) and cell(after[i], i) for i in kept)
        assert comparison["per_label"][name] == {"right_to_wrong": b, "wrong_to_right": c, "mcnemar_p": mcnemar_exact(b, c)}
    assert set(comparison["deltas"]) >= {"subset_accuracy", "micro_f1", "hamming_loss", "roc_auc_macro", "ece_micro"}
    # paired tests as for single-label runs: per-row means by paired normal on the per-row
    # differences, subset accuracy by McNemar (as accuracy); what is not computed has no p
    from scorekeeper.evaluation.statistics import paired_tests as pt

    tests = comparison["metric_tests"]
    assert set(tests) == set(comparison["deltas"])
    wrong = lambda predicted, i: sum((n in predicted) != (n in truth[i]) for n in LABELS) / len(LABELS)  # noqa: E731
    f1 = lambda p, i: 2 * len(set(p) & set(truth[i])) / (len(p) + len(truth[i])) if p or truth[i] else 0.0  # noqa: E731
    for name, per_row in (("hamming_loss", wrong), ("samples_f1", f1)):
        diffs = np.array([per_row(after[i], i) - per_row(before[i], i) for i in kept])
        expected = pt.paired_normal(len(diffs), float(diffs.mean()), float(diffs.var(ddof=1)))
        assert tests[name]["method"] == "paired_normal"
        assert tests[name]["delta"] == pytest.approx(expected["delta"]) and tests[name]["p"] == pytest.approx(expected["p"])
    assert tests["subset_accuracy"]["method"] == "mcnemar_exact" and tests["subset_accuracy"]["p"] == mcnemar_exact(r2w, w2r)
    assert tests["lrap"]["delta"] == 0.0 and tests["ranking_loss"]["p"] == 1.0  # the same probabilities on both sides
    assert tests["log_loss"]["delta"] == 0.0 and comparison["tests_counted"]["metric_tests"] == len(tests) == 18
    assert {tests[k]["method"] for k in ("micro_f1", "macro_f1", "weighted_f1", "ece_macro", "average_precision_micro")} == {
        "paired_bootstrap"
    }
    assert tests["roc_auc_macro"]["method"] == tests["roc_auc_micro"]["method"] == "delong"
    assert tests["roc_auc_micro"]["delta"] == 0.0 and tests["ece_micro"]["delta"] == 0.0  # the same probabilities
    micro = lambda ps: 2 * sum(len(set(p) & set(truth[i])) for p, i in ps) / sum(len(p) + len(truth[i]) for p, i in ps)  # noqa: E731
    expected = micro([(after[i], i) for i in kept]) - micro([(before[i], i) for i in kept])
    assert tests["micro_f1"]["delta"] == pytest.approx(expected, abs=1e-12)

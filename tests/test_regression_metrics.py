"""The regression metrics of docs/contracts.md section 9 (scorekeeper/evaluation/regression.py), computed in DuckDB,
against scikit-learn and scipy on seeded random data: ties on both sides (rounded values), targets
equal to 0, constant targets and predictions, one row, rows without truth (null and NaN), values
that are not finite, and several outputs."""

from __future__ import annotations

import math
import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr
from sklearn.metrics import (
    explained_variance_score,
    max_error,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    median_absolute_error,
    r2_score,
    root_mean_squared_error,
)

from scorekeeper.evaluation.regression import LARGEST_ERRORS, regression_metrics

TOL = 1e-9


def make_con(prediction, truth, text=None):
    """reg_rows from Python lists: scalars, or lists (several outputs); None and NaN as given."""
    con = duckdb.connect()
    kind = pa.list_(pa.float64()) if isinstance(prediction[0], list) else pa.float64()
    columns = {
        "row_index": pa.array(range(len(prediction)), pa.int64()),
        "id": pa.array([f"r{i}" for i in range(len(prediction))]),
        "prediction": pa.array(prediction, kind),
        "truth": pa.array(truth, kind),
    }
    if text is not None:
        columns["text"] = pa.array(text)
    con.register("reg_rows", pa.table(columns))
    return con


def reference(y, p) -> dict:
    """scikit-learn's and scipy's values, with this project's nulls where they are undefined."""
    constant_y, constant_p = y.min() == y.max(), p.min() == p.max()
    nonzero = y != 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mae": mean_absolute_error(y, p),
            "mse": mean_squared_error(y, p),
            "rmse": root_mean_squared_error(y, p),
            "r2": None if constant_y else r2_score(y, p),
            "explained_variance": None if constant_y else explained_variance_score(y, p),
            "max_error": max_error(y, p),
            "median_absolute_error": median_absolute_error(y, p),
            "mape": mean_absolute_percentage_error(y[nonzero], p[nonzero]) if nonzero.any() else None,
            "mape_rows": int(nonzero.sum()),
            "wmape": np.abs(y - p).sum() / np.abs(y).sum() if np.abs(y).sum() else None,
            "pearson": None if constant_y or constant_p or len(y) < 2 else pearsonr(y, p).statistic,
            "spearman": None if constant_y or constant_p or len(y) < 2 else spearmanr(y, p).statistic,
            "kendall_tau_b": None if constant_y or constant_p or len(y) < 2 else kendalltau(y, p, variant="b").statistic,
            "mean_truth": y.mean(),
            "mean_prediction": p.mean(),
        }


def assert_matches(got: dict, ref: dict) -> None:
    for key, value in ref.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, rel=TOL, abs=TOL), key


def random_case(rng, n: int, decimals: int):
    y = np.round(rng.normal(2, 3, size=n), decimals)
    y[rng.random(n) < 0.1] = 0.0
    p = np.round(y * rng.uniform(0.3, 1.2) + rng.normal(0, 1.5, size=n), decimals)
    return y, p


@pytest.mark.parametrize("seed", range(6))
def test_one_output_matches_scikit_learn_and_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 600))
    y, p = random_case(rng, n, decimals=seed % 3)
    missing = rng.random(n) < 0.1
    truth = [None if m and i % 2 else (math.nan if m else v) for i, (m, v) in enumerate(zip(missing, y.tolist()))]
    got = regression_metrics(make_con(p.tolist(), truth), ["score"])
    assert got["evaluated"] == (~missing).sum() and got["no_truth_rows"] == missing.sum()
    ref = reference(y[~missing], p[~missing])
    assert_matches(got, ref)
    assert_matches(got["per_output"]["score"], ref)
    assert got["mape_rows"] == ref["mape_rows"] < got["evaluated"]


def test_kendall_on_many_rows_with_heavy_ties():
    """The bit-level count of concordant pairs, over enough rows and distinct ranks to need many levels."""
    rng = np.random.default_rng(42)
    y = np.round(rng.normal(size=5000), 2)
    p = np.round(y + rng.normal(size=5000), 1)
    got = regression_metrics(make_con(p.tolist(), y.tolist()), ["score"])
    assert got["kendall_tau_b"] == pytest.approx(kendalltau(y, p).statistic, abs=1e-12)
    assert got["spearman"] == pytest.approx(spearmanr(y, p).statistic, abs=1e-12)
    assert got["predicted_vs_true"]["score"]["kind"] == "density"
    cells = got["predicted_vs_true"]["score"]["cells"]
    assert sum(n for *_, n in cells) == 5000


@pytest.mark.parametrize(
    "y, p",
    [
        ([3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0]),  # constant truth: r2, explained variance, correlations null
        ([0.1, 0.1, 0.1], [0.1, 0.1, 0.1]),  # constant both (scikit-learn: r2 = 1.0 by convention)
        ([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]),  # constant prediction: correlations null, r2 defined
        ([2.5], [1.0]),  # one row
        ([0.0, 0.0, 0.0, 1.0], [0.5, -0.5, 0.0, 2.0]),  # mostly zero targets
        ([0.0, 0.0], [1.0, 2.0]),  # only zero targets: mape and wmape null
    ],
)
def test_edge_cases(y, p):
    got = regression_metrics(make_con(p, y), ["score"])
    assert_matches(got, reference(np.array(y), np.array(p)))


def test_several_outputs_each_and_their_mean():
    rng = np.random.default_rng(5)
    n = 120
    y, p = rng.normal(size=(n, 3)).round(1), rng.normal(size=(n, 3)).round(1)
    y[:, 2] = np.round(y[:, 0] * 2, 1)
    truth = y.tolist()
    truth[3] = None  # no truth at all
    truth[4] = [1.0, math.nan, 2.0]  # part of it: counted apart, not evaluated
    prediction = p.tolist()
    prediction[5] = [math.inf, 0.0, 0.0]  # not finite: counted apart, not evaluated
    got = regression_metrics(make_con(prediction, truth), ["a", "b", "c"])
    keep = np.ones(n, dtype=bool)
    keep[[3, 4, 5]] = False
    assert (got["evaluated"], got["no_truth_rows"], got["partial_truth_rows"], got["not_finite_rows"]) == (n - 3, 1, 1, 1)
    refs = [reference(y[keep, k], p[keep, k]) for k in range(3)]
    for name, ref in zip("abc", refs):
        assert_matches(got["per_output"][name], ref)
    for key in refs[0]:
        if key == "mape_rows":
            assert got[key] == sum(r[key] for r in refs)
        else:
            assert got[key] == pytest.approx(np.mean([r[key] for r in refs]), rel=TOL, abs=TOL), key
    # scikit-learn's uniform average agrees where it has one
    assert got["mae"] == pytest.approx(mean_absolute_error(y[keep], p[keep]), abs=TOL)
    assert got["r2"] == pytest.approx(r2_score(y[keep], p[keep]), abs=TOL)


def test_a_null_output_makes_the_mean_null():
    y = [[1.0, 4.0], [1.0, 5.0], [1.0, 7.0]]  # the first output's truth is constant
    p = [[0.5, 4.5], [1.5, 5.0], [1.0, 6.0]]
    got = regression_metrics(make_con(p, y), ["a", "b"])
    assert got["per_output"]["a"]["r2"] is None and got["per_output"]["b"]["r2"] is not None
    assert got["r2"] is None and got["mae"] == pytest.approx((1 / 3 + 0.5) / 2)


def test_report_data():
    rng = np.random.default_rng(9)
    y, p = random_case(rng, 400, decimals=2)
    got = regression_metrics(make_con(p.tolist(), y.tolist(), text=[f"text {i}" for i in range(400)]), ["score"])
    hist = got["residual_histogram"]["score"]
    assert (
        sum(hist["counts"]) == 400
        and hist["edges"][0] == pytest.approx((p - y).min())
        and hist["edges"][-1] == pytest.approx((p - y).max())
    )
    points = got["predicted_vs_true"]["score"]
    assert points["kind"] == "points" and points["truth"] == y.tolist() and points["prediction"] == p.tolist()
    deciles = got["calibration_deciles"]["score"]
    assert [d["rows"] for d in deciles] == [40] * 10
    order = np.lexsort((np.arange(400), p))
    for d, rows in zip(deciles, np.array_split(order, 10)):
        assert (d["mean_prediction"], d["mean_truth"]) == pytest.approx((p[rows].mean(), y[rows].mean()), abs=TOL)
    errors = got["largest_errors"]["score"]
    assert [e["error"] for e in errors] == pytest.approx(sorted((p - y).tolist(), key=abs, reverse=True)[: len(errors)], abs=0)
    assert errors[0]["text"] == f"text {errors[0]['row_index']}"


@pytest.mark.parametrize("seed", range(12))
def test_largest_errors_are_each_outputs_largest_with_ties_by_row_index(seed):
    """largest_errors per output, over generated rows with many equal errors, a missing output value
    and a few huge ones: the LARGEST_ERRORS (or fewer) rows of the largest |prediction - truth| (compared as
    halves, as the SQL does), ties by the smaller row_index, each with its own text and values."""
    rng = np.random.default_rng(seed)
    n, outputs = int(rng.integers(1, 60)), int(rng.integers(1, 4))
    p = rng.integers(0, 4, size=(n, outputs)).astype(float)
    y = rng.integers(0, 4, size=(n, outputs)).astype(float)
    huge = rng.random((n, outputs)) < 0.05
    p[huge] = rng.choice([-1.7e308, 1.7e308], size=int(huge.sum()))
    truth = y.tolist()
    if n > 1:
        truth[int(rng.integers(0, n))][0] = None  # partial truth: the row is not evaluated
    text = [f"text {i}" for i in range(n)]
    got = regression_metrics(make_con(p.tolist(), truth, text=text), [f"o{k}" for k in range(outputs)])
    evaluated = [i for i in range(n) if None not in truth[i]]
    for k in range(outputs):
        order = sorted(evaluated, key=lambda i: (-abs(p[i, k] * 0.5 - y[i, k] * 0.5), i))[:LARGEST_ERRORS]
        errors = got["largest_errors"].get(f"o{k}", [])
        assert [e["row_index"] for e in errors] == order
        for e in errors:
            i = e["row_index"]
            assert (e["id"], e["text"], e["prediction"], e["truth"]) == (f"r{i}", f"text {i}", p[i, k], y[i, k])


def test_lists_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match="one prediction and one truth per output"):
        regression_metrics(make_con([[1.0, 2.0]], [[1.0, 2.0]]), ["a", "b", "c"])


RUN_INFO = {"run_id": "reg-run", "input_uri": "data/in.parquet", "model_uri": "models/reward", "mode": "replica", "num_processes": 1}


def report_metrics(prediction, truth, outputs, text=None, slices: dict[str, list] | None = None) -> dict:
    """metrics.json of a regression run as the evaluation step writes it: the counts, then this
    module's keys; with `slices` ({column: a value per row}) the slice breakdown too."""
    from tests.test_multilabel_metrics import slice_metrics

    n = len(prediction)
    base = {"head": "regression", "ground_truth_source": "label_column", "rows": n, "scored": n, "missing_predictions": 0}
    base |= {"unmatched_predictions": 0, "scoring_only": False}
    con = make_con(prediction, truth, text)
    metrics = base | regression_metrics(con, outputs)
    return metrics | (slice_metrics(con, "regression", slices) if slices else {})


@pytest.mark.parametrize("rows, outputs", [(300, 1), (4000, 1), (200, 2)])
def test_report_shows_the_regression_sections(rows, outputs):
    from scorekeeper.report.report import plot_files, render_html, render_markdown
    from tests.report_fixture import check_marked_numbers, document

    rng = np.random.default_rng(rows)
    y, p = random_case(rng, rows * outputs, decimals=2)
    shape = (lambda a: a.reshape(rows, outputs).tolist()) if outputs > 1 else (lambda a: a.tolist())
    names = ["<b>quality</b>", "safety"][:outputs]
    text = [f"<script>row {i}</script>" for i in range(rows)]
    metrics = report_metrics(shape(p), shape(y), names, text)
    page = render_html(document(metrics), RUN_INFO)
    assert '<section id="regression">' in page and '<section id="per-class">' not in page
    assert "<script>" not in page and "&lt;script&gt;row" in page and "&lt;b&gt;quality" in page
    assert check_marked_numbers(page, metrics) >= 8 + 10 * 3 * outputs
    expected = {
        f"{k}.svg" if outputs == 1 else f"{k}-{i}.svg" for k in ("predicted_vs_true", "residuals", "deciles") for i in range(outputs)
    }
    assert set(plot_files(document(metrics))) == expected
    markdown = render_markdown(document(metrics), RUN_INFO)
    assert "## Calibration by decile" in markdown and "## Largest errors" in markdown and "| rmse |" in markdown

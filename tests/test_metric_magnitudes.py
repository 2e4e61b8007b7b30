"""Regression metrics are right or null at any magnitude (scorekeeper/evaluation/regression.py,
sql/regression/regression_metrics.sql, regression_correlation.sql): truths and predictions are
generated at moderate size and rescaled by 10^k for k in -300..300, and each metric of the rescaled
copy is compared with scikit-learn's and scipy's on the unrescaled values, carried to the scale by
hand (mae x 10^k, mse x 10^2k; r2, the correlations, mape and wmape are scale-free). A metric whose
value is not a representable double there (mse near 1e300 squared) must be null, never a finite
wrong number; every other one must agree to 1e-6.
"""

from __future__ import annotations

import math
import sys
import warnings
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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

from scorekeeper.evaluation.regression import regression_metrics
from tests.test_regression_metrics import make_con

REL = 1e-6
POWER = {"mae": 1, "rmse": 1, "max_error": 1, "median_absolute_error": 1, "mean_truth": 1, "mean_prediction": 1, "mse": 2}


def _reference(y: np.ndarray, p: np.ndarray) -> dict[str, float | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        constant_y, constant_p = y.min() == y.max(), p.min() == p.max()
        nonzero = y != 0
        return {
            "mae": mean_absolute_error(y, p),
            "mse": mean_squared_error(y, p),
            "rmse": root_mean_squared_error(y, p),
            "max_error": max_error(y, p),
            "median_absolute_error": median_absolute_error(y, p),
            "mean_truth": float(np.mean(y)),
            "mean_prediction": float(np.mean(p)),
            "r2": None if constant_y else r2_score(y, p),
            "explained_variance": None if constant_y else explained_variance_score(y, p),
            "mape": mean_absolute_percentage_error(y[nonzero], p[nonzero]) if nonzero.any() else None,
            "wmape": float(np.abs(y - p).sum() / np.abs(y).sum()) if np.abs(y).sum() else None,
            "pearson": None if constant_y or constant_p else float(pearsonr(y, p)[0]),
            "spearman": None if constant_y or constant_p else float(spearmanr(y, p)[0]),
            "kendall_tau_b": None if constant_y or constant_p else float(kendalltau(y, p)[0]),
        }


def _at_scale(value: float | None, exponent: int, power: int) -> float | None:
    """value x 10^(exponent x power) when that is a normal double, else None (not representable)."""
    if value is None:
        return None
    if value == 0:
        return 0.0
    exact = Decimal(value) * Decimal(10) ** (exponent * power)
    if not Decimal(sys.float_info.min) <= abs(exact) <= Decimal(sys.float_info.max):
        return None
    return float(exact)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(3, 40),
    exponent=st.integers(-300, 300),
    shape=st.sampled_from(["noisy", "biased", "ties"]),
)
def test_regression_metrics_at_any_magnitude_are_right_or_null(seed, n, exponent, shape):
    rng = np.random.default_rng(seed)
    y = rng.normal(0, 3, n)
    p = y + rng.normal(0, 1, n) if shape != "biased" else 2 * y + 5
    if shape == "ties":
        y, p = np.round(y), np.round(p)
    scale = 10.0**exponent
    ys, ps = y * scale, p * scale
    assert np.isfinite(ys).all() and np.isfinite(ps).all()
    got = regression_metrics(make_con(ps.tolist(), ys.tolist()), ["value"])
    ref = _reference(y, p)
    top = float(max(np.abs(y).max(), np.abs(p).max()))  # sums that cancel (a mean of 0) are right to this, times 1e-9
    for name, expected in ref.items():
        power = POWER.get(name, 0)
        want = _at_scale(expected, exponent, power) if power else expected
        value = got[name]
        if want is None:
            assert value is None, (name, value)
        elif value is None:
            raise AssertionError(f"{name}: null, expected {want!r} (10^{exponent})")
        else:
            cancel = _at_scale(1e-9 * top**power, exponent, power) if power else 1e-12
            assert math.isclose(value, want, rel_tol=REL, abs_tol=cancel or 0.0), (name, value, want, exponent)


def test_pearson_of_values_whose_squares_overflow_is_the_scale_free_value():
    """The reported case: truth near 1e300 gave pearson 0.0 where scipy gives 0.94."""
    rng = np.random.default_rng(0)
    y = rng.normal(5, 1, 200)
    p = y + rng.normal(0, 0.35, 200)
    got = regression_metrics(make_con((p * 1e300).tolist(), (y * 1e300).tolist()), ["value"])
    assert math.isclose(got["pearson"], pearsonr(y, p)[0], rel_tol=1e-9) and got["pearson"] > 0.9
    assert math.isclose(got["mae"], mean_absolute_error(y, p) * 1e300, rel_tol=1e-9)
    assert got["mse"] is None  # about 1e599: not a double
    assert math.isclose(got["rmse"], root_mean_squared_error(y, p) * 1e300, rel_tol=1e-9)
    tiny = regression_metrics(make_con((p * 1e-250).tolist(), (y * 1e-250).tolist()), ["value"])
    assert tiny["mse"] is None and math.isclose(tiny["mae"], mean_absolute_error(y, p) * 1e-250, rel_tol=1e-9)
    assert math.isclose(tiny["r2"], r2_score(y, p), rel_tol=1e-9)


def _scaled_regression_runs(root, scale: float):
    """Two golden-style regression runs (bench/golden.py) with truth and predictions times `scale`;
    `b` evaluated against the completed `a`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.golden import _manifest, _regression
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.run_folder import RunFolder
    from scorekeeper.storage import Location
    from tests.evaluation_runs import seal_complete

    for name, noise in (("a", 0.8), ("b", 0.5)):
        _regression(root / name, 3, noise, ["stars"])
        for file, column in (("work/input.parquet", "label"), ("predictions.parquet", "prediction")):
            table = pq.read_table(root / name / file)
            scaled = pa.array(np.asarray(table.column(column).to_numpy(), dtype=np.float64) * scale)
            pq.write_table(table.set_column(table.schema.get_field_index(column), column, scaled), root / name / file)
    runs = {name: RunFolder.from_uri(str(root / name)) for name in ("a", "b")}
    a = evaluate_run(runs["a"], ["stars"], _manifest(root / "a"), EvaluationSettings(head="regression"))
    (root / "a" / "report").mkdir()
    (root / "a" / "report" / "metrics.json").write_bytes(a.to_json_bytes())
    seal_complete(runs["a"])
    b = evaluate_run(
        runs["b"], ["stars"], _manifest(root / "b"), EvaluationSettings(baseline=Location.from_uri(str(root / "a")), head="regression")
    )
    return a, b


@pytest.mark.slow
def test_a_regression_comparison_at_1e200_is_right_or_null(tmp_path):
    """The comparison's deltas at 1e200 are the ordinary run's times 1e200 (r2's unchanged); its
    paired tests, whose sums of squares are not doubles there, are left out rather than wrong."""
    _, plain = _scaled_regression_runs(tmp_path / "plain", 1.0)
    _, huge = _scaled_regression_runs(tmp_path / "huge", 1e200)
    for name, power in (("mae", 1), ("rmse", 1), ("r2", 0), ("pearson", 0), ("mape", 0)):
        want, got = plain.comparison.deltas[name], huge.comparison.deltas[name]
        assert math.isclose(got, want * 1e200**power, rel_tol=1e-6), (name, got, want)
    assert huge.comparison.deltas["mse"] is None  # 1e400: not a double
    assert all(t.delta is not None for t in plain.comparison.metric_tests.values())
    assert all(t.delta is None and t.ci is None and t.p is None for t in huge.comparison.metric_tests.values())
    assert huge.comparison.rows_compared == plain.comparison.rows_compared

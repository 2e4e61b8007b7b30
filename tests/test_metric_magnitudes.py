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
    log = math.log10(abs(value)) + exponent * power
    if log > 308 or log < math.log10(sys.float_info.min) + 1e-9:
        return None
    return float(Decimal(value) * Decimal(10) ** (exponent * power))


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
    for name, expected in ref.items():
        power = POWER.get(name, 0)
        want = _at_scale(expected, exponent, power) if power else expected
        value = got[name]
        if want is None:
            assert value is None, (name, value)
        elif value is None:
            raise AssertionError(f"{name}: null, expected {want!r} (10^{exponent})")
        else:
            # A mean of first powers that cancels to 0 (rounded ties) is exact only to rounding at the data's scale.
            spread = float(max(np.abs(ys).max(), np.abs(ps).max()))
            tolerance = 1e-12 if not power else (1e-12 * spread if power == 1 else 0.0)
            assert math.isclose(value, want, rel_tol=REL, abs_tol=tolerance), (name, value, want, exponent)


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

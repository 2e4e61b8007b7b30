"""An independent implementation of SPEC section 13 (labelling plans and prediction-powered
evaluation) in numpy and hashlib, written from the section's text, not from scorekeeper's SQL: the
label-free f_i and u_i per head kind, the iterative capping of pi, the sha256 draw, the estimator,
its intervals, the linearised F1 variance, estimate_bias and small_sample. The tests recompute
metrics.json `label_plan` / `prediction_powered` and report/label_plan.parquet with it from a run's
files."""

from __future__ import annotations

import hashlib
import math

import numpy as np

Z = 1.959963984540054
BINS = 15


def draw(run_id: str, row_index: int) -> float:
    """U_i: the first 8 bytes of sha256(f"{run_id}:{row_index}"), big-endian, / 2^64."""
    return int.from_bytes(hashlib.sha256(f"{run_id}:{row_index}".encode()).digest()[:8], "big") / 2**64


def capped(w: np.ndarray, budget: int) -> np.ndarray:
    """pi = min(1, c w) with sum pi = min(B, N), by iterative capping."""
    n = len(w)
    target = min(budget, n)
    if target == n:  # pi <= 1 summing to N: every pi is 1 (c w of the last rows would round to 1 - 1e-16)
        return np.ones(n)
    capped_rows = np.zeros(n, dtype=bool)
    while True:
        rest = target - capped_rows.sum()
        c = rest / w[~capped_rows].sum() if rest > 0 and w[~capped_rows].sum() > 0 else 0.0
        pi = np.where(capped_rows, 1.0, np.minimum(1.0, c * w))
        newly = (~capped_rows) & (c * w >= 1.0)
        if not newly.any():
            return pi
        capped_rows |= newly


def weights(u: np.ndarray, sampling: str) -> np.ndarray:
    if sampling == "uniform" or u.mean() == 0:
        return np.ones(len(u))
    return 0.9 * u / u.mean() + 0.1


def _bin(p: float) -> int:
    return min(int(math.floor(p * BINS)), BINS - 1)


# -- f per head kind ----------------------------------------------------------------------------------


def single_label_f(probs: np.ndarray, predicted: np.ndarray, reference: dict | None, labels: list[str]):
    """(f of accuracy, q per row and label) of a single-label run: section 12's calibration with a reference."""
    score = probs.max(1) if predicted is None else probs[np.arange(len(probs)), predicted]
    if reference is None:
        return score.copy(), probs.copy()
    bins = np.array([_bin(s) for s in score])
    recorded = {int(c["bin"]): (int(c["rows"]), round((c["accuracy"] or 0.0) * int(c["rows"]))) for c in reference["calibration"]}
    f = np.zeros(len(score))
    for b in set(bins.tolist()):
        rows_b, correct_b = recorded.get(b, (0, 0))
        s_b = score[bins == b].mean()
        f[bins == b] = (correct_b + s_b) / (rows_b + 1)
    by_label = reference["calibration_by_label"]
    q = np.zeros_like(probs)
    for k, name in enumerate(labels):
        for i in range(len(probs)):
            cell = by_label[name][_bin(probs[i, k])]
            q[i, k] = (cell["truth"] + probs[i, k]) / (cell["rows"] + 1)
    return f, q / q.sum(1, keepdims=True)


def multi_label_q(probs: np.ndarray, reference: dict | None, labels: list[str]) -> np.ndarray:
    if reference is None:
        return probs.copy()
    by_label = reference["calibration_by_label"]
    q = np.zeros_like(probs)
    for k, name in enumerate(labels):
        for i in range(len(probs)):
            cell = by_label[name][_bin(probs[i, k])]
            q[i, k] = (cell["truth"] + probs[i, k]) / (cell["rows"] + 1)
    return q


def regression_f(pred: np.ndarray, reference: dict | None, outputs: list[str]) -> np.ndarray:
    """f per row and output: the reference's MAE in the prediction's bin (empty bin: the output's overall MAE), or 0."""
    f = np.zeros_like(pred)
    if reference is None:
        return f
    for o, name in enumerate(outputs):
        rb = reference["residual_bins"][name]
        edges, bins = rb["edges"], rb["bins"]
        rows = sum(b["rows"] for b in bins)
        overall = sum(b["rows"] * (b["mae"] or 0.0) for b in bins) / rows if rows else 0.0
        for i in range(len(pred)):
            k = sum(1 for e in edges if pred[i, o] > e)
            f[i, o] = bins[k]["mae"] if bins[k]["mae"] is not None else overall
    return f


# -- the estimator -------------------------------------------------------------------------------------


def lam_of(y, f, pi) -> float:
    den = np.sum((1 - pi) * f**2 / pi**2)
    if den == 0:
        return 0.0
    return float(np.clip(np.sum((1 - pi) * y * f / pi**2) / den, 0, 1))


def clip_ci(value, var, upper):
    """value -+ Z sqrt(var), each end clipped to the metric's range [0, upper] (upper None: unbounded)."""
    half = Z * math.sqrt(var)
    top = math.inf if upper is None else upper
    return [float(np.clip(value - half, 0.0, top)), float(np.clip(value + half, 0.0, top))]


def mean_metric(ys, fs, f_alls, pi, n, upper=1.0, classical_only=False) -> dict:
    """A mean metric over one or more terms (mae's outputs): PP value, ci, lambda, Hajek classical."""
    lams = [lam_of(y, f, pi) for y, f in zip(ys, fs, strict=True)]
    k = len(ys)
    value = sum(lam * fa + np.sum((y - lam * f) / pi) for y, f, fa, lam in zip(ys, fs, f_alls, lams, strict=True)) / (k * n)
    e = sum(y - lam * f for y, f, lam in zip(ys, fs, lams, strict=True)) / (k * n)
    var = np.sum((1 - pi) * e**2 / pi**2)
    y_row = sum(ys) / k
    m = np.sum(1 / pi)
    classical = np.sum(y_row / pi) / m
    cvar = np.sum((1 - pi) * (y_row - classical) ** 2 / pi**2) / m**2
    ci = clip_ci(value, var, upper)
    if classical_only:
        value, ci = classical, clip_ci(classical, cvar, upper)
    return {
        "value": float(value), "ci": ci, "lambda": lams[0] if k == 1 else lams,
        "classical": float(classical), "classical_ci": clip_ci(classical, cvar, upper),
    }  # fmt: skip


def f1_totals(groups: list[tuple[float, float, float]]):
    """Macro F1 of (TP, FP, FN) per label and the gradient per label (dTP, dFP, dFN), labels with D = 0 left out."""
    kept = [i for i, (a, b, c) in enumerate(groups) if 2 * a + b + c != 0]
    grads = [(0.0, 0.0, 0.0)] * len(groups)
    if not kept:
        return None, grads
    f1s = []
    for i in kept:
        a, b, c = groups[i]
        d = 2 * a + b + c
        f1s.append(2 * a / d)
        grads[i] = (2 * (b + c) / d**2 / len(kept), -2 * a / d**2 / len(kept), -2 * a / d**2 / len(kept))
    return sum(f1s) / len(f1s), grads


def f1_metric(y: dict, f: dict, f_all: dict, pi: np.ndarray, labels: list[str], lam_fixed: float | None = None):
    """F1 from totals: y/f/f_all keyed by (part, label) with part TP/FP/FN; returns (value, var, lambdas)."""
    lams = {key: (lam_fixed if lam_fixed is not None else lam_of(y[key], f[key], pi)) for key in y}
    totals = {key: lams[key] * f_all[key] + np.sum((y[key] - lams[key] * f[key]) / pi) for key in y}
    value, grads = f1_totals([(totals[("TP", k)], totals[("FP", k)], totals[("FN", k)]) for k in labels])
    if value is None:
        return None, None, lams
    e = np.zeros(len(pi))
    for g, k in zip(grads, labels, strict=True):
        for part, gp in zip(("TP", "FP", "FN"), g, strict=True):
            e += gp * (y[(part, k)] - lams[(part, k)] * f[(part, k)])
    return float(value), float(np.sum((1 - pi) * e**2 / pi**2)), lams


def f1_entry(y, f, f_all, pi, labels, name_of) -> dict:
    value, var, lams = f1_metric(y, f, f_all, pi, labels)
    classical, cvar, _ = f1_metric(y, f, f_all, pi, labels, lam_fixed=0.0)
    return {
        "value": value, "ci": clip_ci(value, var, 1.0) if value is not None else None,
        "lambda": {name_of(part, k): lams[(part, k)] for (part, k) in lams},
        "classical": classical, "classical_ci": clip_ci(classical, cvar, 1.0) if classical is not None else None,
    }  # fmt: skip


def bias_p(value: float, var1: float, v_lf: float) -> float:
    total = var1 + v_lf
    if total == 0:
        return 1.0 if value == 0 else 0.0
    return math.erfc(abs(value) / math.sqrt(total) / math.sqrt(2))

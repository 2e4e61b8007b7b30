"""An independent implementation of the drift and estimate definitions (docs/drift.md, docs/contracts.md) in numpy and scipy, written from
the definitions, not from the SQL: bins, PSI, p, KS, Holm, the alarm and the estimates. The tests
compare scorekeeper/evaluation/drift.py and estimate.py with it over generated tables."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

Z95 = 1.959963984540054


def numeric_edges(reference: list) -> list[float]:
    """The merged nearest-rank deciles of the reference's non-null values."""
    values = np.sort(np.array([v for v in reference if v is not None and not (isinstance(v, float) and math.isnan(v))], dtype=float))
    m = len(values)
    if m == 0:
        return []
    edges = [values[-(-j * m // 10) - 1] for j in range(1, 10)]  # 1-based rank ceil(j m / 10), in integers
    return sorted(set(float(e) for e in edges))


def numeric_counts(values: list, edges: list[float]) -> dict:
    """Counts per bin: bin k = (e_k, e_k+1] (k = edges strictly below the value); 'null' for nulls."""
    counts: dict = {k: 0 for k in range(len(edges) + 1)}
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            counts["null"] = counts.get("null", 0) + 1
        else:
            counts[int(np.searchsorted(np.array(edges, dtype=float), v, side="left"))] += 1
    return counts


def categorical_keys(reference: list, current: list) -> tuple[list, dict]:
    """The bins of a categorical signal and the map value -> bin ('<other>' past 50 values)."""
    seen = set(reference) | set(current)
    if len(seen) <= 50:
        return sorted(seen, key=lambda v: (v is None, "" if v is None else v)), {v: v for v in seen}
    counts: dict = {}
    for v in reference:
        counts[v] = counts.get(v, 0) + 1
    top = sorted(counts, key=lambda v: (-counts[v], v is None, "" if v is None else v))[:49]
    top = sorted(top, key=lambda v: (v is None, "" if v is None else v))
    mapping = {v: (v if v in top else "<other>") for v in seen}
    return top + ["<other>"], mapping


def psi_of(a: list[int], b: list[int]) -> float:
    m, n, k = sum(a), sum(b), len(a)
    r = (np.array(a, dtype=float) + 0.5) / (m + 0.5 * k)
    c = (np.array(b, dtype=float) + 0.5) / (n + 0.5 * k)
    return float(np.sum((c - r) * np.log(c / r)))


def p_of(psi: float, m: int, n: int, k: int) -> float:
    if k <= 1:
        return 1.0
    return float(stats.chi2.sf(psi * m * n / (m + n), k - 1))


def ks_of(reference: list, current: list) -> float | None:
    x = [v for v in reference if v is not None]
    y = [v for v in current if v is not None]
    if not x or not y:
        return None
    return float(stats.ks_2samp(x, y).statistic)


def holm(p: list[float]) -> list[float]:
    k = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        out[i] = running
    return list(out)


def signal(reference: list, current: list, numeric: bool) -> dict:
    """One signal's counts (reference, current per bin), psi, p and ks."""
    if numeric:
        edges = numeric_edges(reference)
        ca, cb = numeric_counts(reference, edges), numeric_counts(current, edges)
        keys = list(range(len(edges) + 1)) + (["null"] if "null" in ca or "null" in cb else [])
        a = [ca.get(key, 0) for key in keys]
        b = [cb.get(key, 0) for key in keys]
    else:
        edges = None
        keys, mapping = categorical_keys(reference, current)
        a = [sum(1 for v in reference if mapping[v] == key) for key in keys]
        b = [sum(1 for v in current if mapping[v] == key) for key in keys]
    psi = psi_of(a, b)
    out = {"edges": edges, "keys": keys, "a": a, "b": b, "psi": psi, "p": p_of(psi, len(reference), len(current), len(keys))}
    if numeric:
        out["ks"] = ks_of(reference, current)
    return out


def judge(signals: dict[str, dict], m: int, n: int, min_psi: float = 0.1, others: dict[str, float] | None = None) -> dict[str, bool | None]:
    """The verdicts of section 12's signals; `others` the p-values of the family's other members
    (SPEC 14's representation), which Holm's adjustment counts too."""
    names = sorted(signals)
    others = others or {}
    adjusted = holm([signals[s]["p"] for s in names] + list(others.values()))
    for s, ph in zip(names, adjusted, strict=False):
        signals[s]["p_holm"] = ph
    if m < 100 or n < 100:
        return {s: None for s in names}
    return {s: signals[s]["psi"] >= min_psi and signals[s]["p_holm"] < 0.05 for s in names}


# -- estimates -----------------------------------------------------------------------------------------


def score_bin(p: float) -> int:
    """The 15 equal-width bins [j/15, (j+1)/15), the last one holding 1.0."""
    return min(int(math.floor(p * 15)), 14)


def estimated_accuracy(ref_scores, ref_correct, scores) -> tuple[float, list[float]]:
    rows = np.zeros(15)
    correct = np.zeros(15)
    for s, c in zip(ref_scores, ref_correct, strict=True):
        rows[score_bin(s)] += 1
        correct[score_bin(s)] += bool(c)
    n_b = np.zeros(15)
    s_sum = np.zeros(15)
    for s in scores:
        n_b[score_bin(s)] += 1
        s_sum[score_bin(s)] += s
    n = len(scores)
    acc, var1, var2 = 0.0, 0.0, 0.0
    for b in range(15):
        if n_b[b] == 0:
            continue
        a = (correct[b] + s_sum[b] / n_b[b]) / (rows[b] + 1)
        acc += n_b[b] * a / n
        var1 += (n_b[b] / n) ** 2 * a * (1 - a) / (rows[b] + 1)
        var2 += n_b[b] * a * (1 - a) / n**2
    half = Z95 * math.sqrt(var1 + var2)
    return acc, [max(0.0, acc - half), min(1.0, acc + half)]


def label_calibration(ref_probs: np.ndarray, ref_truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per label and bin: reference rows and rows whose truth is (includes) the label; ref_truth is
    a 0/1 matrix of rows x labels."""
    k = ref_probs.shape[1]
    r, t = np.zeros((k, 15)), np.zeros((k, 15))
    for row in range(ref_probs.shape[0]):
        for label in range(k):
            b = score_bin(ref_probs[row, label])
            r[label, b] += 1
            t[label, b] += ref_truth[row, label]
    return r, t


def estimated_f1(r, t, probs: np.ndarray, predicted: np.ndarray, renormalise: bool) -> tuple[float | None, float | None]:
    """(macro, micro) F1 from expected counts; `predicted` a 0/1 matrix of rows x labels."""
    rows, k = probs.shape
    q = np.zeros_like(probs)
    for row in range(rows):
        for label in range(k):
            b = score_bin(probs[row, label])
            q[row, label] = (t[label, b] + probs[row, label]) / (r[label, b] + 1)
        if renormalise:
            q[row] /= q[row].sum()
    tp = (q * predicted).sum(axis=0)
    fp = ((1 - q) * predicted).sum(axis=0)
    fn = (q * (1 - predicted)).sum(axis=0)
    f1s = [2 * tp[i] / (2 * tp[i] + fp[i] + fn[i]) for i in range(k) if 2 * tp[i] + fp[i] + fn[i] > 0]
    macro = float(np.mean(f1s)) if f1s else None
    denom = 2 * tp.sum() + fp.sum() + fn.sum()
    micro = float(2 * tp.sum() / denom) if denom > 0 else None
    return macro, micro


def estimated_mae(ref_pred: list[float], ref_truth: list[float | None], pred: list[float]) -> float:
    """Bins: the reference's deciles of all its predictions; each bin's reference MAE over rows with
    truth (an empty bin: the reference's MAE over all its rows with truth)."""
    edges = numeric_edges(ref_pred)
    errors: dict[int, list[float]] = {}
    for p, y in zip(ref_pred, ref_truth, strict=True):
        if y is not None:
            errors.setdefault(numeric_counts_bin(p, edges), []).append(abs(p - y))
    overall = float(np.mean([e for es in errors.values() for e in es]))
    total = 0.0
    for p in pred:
        es = errors.get(numeric_counts_bin(p, edges))
        total += float(np.mean(es)) if es else overall
    return total / len(pred)


def numeric_counts_bin(v: float, edges: list[float]) -> int:
    return int(np.searchsorted(np.array(edges, dtype=float), v, side="left"))


def _calibrated(r, t, probs: np.ndarray, renormalise: bool) -> np.ndarray:
    bins = np.minimum(np.floor(probs * 15).astype(int), 14)
    labels = np.arange(probs.shape[1])[None, :]
    q = (t[labels, bins] + probs) / (r[labels, bins] + 1)
    return q / q.sum(axis=1, keepdims=True) if renormalise else q


def _f1_of_counts(tp: np.ndarray, fn: np.ndarray, predicted_rows: np.ndarray, which: str) -> float:
    fp = predicted_rows - tp
    if which == "micro":
        return float(2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum()))
    d = 2 * tp + fp + fn
    return float(np.mean([2 * tp[i] / d[i] for i in range(len(d)) if d[i] > 0]))


def f1_interval(r, t, probs: np.ndarray, predicted: np.ndarray, renormalise: bool, which: str) -> list[float]:
    """The 95% interval of the estimated macro or micro F1 (docs/drift.md), computed from its
    definition with numerical derivatives: this run's part from each row's outcome covariance
    (Bernoulli(q) per label, or one categorical draw over the renormalised q) and the F1's
    derivatives by the expected counts; the reference's part by moving each (label, bin) rate
    a_kb by +-eps in every cell of the bin and recomputing the whole estimate."""
    eps = 1e-6

    def estimate(t_moved) -> tuple[float, np.ndarray, np.ndarray]:
        q = _calibrated(r, t_moved, probs, renormalise)
        tp, fn = (q * predicted).sum(axis=0), (q * (1 - predicted)).sum(axis=0)
        return _f1_of_counts(tp, fn, predicted.sum(axis=0), which), tp, fn

    value, tp, fn = estimate(t)
    k = probs.shape[1]
    grad_tp, grad_fn = np.zeros(k), np.zeros(k)
    for i in range(k):
        step = np.eye(k)[i] * eps
        grad_tp[i] = (
            _f1_of_counts(tp + step, fn, predicted.sum(axis=0), which) - _f1_of_counts(tp - step, fn, predicted.sum(axis=0), which)
        ) / (2 * eps)
        grad_fn[i] = (
            _f1_of_counts(tp, fn + step, predicted.sum(axis=0), which) - _f1_of_counts(tp, fn - step, predicted.sum(axis=0), which)
        ) / (2 * eps)
    q = _calibrated(r, t, probs, renormalise)
    g = np.where(predicted > 0, grad_tp[None, :], grad_fn[None, :])
    if renormalise:
        v_run = sum(float(g[i] @ (np.diag(q[i]) - np.outer(q[i], q[i])) @ g[i]) for i in range(len(q)))
    else:
        v_run = float((g**2 * q * (1 - q)).sum())
    bins = np.minimum(np.floor(probs * 15).astype(int), 14)
    v_ref = 0.0
    for label in range(k):
        for b in range(15):
            inside = bins[:, label] == b
            if not inside.any():
                continue
            moved = t.astype(float).copy()
            moved[label, b] += eps * (r[label, b] + 1)  # the rate a_kb up by eps in every cell of the bin
            up = estimate(moved)[0]
            moved[label, b] -= 2 * eps * (r[label, b] + 1)
            derivative = (up - estimate(moved)[0]) / (2 * eps)
            a = (t[label, b] + probs[inside, label].mean()) / (r[label, b] + 1)
            v_ref += derivative**2 * a * (1 - a) / (r[label, b] + 1)
    half = Z95 * math.sqrt(v_run + v_ref)
    return [max(0.0, value - half), min(1.0, value + half)]

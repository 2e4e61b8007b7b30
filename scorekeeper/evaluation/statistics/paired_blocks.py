"""Paired tests of the multi-label and regression metrics that are not means over rows: the
statistics the kinds' comparisons (multi_label.py, regression.py) read from SQL's per-block sums and a bounded row sample.

Pure functions (numpy only, no DuckDB); results in scorekeeper/evaluation/statistics/paired_tests.py's shape
`{"delta", "ci", "p", "method", "se"}`. Three methods, each at a cost bounded whatever the row count:

- **Block bootstrap** (`paired_bootstrap`; multi-label micro/macro/weighted F1, micro precision
  and recall, ECE macro and micro; regression r2, explained_variance, pearson, wmape, max_error,
  and rmse; MAE is a mean over rows, tested by compare.row_mean_tests). Each metric is a function of sums over rows (per-label TP/FP/FN
  counts of both runs; per-label, per-bin sums of truth - probability; sums of y, y^2, |y|, e,
  e^2, |e|, p, p^2, y p) or of maxima over rows (max |error|, the truth's and predictions' range,
  which decide whether r2 or a correlation is defined). SQL adds those up per block: one row per
  block up to `blocks` rows (then the bootstrap is exactly the paired row bootstrap), past that
  the rows hashed into `blocks` blocks, which are then resampled as clusters of random rows.
  A resample is a multinomial count per block; its sums are one matrix product, its maxima the
  maxima over the blocks drawn. `block_plan` keeps resamples x blocks x statistics under WORK
  (at least MIN_RESAMPLES resamples over at least MIN_BLOCKS blocks). Values are centred on their
  full-data means in SQL before squaring, so the sums do not cancel. Caveat written down: the
  bootstrap of a maximum (max_error) is not consistent in the limit (Bickel & Freedman 1981); its
  interval is the honest resampling spread of these rows, not a guaranteed 95%.
- **Row-sample bootstrap** (`paired_bootstrap`; statistics of every row's rank: multi-label
  average precision macro and micro, regression spearman, kendall_tau_b, median_absolute_error).
  As paired_tests.ap_test: a fixed-seed sample of at most `RANK_ROWS` rows (`ap_rows` for AP),
  resampled with replacement (multinomial weights, ties and duplicates as the rank statistic
  treats them); the deviations of the resampled deltas are scaled by sqrt(M / N) around the delta
  over all N rows (the m-out-of-n bootstrap of a statistic with a normal limit: all three are).
- **DeLong by row influence** (`delong`; multi-label ROC-AUC macro and micro): per label, a
  positive cell's placement is the share of negatives it outscores (ties one half), a negative's
  the share of positives that outscore it; each cell's influence on the AUC change is
  ((placement this - AUC this) - (placement other - AUC other)) / (its group's size), times
  sqrt(g / (g - 1)) so that one label gives DeLong's variance exactly. A row's influence sums its
  cells' (micro: the pooled problem's cells; macro: averaged over the labels defined), and
  Var(delta) = the sum of the squared row influences: rows, not cells, are the independent units,
  so the correlation between a row's labels is counted (DeLong with rows as clusters, Obuchowski 1997).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from scorekeeper.evaluation.statistics import paired_tests as pt

BOOTSTRAP_BLOCKS = 10_000  # blocks of a block bootstrap at most: one row each up to this many rows
MIN_BLOCKS = 1_000
WORK = 400_000_000  # resamples x blocks x statistics of one block bootstrap stays under this
RANK_ROWS = 1_000  # rows the row-sample bootstrap of spearman, kendall and the median resamples
RANK_RESAMPLES = 1_000

Statistic = Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]


def block_plan(rows: int, width: int) -> tuple[int, int]:
    """(blocks, resamples) of a block bootstrap over `rows` rows with `width` sums per block."""
    blocks = min(rows, BOOTSTRAP_BLOCKS, max(MIN_BLOCKS, WORK // (pt.MIN_RESAMPLES * max(width, 1))))
    resamples = max(pt.MIN_RESAMPLES, min(pt.RESAMPLES, WORK // (max(blocks, 1) * max(width, 1))))
    return max(blocks, 1), resamples


def block_bootstrap(
    sums: np.ndarray, highs: np.ndarray, statistic: Statistic, resamples: int, deltas: dict[str, float | None] | None = None
) -> dict[str, dict]:
    """`paired_bootstrap` of every delta `statistic` returns, from per-block `sums` (blocks x K)
    and per-block maxima `highs` (blocks x J; a minimum enters negated). `statistic(totals,
    maxima)` maps R x K totals and R x J maxima to {name: R deltas (this - other)}, NaN where
    undefined. `deltas`: the deltas over all rows where the caller has them from the metric's own
    SQL (None: untested), else the statistic of all blocks."""
    if len(sums) == 0:
        return {k: pt.untested(pt.BOOTSTRAP) for k in (deltas or {})}
    point = {k: float(v[0]) for k, v in statistic(sums.sum(0)[None, :], highs.max(0)[None, :]).items()}
    if deltas is not None:
        given = {k: deltas.get(k) for k in point}
        point = {k: np.nan if v is None else float(v) for k, v in given.items()}
    rng = np.random.default_rng(pt.SEED)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in point}
    for weights in pt.multinomial_draws(rng, len(sums), np.ones(len(sums)), resamples):
        drawn = weights > 0
        maxima = np.stack([np.where(drawn, column, -np.inf).max(1) for column in highs.T], axis=1) if highs.size else highs
        for k, v in statistic(weights @ sums, maxima).items():
            parts[k].append(v)
    return {k: pt.bootstrap_summary(point[k], np.concatenate(parts[k])) for k in point}


def _ratio(top: np.ndarray, bottom: np.ndarray, zero: float = np.nan) -> np.ndarray:
    """top / bottom, `zero` where bottom is 0 (NaN: undefined; 0.0: scikit-learn's zero_division)."""
    return np.divide(top, bottom, out=np.full(np.broadcast(top, bottom).shape, zero), where=bottom != 0)


# -- multi-label ---------------------------------------------------------------------------------------
COUNT_FIELDS = ("tp_after", "fp_after", "tp_before", "fp_before", "support")  # per label, per block


def multilabel_count_deltas(totals: np.ndarray, _maxima: np.ndarray, labels: int) -> dict[str, np.ndarray]:
    """micro F1/precision/recall, macro and weighted F1 of both runs (multilabel_metrics.sql's
    formulas, 0/0 as 0) from per-label counts laid out label-major as COUNT_FIELDS; this - other."""
    t = totals.reshape(len(totals), labels, len(COUNT_FIELDS))
    support = t[..., 4]
    scores = {}
    for side, (tp, fp) in {"after": (t[..., 0], t[..., 1]), "before": (t[..., 2], t[..., 3])}.items():
        fn = support - tp
        TP, FP, FN = tp.sum(-1), fp.sum(-1), fn.sum(-1)
        f1 = _ratio(2 * tp, 2 * tp + fp + fn, 0.0)
        scores[side] = {
            "micro_f1": _ratio(2 * TP, 2 * TP + FP + FN, 0.0),
            "micro_precision": _ratio(TP, TP + FP, 0.0),
            "micro_recall": _ratio(TP, TP + FN, 0.0),
            "macro_f1": f1.mean(-1),
            "weighted_f1": _ratio((f1 * support).sum(-1), support.sum(-1)),
        }
    return {k: scores["after"][k] - scores["before"][k] for k in scores["after"]}


def multilabel_ece_deltas(totals: np.ndarray, _maxima: np.ndarray, labels: int, bins: int) -> dict[str, np.ndarray]:
    """ECE macro (the mean of the labels') and micro (every cell pooled) of both runs from the
    rows (column 0) and per side, label and bin the sum of truth - probability (then side-major,
    label, bin): ECE = sum over bins |gap| / cells."""
    rows = totals[:, 0]
    gaps = totals[:, 1:].reshape(len(totals), 2, labels, bins)
    per_label = np.abs(gaps).sum(-1) / rows[:, None, None]
    micro = np.abs(gaps.sum(2)).sum(-1) / (rows[:, None] * labels)
    macro = per_label.mean(-1)
    return {"ece_macro": macro[:, 0] - macro[:, 1], "ece_micro": micro[:, 0] - micro[:, 1]}


def delong_influence(delta: float | None, influence_squares: float | None) -> dict:
    """`delong` from the delta over the paired rows and the sum of the rows' squared influences."""
    if delta is None or influence_squares is None:
        return pt.untested(pt.DELONG)
    se = math.sqrt(max(influence_squares, 0.0))
    if se == 0.0:
        return pt.result(delta, [delta, delta], 1.0 if delta == 0 else 0.0, pt.DELONG, 0.0)
    return pt.result(delta, [delta - pt.Z_95 * se, delta + pt.Z_95 * se], pt.normal_p(delta / se), pt.DELONG, se)


def multilabel_ap(truth: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Average precision macro (labels with a positive and a negative in the resample) and micro
    (every cell pooled; null unless both occur) under row weights (resamples x rows)."""
    m, labels = truth.shape
    per_label = []
    for k in range(labels):
        positives = weights @ truth[:, k]
        ap = pt.weighted_average_precision(truth[:, k], scores[:, k], weights)
        per_label.append(np.where((positives > 0) & (positives < weights.sum(1)), ap, np.nan))
    stacked = np.stack(per_label, axis=1)
    known = ~np.isnan(stacked)
    with np.errstate(divide="ignore", invalid="ignore"):
        macro = np.where(known, stacked, 0.0).sum(1) / known.sum(1)
    pooled = np.repeat(weights, labels, axis=1)
    positives = pooled @ truth.ravel()
    micro = pt.weighted_average_precision(truth.ravel(), scores.ravel(), pooled)
    return {
        "average_precision_macro": macro,
        "average_precision_micro": np.where((positives > 0) & (positives < pooled.sum(1)), micro, np.nan),
    }


def sample_bootstrap(
    deltas: dict[str, float | None], statistic: Callable[[np.ndarray], dict[str, np.ndarray]], m: int, rows: int, resamples: int
) -> dict[str, dict]:
    """`paired_bootstrap` over a row sample of `m` of the `rows` paired rows: `statistic(weights)`
    gives each delta per resample (weights: resamples x m); the deviations from the sample's own
    delta are scaled by sqrt(m / rows) around `deltas` (over all rows). Untested where a delta is None."""
    if m == 0:
        return {k: pt.untested(pt.BOOTSTRAP) for k in deltas}
    sample = {k: float(v[0]) for k, v in statistic(np.ones((1, m))).items()}
    rng = np.random.default_rng(pt.SEED)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in deltas}
    for weights in pt.multinomial_draws(rng, m, np.ones(m), resamples):
        for k, v in statistic(weights).items():
            parts[k].append(v)
    scale = math.sqrt(m / rows) if rows > m else 1.0
    return {
        k: pt.untested(pt.BOOTSTRAP)
        if d is None or not math.isfinite(sample[k])
        else pt.bootstrap_summary(d, d + scale * (np.concatenate(parts[k]) - sample[k]))
        for k, d in deltas.items()
    }


# -- regression ------------------------------------------------------------------------------------------
# Per output and block (scorekeeper/evaluation/sql/paired_regression_blocks.sql): y centred on its mean (yc); per
# side the error e = prediction - y (also centred on its mean: ec) and the prediction centred on
# its mean (pc).
SUM_FIELDS = ("n", "yc", "yc2", "abs_y") + tuple(
    f"{name}_{side}" for side in ("after", "before") for name in ("e2", "abs_e", "ec", "ec2", "pc", "pc2", "ycpc")
)
HIGH_FIELDS = ("abs_e_after", "abs_e_before", "y_max", "y_min_neg", "p_after_max", "p_after_min_neg", "p_before_max", "p_before_min_neg")


def regression_sum_deltas(totals: np.ndarray, maxima: np.ndarray, outputs: int, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The regression metrics `names` of both runs that are functions of sums and maxima over rows
    (regression_metrics.sql's and regression_correlation.sql's definitions: r2 and explained
    variance null for a constant truth, pearson for a constant side), each averaged over the
    outputs (NaN where any output's is); this - other. `names`: regression.SUMMED (those of ranks
    and order go through regression_rank_deltas on a row sample)."""
    t = totals.reshape(len(totals), outputs, len(SUM_FIELDS))
    h = maxima.reshape(len(maxima), outputs, len(HIGH_FIELDS))
    f = {name: t[..., i] for i, name in enumerate(SUM_FIELDS)}
    n = f["n"]
    ss_y = f["yc2"] - f["yc"] ** 2 / n
    truth_varies = h[..., 2] > -h[..., 3]
    values = {}
    for s, side in enumerate(("after", "before")):
        g = {k: f[f"{k}_{side}"] for k in ("e2", "abs_e", "ec", "ec2", "pc", "pc2", "ycpc")}
        varies = truth_varies & (h[..., 4 + 2 * s] > -h[..., 5 + 2 * s])
        ss_p = g["pc2"] - g["pc"] ** 2 / n
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (g["ycpc"] - f["yc"] * g["pc"] / n) / np.sqrt(ss_y * ss_p)
            values[side] = {
                "rmse": np.sqrt(g["e2"] / n),
                "r2": np.where(truth_varies, 1 - g["e2"] / ss_y, np.nan),
                "explained_variance": np.where(truth_varies, 1 - (g["ec2"] - g["ec"] ** 2 / n) / ss_y, np.nan),
                "pearson": np.where(varies, np.clip(r, -1.0, 1.0), np.nan),
                "wmape": _ratio(g["abs_e"], f["abs_y"]),
                "max_error": h[..., s],
            }
    return {k: (values["after"][k] - values["before"][k]).mean(-1) for k in names}


def average_ranks(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each element's average rank (scipy's rankdata "average", 1-based) in the multiset where
    element i occurs weights[:, i] times, per resample (resamples x elements)."""
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_of = np.empty(len(x), dtype=np.int64)
    group_of[order] = np.cumsum(np.r_[True, ordered[1:] != ordered[:-1]]) - 1
    totals = np.add.reduceat(weights[:, order], starts, axis=1)
    rank = np.cumsum(totals, axis=1) - totals + (totals + 1) / 2
    return rank[:, group_of]


def weighted_spearman(y: np.ndarray, p: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho (Pearson's r of average ranks) of the resampled multisets; NaN for a constant side."""
    ry, rp = average_ranks(y, weights), average_ranks(p, weights)
    n = weights.sum(1, keepdims=True)
    dy, dp = ry - (weights * ry).sum(1, keepdims=True) / n, rp - (weights * rp).sum(1, keepdims=True) / n
    sy, sp = (weights * dy * dy).sum(1), (weights * dp * dp).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (weights * dy * dp).sum(1) / np.sqrt(sy * sp)
    return np.where((sy > 1e-9) & (sp > 1e-9), np.clip(r, -1.0, 1.0), np.nan)


def _tied_pairs(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    totals = np.add.reduceat(weights[:, order], np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]), axis=1)
    return (totals * (totals - 1) / 2).sum(1)


def weighted_kendall(y: np.ndarray, p: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Kendall's tau-b (scipy's) of the resampled multisets: C - D = w' S w / 2 with S the pairs'
    sign(dy) sign(dp); the copies of one row are tied in both. NaN for a constant side."""
    s = (np.sign(y[:, None] - y[None, :]) * np.sign(p[:, None] - p[None, :])).astype(np.float32)
    w = weights.astype(np.float32)
    c_minus_d = ((w @ s).astype(np.float64) * weights).sum(1) / 2
    n = weights.sum(1)
    n0 = n * (n - 1) / 2
    left, right = n0 - _tied_pairs(y, weights), n0 - _tied_pairs(p, weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = c_minus_d / np.sqrt(left * right)
    return np.where((left > 0) & (right > 0), np.clip(tau, -1.0, 1.0), np.nan)


def weighted_median(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """numpy's median of the resampled multisets (the mean of the two middle values when even)."""
    order = np.argsort(x, kind="stable")
    ordered, cumulative = x[order], np.cumsum(weights[:, order], axis=1)
    n = cumulative[:, -1:]
    low = (cumulative < np.floor((n + 1) / 2)).sum(1)
    high = (cumulative < np.floor(n / 2) + 1).sum(1)
    return (ordered[low] + ordered[high]) / 2


def regression_rank_deltas(y: np.ndarray, after: np.ndarray, before: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """spearman, kendall_tau_b, median_absolute_error of both runs over the resampled sample
    (rows x outputs arrays), averaged over outputs; this - other."""
    out: dict[str, list[np.ndarray]] = {"spearman": [], "kendall_tau_b": [], "median_absolute_error": []}
    for j in range(y.shape[1]):
        a, b = after[:, j], before[:, j]
        out["spearman"].append(weighted_spearman(y[:, j], a, weights) - weighted_spearman(y[:, j], b, weights))
        out["kendall_tau_b"].append(weighted_kendall(y[:, j], a, weights) - weighted_kendall(y[:, j], b, weights))
        out["median_absolute_error"].append(weighted_median(np.abs(a - y[:, j]), weights) - weighted_median(np.abs(b - y[:, j]), weights))
    return {k: np.mean(np.stack(v, axis=1), axis=1) for k, v in out.items()}

"""Paired tests of the change between two runs scored on the same rows: an interval, a p-value of
"no change" and a standard error for every delta the comparison reports, Holm's correction for
families of tests, and the change a comparison can detect.

Pure functions over aggregates (numpy and math only, no Prefect, no DuckDB): the per-row work
(joint tables, per-row differences, placement values) is done in SQL (scorekeeper/evaluation/sql/*/paired_*.sql), so
nothing here grows with the row count except where a bound is stated (average precision).

Every result is `{"delta", "ci", "p", "method", "se"}`: `delta` is this run - the other run,
`ci` its 95% interval, `p` the two-sided p-value of "no change", `se` the paired standard error
the detectable change is computed from. Methods:

- `mcnemar_exact` (accuracy): McNemar's exact test on the discordant rows; the interval is the
  paired bootstrap of the three per-row outcomes (right -> wrong, wrong -> right, same).
- `paired_bootstrap` (F1, precision, recall and their averages; ECE; average precision): resampling
  rows with replacement. For metrics of the joint (truth, other's prediction, this prediction)
  table a resample of N rows is exactly a multinomial draw of N over that table's cells, so it costs
  nothing per row (10,000 resamples; over more than 1,000 cells, 10 million draws in all and at
  least 2,000 resamples). Interval: the 2.5% and 97.5% percentiles of the resampled deltas.
  p-value: the share of resampled deltas on the far side of 0, doubled,
  `min(1, 2 (1 + min(#<=0, #>=0)) / (R + 1))` (the percentile interval inverted, with the +1 that
  keeps a Monte Carlo p-value valid): p < 0.05 exactly when 0 lies outside the reported 95%
  interval, so the interval and the p-value never disagree. Fixed seed: reruns give the same numbers.
- `paired_normal` (log loss, and per-row means such as MAE, MSE): mean of the per-row differences,
  SE = sqrt(var / n) (sample variance), normal interval and p.
- `delong` (macro ROC-AUC): DeLong's paired test on the structural components (placement values)
  of every class's one-vs-rest AUC, the classes' contributions averaged per row, so the covariance
  between classes is counted (see `delong_macro`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
Z_95 = 1.959963984540054  # the 97.5% normal quantile (two-sided 95%)
Z_POWER = 0.8416212335729143  # the 80% normal quantile (80% power)
RESAMPLES = 10_000  # bootstrap resamples, and fewer over a table of many cells:
DRAWS = 10_000_000  # resamples x cells stays under this (the multinomial costs per cell), with at
MIN_RESAMPLES = 2_000  # least this many resamples
SEED = 0
CHUNK = 500  # resamples drawn at a time: memory is CHUNK x cells
AP_RESAMPLES = 1_000
AP_ROWS = 4_000  # rows the average-precision bootstrap resamples at most...
AP_CELLS = 8_000_000  # ...and fewer with many labels: resamples x rows x labels stays under this (at least 500 rows)

MCNEMAR, BOOTSTRAP, NORMAL, DELONG = "mcnemar_exact", "paired_bootstrap", "paired_normal", "delong"


def result(delta: float | None, ci: Sequence[float] | None, p: float | None, method: str, se: float | None) -> dict:
    return {
        "delta": None if delta is None else float(delta),
        "ci": None if ci is None else [float(ci[0]), float(ci[1])],
        "p": None if p is None else float(p),
        "method": method,
        "se": None if se is None else float(se),
    }


def untested(method: str) -> dict:
    """A delta that cannot be tested (no paired rows, an undefined metric)."""
    return result(None, None, None, method, None)


def detectable_change(se: float | None) -> float | None:
    """The smallest true change a two-sided test at ALPHA detects with 80% power: (z_0.975 + z_0.8) SE."""
    return None if se is None else (Z_95 + Z_POWER) * se


def normal_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: the binomial(b + c, 1/2) tail at min(b, c), doubled, at most 1.
    Summed in log space (lgamma), so it stays fast and finite for millions of discordant rows."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    log_half = n * math.log(0.5)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half for i in range(k + 1)]
    top = max(logs)
    tail = math.exp(top) * math.fsum(math.exp(v - top) for v in logs)
    return min(1.0, 2.0 * tail)


def significant(test: dict | None, holm: bool = False) -> bool:
    """Whether a test says the runs differ at ALPHA: by its p-value, or by Holm's adjusted p-value
    (`holm`) for a member of a family, so that only what survives the correction counts."""
    return significant_p((test or {}).get("p_holm" if holm else "p"))


def significant_p(p: float | None) -> bool:
    """Whether a p-value (None: no test) is below ALPHA."""
    return p is not None and p < ALPHA


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment within one family: the i-th smallest of m p-values becomes
    max over j <= i of min(1, (m - j + 1) p_(j)). Untested entries (None) are not in the family."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def paired_normal(n: int, mean: float | None, variance: float | None) -> dict:
    """`paired_normal`: the mean per-row difference, SE from the per-row sample variance."""
    if not n or mean is None:
        return untested(NORMAL)
    se = math.sqrt(max(variance or 0.0, 0.0) / n) if n > 1 else 0.0
    if se == 0.0:
        return result(mean, [mean, mean], 1.0 if mean == 0 else 0.0, NORMAL, 0.0)
    return result(mean, [mean - Z_95 * se, mean + Z_95 * se], normal_p(mean / se), NORMAL, se)


def bootstrap_summary(delta: float, draws: np.ndarray, method: str = BOOTSTRAP) -> dict:
    """Percentile interval, the percentile test's p-value (share across 0, doubled) and the SE of
    resampled deltas; resamples where the metric is undefined (NaN) are left out."""
    draws = draws[np.isfinite(draws)]
    if len(draws) == 0 or not math.isfinite(delta):
        return untested(method)
    low, high = np.percentile(draws, [2.5, 97.5])
    across = min(int(np.count_nonzero(draws <= 0)), int(np.count_nonzero(draws >= 0)))
    p = min(1.0, 2.0 * (1 + across) / (len(draws) + 1))
    se = float(np.std(draws, ddof=1)) if len(draws) > 1 else 0.0
    return result(delta, [low, high], p, method, se)


def multinomial_draws(rng: np.random.Generator, rows: int, counts: np.ndarray, resamples: int):
    """Multinomial resamples of `rows` rows over cells holding `counts` rows, CHUNK at a time."""
    pvals = counts / counts.sum()
    done = 0
    while done < resamples:
        size = min(CHUNK, resamples - done)
        yield rng.multinomial(rows, pvals, size=size).astype(np.float64)
        done += size


def resamples_for(cells: int) -> int:
    """Resamples of a multinomial bootstrap over this many cells: RESAMPLES, fewer past DRAWS draws."""
    return max(MIN_RESAMPLES, min(RESAMPLES, DRAWS // max(cells, 1)))


def accuracy_test(right_to_wrong: int, wrong_to_right: int, rows: int, resamples: int = RESAMPLES) -> dict:
    """`mcnemar_exact`: delta (wrong_to_right - right_to_wrong) / rows, McNemar's exact p, and the
    paired bootstrap interval (a multinomial of the three per-row outcomes -1, +1, 0: exactly the
    distribution of resampling rows). SE: of the per-row differences, sqrt((b + c)/n - delta^2) / sqrt(n)."""
    if rows == 0:
        return untested(MCNEMAR)
    b, c = right_to_wrong, wrong_to_right
    delta = (c - b) / rows
    counts = np.array([b, c, rows - b - c], dtype=np.float64)
    rng = np.random.default_rng(SEED)
    deltas = np.concatenate([(d[:, 1] - d[:, 0]) / rows for d in multinomial_draws(rng, rows, counts, resamples)])
    low, high = np.percentile(deltas, [2.5, 97.5])
    se = math.sqrt(max((b + c) / rows - delta * delta, 0.0) / rows)
    return result(delta, [low, high], mcnemar_exact(b, c), MCNEMAR, se)


def _sum_by(weights: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Column sums of `weights` (resamples x cells) grouped by each cell's key in 0..k-1 (-1: left
    out), as a resamples x k array; costs resamples x cells, whatever k is."""
    out = np.zeros((weights.shape[0], k))
    keep = np.flatnonzero(keys >= 0)
    if len(keep) == 0:
        return out
    order = keep[np.argsort(keys[keep], kind="stable")]
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    out[:, sorted_keys[starts]] = np.add.reduceat(weights[:, order], starts, axis=1)
    return out


@dataclass(frozen=True)
class JointTable:
    """Counts of the paired rows by (truth, other run's prediction, this run's prediction), as class
    codes into `classes` (every name that occurs as truth or as either prediction)."""

    classes: list[str]
    truth: np.ndarray
    before: np.ndarray
    after: np.ndarray
    count: np.ndarray

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[str, str, str, int]]) -> JointTable:
        classes = sorted({name for t, b, a, _ in rows for name in (t, b, a)})
        code = {name: i for i, name in enumerate(classes)}
        truth = np.array([code[t] for t, _, _, _ in rows], dtype=np.int64)
        before = np.array([code[b] for _, b, _, _ in rows], dtype=np.int64)
        after = np.array([code[a] for _, _, a, _ in rows], dtype=np.int64)
        return cls(classes, truth, before, after, np.array([n for _, _, _, n in rows], dtype=np.float64))

    @property
    def rows(self) -> int:
        return int(self.count.sum())

    def scores(self, weights: np.ndarray) -> dict[str, dict[str, dict[str, np.ndarray]]]:
        """For count weights (resamples x cells), per side ('before', 'after'): `per_class`
        precision, recall and F1 (resamples x classes; 0/0 counts as 0) and the `averages` of F1,
        macro and weighted, over the classes occurring as truth or that side's prediction
        (scikit-learn's semantics), one value per resample."""
        k = len(self.classes)
        support = _sum_by(weights, self.truth, k)
        out = {}
        for side, pred in (("before", self.before), ("after", self.after)):
            predicted = _sum_by(weights, pred, k)
            tp = _sum_by(weights, np.where(self.truth == pred, self.truth, -1), k)
            with np.errstate(divide="ignore", invalid="ignore"):
                f1 = np.where(support + predicted > 0, 2 * tp / (support + predicted), 0.0)
                present = (support + predicted) > 0
                out[side] = {
                    "per_class": {
                        "precision": np.where(predicted > 0, tp / predicted, 0.0),
                        "recall": np.where(support > 0, tp / support, 0.0),
                        "f1": f1,
                    },
                    "averages": {
                        "macro_f1": (f1 * present).sum(1) / present.sum(1),
                        "weighted_f1": (f1 * support).sum(1) / support.sum(1),
                    },
                }
        return out


def count_tests(table: JointTable, resamples: int | None = None) -> tuple[dict, dict]:
    """`paired_bootstrap` over the joint table: ({average: result} for macro and weighted F1,
    {class: {"precision", "recall", "f1"}: result}). One set of resamples serves every metric."""
    point = table.scores(table.count[None, :])
    if table.rows == 0:
        return {name: untested(BOOTSTRAP) for name in point["after"]["averages"]}, {}
    rng = np.random.default_rng(SEED)
    parts: dict[tuple[str, str], list[np.ndarray]] = {}
    for weights in multinomial_draws(rng, table.rows, table.count, resamples or resamples_for(len(table.count))):
        scored = table.scores(weights)
        for group, values in scored["after"].items():
            for name, value in values.items():
                parts.setdefault((group, name), []).append(value - scored["before"][group][name])
    deltas = {key: np.concatenate(chunks) for key, chunks in parts.items()}

    def change(group: str, name: str) -> np.ndarray:
        return point["after"][group][name][0] - point["before"][group][name][0]

    averages = {name: bootstrap_summary(float(change("averages", name)), deltas["averages", name]) for name in point["after"]["averages"]}
    per_class = {
        label: {
            name: bootstrap_summary(float(change("per_class", name)[j]), deltas["per_class", name][:, j])
            for name in point["after"]["per_class"]
        }
        for j, label in enumerate(table.classes)
    }
    return averages, per_class


@dataclass(frozen=True)
class CalibrationCells:
    """The paired rows grouped by (bin, correct) of the other run and of this run; per cell the
    row count and the mean, population variance and covariance of the two runs' scores."""

    bins: int
    bin_before: np.ndarray
    correct_before: np.ndarray
    bin_after: np.ndarray
    correct_after: np.ndarray
    count: np.ndarray
    mean_before: np.ndarray
    mean_after: np.ndarray
    var_before: np.ndarray
    var_after: np.ndarray
    cov: np.ndarray

    @classmethod
    def from_rows(cls, bins: int, rows: Sequence[tuple]) -> CalibrationCells:
        columns = list(zip(*rows, strict=True)) if rows else [()] * 10
        ints = [np.array(c, dtype=np.int64) for c in columns[:4]]
        floats = [np.array(c, dtype=np.float64) for c in columns[4:]]
        return cls(bins, *ints, *floats)

    def ece(self, counts: np.ndarray, score_sums: np.ndarray, side: str) -> np.ndarray:
        """ECE = sum over bins |sum(correct) - sum(score)| / rows, for cell counts and score sums."""
        bins, correct = (self.bin_before, self.correct_before) if side == "before" else (self.bin_after, self.correct_after)
        gap = _sum_by(counts * correct - score_sums, bins, self.bins)
        return np.abs(gap).sum(1) / counts.sum(1)


def ece_test(cells: CalibrationCells, resamples: int | None = None) -> dict:
    """`paired_bootstrap` of the ECE delta at a cost independent of the row count: a resample draws
    each cell's row count (multinomial over the cells) and, given it, the two runs' score sums over
    those rows from the bivariate normal of a sum of that many draws from the cell (the cell's
    means, variances and covariance). Bin and correctness, which decide the bins' accuracy, are
    resampled exactly; only the spread of scores within one cell (at most 1/bins wide) is normal."""
    n = int(cells.count.sum())
    if n == 0:
        return untested(BOOTSTRAP)
    point = [
        cells.ece(cells.count[None, :], (cells.count * m)[None, :], s)[0]
        for s, m in (("before", cells.mean_before), ("after", cells.mean_after))
    ]
    sd_before = np.sqrt(np.maximum(cells.var_before, 0.0))
    cross = np.divide(cells.cov, sd_before, out=np.zeros_like(cells.cov), where=sd_before > 0)
    rest = np.sqrt(np.maximum(cells.var_after - cross**2, 0.0))
    rng = np.random.default_rng(SEED)
    deltas = []
    for counts in multinomial_draws(rng, n, cells.count, resamples or resamples_for(len(cells.count))):
        z1, z2 = rng.standard_normal(counts.shape), rng.standard_normal(counts.shape)
        root = np.sqrt(counts)
        before = cells.ece(counts, counts * cells.mean_before + root * sd_before * z1, "before")
        after = cells.ece(counts, counts * cells.mean_after + root * (cross * z1 + rest * z2), "after")
        deltas.append(after - before)
    return bootstrap_summary(point[1] - point[0], np.concatenate(deltas))


def delong_macro(auc_before: Sequence[float], auc_after: Sequence[float], strata: Sequence[tuple[int, float | None]]) -> dict:
    """`delong`: the paired test of the macro (unweighted mean over classes) one-vs-rest ROC-AUC.

    For class k with m_k positives and n_k negatives, a row's placement value is the share of the
    other group it outranks (ties one half); AUC_k is the mean placement of the positives, and to
    first order AUC_k - E[AUC_k] = mean over positives (V - AUC_k) + mean over negatives (V - AUC_k)
    (DeLong, DeLong & Clarke-Pearson 1988). Each row thus adds (V_after - V_before) / (its group's
    size) to class k's AUC change; phi_i averages that over the K classes. Rows of the same true class
    play the same role in every class, so they form one stratum, and
    Var(macro delta) = sum over true classes t of n_t * sample variance of phi within t.
    With one class this is DeLong's (S10_AA + S10_BB - 2 S10_AB) / m + (S01...) / n exactly.
    `strata`: (n_t, sample variance of phi over rows of true class t) from SQL."""
    if not auc_before:
        return untested(DELONG)
    delta = float(np.mean(np.asarray(auc_after) - np.asarray(auc_before)))
    variance = sum(n * (v or 0.0) for n, v in strata if n > 1)
    se = math.sqrt(max(variance, 0.0))
    if se == 0.0:
        return result(delta, [delta, delta], 1.0 if delta == 0 else 0.0, DELONG, 0.0)
    return result(delta, [delta - Z_95 * se, delta + Z_95 * se], normal_p(delta / se), DELONG, se)


def average_precision(truth: np.ndarray, scores: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """scikit-learn's average precision of class k (one-vs-rest) under row weights (resamples x rows)."""
    return weighted_average_precision(truth == k, scores, weights)


def weighted_average_precision(positive: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """scikit-learn's average precision of boolean `positive` ranked by `scores` under row weights
    (resamples x rows): sum over distinct scores, highest first, of (positives at that score /
    positives) * precision at or above it. NaN where a resample holds no positive."""
    order = np.argsort(-scores, kind="stable")
    ordered = scores[order]
    ends = np.flatnonzero(np.r_[ordered[1:] != ordered[:-1], True])
    w = weights[:, order]
    at_or_above = np.cumsum(w, axis=1)[:, ends]
    tp = np.cumsum(w * positive[order], axis=1)[:, ends]
    pos = np.diff(tp, axis=1, prepend=0.0)
    precision = np.divide(tp, at_or_above, out=np.zeros_like(tp), where=at_or_above > 0)
    positives = tp[:, -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(positives > 0, (pos * precision).sum(1) / positives, np.nan)


def macro_average_precision(truth: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean over classes with a positive (per resample) of the average precision."""
    per_class = np.stack([average_precision(truth, scores[:, k], weights, k) for k in range(scores.shape[1])], axis=1)
    known = ~np.isnan(per_class)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(known, per_class, 0.0).sum(1) / known.sum(1)


def ap_test(
    delta: float | None, truth: np.ndarray, before: np.ndarray, after: np.ndarray, rows: int, resamples: int = AP_RESAMPLES
) -> dict:
    """`paired_bootstrap` of the macro average-precision delta. Average precision depends on every
    row's rank, so it is resampled row by row, over at most ap_rows(labels) rows: all paired rows when there
    are no more, else a fixed-seed random subset of M of the N rows, whose resampled deviations are
    scaled by sqrt(M / N) around the delta over all rows (the m-out-of-n bootstrap of a statistic
    with a normal limit). `delta` is the delta over all rows; `truth`, `before`, `after` the subset
    (true class ids, both runs' probabilities in this run's label order)."""
    m = len(truth)
    if delta is None or m == 0:
        return untested(BOOTSTRAP)
    sample_delta = float(
        macro_average_precision(truth, after, np.ones((1, m)))[0] - macro_average_precision(truth, before, np.ones((1, m)))[0]
    )
    rng = np.random.default_rng(SEED)
    deltas = []
    for weights in multinomial_draws(rng, m, np.ones(m), resamples):
        deltas.append(macro_average_precision(truth, after, weights) - macro_average_precision(truth, before, weights))
    draws = np.concatenate(deltas)
    scale = math.sqrt(m / rows) if rows > m else 1.0
    return bootstrap_summary(delta, delta + scale * (draws - sample_delta))


def ap_rows(labels: int) -> int:
    """How many rows the average-precision bootstrap resamples for this many labels."""
    return max(500, min(AP_ROWS, AP_CELLS // (AP_RESAMPLES * max(labels, 1))))


def subset_positions(rows: int, size: int = AP_ROWS) -> np.ndarray:
    """The positions (0-based, in row order) of the fixed-seed subset `ap_test` resamples."""
    if rows <= size:
        return np.arange(rows)
    return np.sort(np.random.default_rng(SEED).choice(rows, size=size, replace=False))

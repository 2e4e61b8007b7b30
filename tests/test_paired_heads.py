"""The paired tests of the multi-label and regression comparisons (scorekeeper/evaluation/statistics/paired_blocks.py and
the SQL of scorekeeper/evaluation/compare.py and the kinds' pairers) against independent references: each statistic on one resample
equals scikit-learn / scipy on the rows that resample holds; the bootstraps agree with a brute-force
row-by-row paired bootstrap within Monte Carlo error; DeLong by row influence equals DeLong's
pairwise formula for one label and a row bootstrap's spread for several; a null difference gives
p-values spread over (0, 1), a real one a small p."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr
from sklearn.metrics import (
    average_precision_score,
    explained_variance_score,
    f1_score,
    max_error,
    precision_score,
    r2_score,
    recall_score,
    roc_auc_score,
)

from scorekeeper.evaluation.duck import ovr_table, sql, statement
from scorekeeper.evaluation.regression import SUMMED
from scorekeeper.evaluation.statistics import paired_blocks as ph
from scorekeeper.evaluation.statistics import paired_tests as pt
from tests.test_paired_tests import agree, resampled

BINS = 15


def multilabel_runs(n: int, labels: int, seed: int, shift: float = 0.0, noise: float = 0.7):
    """Truth (n x labels, some rows without a label) and two correlated runs' probabilities; `shift`
    makes this run better on the positives of label 0, a `noise` under 0.7 better everywhere."""
    rng = np.random.default_rng(seed)
    truth = rng.random((n, labels)) < np.linspace(0.15, 0.5, labels)
    signal = np.where(truth, 1.0, -1.0) + rng.normal(scale=0.8, size=(n, labels))
    before = signal + rng.normal(scale=0.7, size=(n, labels))
    after = signal + rng.normal(scale=noise, size=(n, labels))
    after[truth[:, 0], 0] += shift
    sigmoid = lambda z: (1 / (1 + np.exp(-z))).round(3)  # noqa: E731  rounded: ties, as real models give
    return truth, sigmoid(after), sigmoid(before)


def count_sums(truth, after, before):
    """One block per row: ph.COUNT_FIELDS per label, as paired_multilabel_blocks.sql lays them out."""
    a, b = after > 0.5, before > 0.5
    return np.stack([truth & a, ~truth & a, truth & b, ~truth & b, truth], axis=2).reshape(len(truth), -1).astype(float)


def sk_counts(truth, a, b):
    out = {}
    for name, f in (("micro_f1", f1_score), ("micro_precision", precision_score), ("micro_recall", recall_score)):
        out[name] = f(truth, a, average="micro", zero_division=0) - f(truth, b, average="micro", zero_division=0)
    for avg in ("macro", "weighted"):
        out[f"{avg}_f1"] = f1_score(truth, a, average=avg, zero_division=0) - f1_score(truth, b, average=avg, zero_division=0)
    return out


def test_multilabel_count_statistic_on_a_resample_is_scikit_learn_on_its_rows():
    truth, after, before = multilabel_runs(120, 4, seed=1)
    sums = count_sums(truth, after, before)
    picks = np.random.default_rng(5).integers(0, 120, size=120)
    weights = np.bincount(picks, minlength=120)[None, :].astype(float)
    got = ph.multilabel_count_deltas(weights @ sums, np.zeros((1, 0)), 4)
    expected = sk_counts(truth[picks], after[picks] > 0.5, before[picks] > 0.5)
    assert {k: float(v[0]) for k, v in got.items()} == pytest.approx(expected, abs=1e-12)


def brute_counts(truth, a, b, picks):
    """The F1 averages' deltas on each resample of rows (picks: resamples x rows), counted row by row."""
    t = truth[picks]
    out = {}
    for side, pred in (("a", a[picks]), ("b", b[picks])):
        tp, fp, fn = (t & pred).sum(1), (~t & pred).sum(1), (t & ~pred).sum(1)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
        TP, FP, FN = tp.sum(1), fp.sum(1), fn.sum(1)
        out[side] = {
            "micro_f1": 2 * TP / (2 * TP + FP + FN),
            "micro_precision": TP / (TP + FP),
            "micro_recall": TP / (TP + FN),
            "macro_f1": f1.mean(1),
            "weighted_f1": (f1 * (tp + fn)).sum(1) / (tp + fn).sum(1),
        }
    return {k: out["a"][k] - out["b"][k] for k in out["a"]}


def test_multilabel_count_bootstrap_agrees_with_a_row_by_row_bootstrap():
    truth, after, before = multilabel_runs(300, 4, seed=2, shift=0.8)
    blocks, resamples = ph.block_plan(300, 20)
    assert blocks == 300 and resamples == pt.RESAMPLES  # one row per block: the plain paired bootstrap
    tests = ph.block_bootstrap(
        count_sums(truth, after, before), np.zeros((300, 0)), lambda t, h: ph.multilabel_count_deltas(t, h, 4), resamples
    )
    naive = brute_counts(truth, after > 0.5, before > 0.5, resampled(300))
    point = sk_counts(truth, after > 0.5, before > 0.5)
    for name in point:
        agree(tests[name], naive[name], point[name])


def reference_ece(truth, probs):
    """Binary ECE per label over 15 equal-width bins (b/15, (b+1)/15], then macro and micro."""

    def ece(t, p):
        bins = np.minimum(np.floor(p * BINS).astype(int), BINS - 1)
        return sum(abs(t[bins == b].sum() - p[bins == b].sum()) for b in range(BINS)) / len(t)

    return np.mean([ece(truth[:, k], probs[:, k]) for k in range(truth.shape[1])]), ece(truth.ravel(), probs.ravel())


def ece_sums(truth, after, before):
    out = [np.ones(len(truth))]
    for probs in (after, before):
        bins = np.minimum(np.floor(probs * BINS).astype(int), BINS - 1)
        gaps = np.zeros((len(truth), truth.shape[1], BINS))
        rows, labels = np.indices(truth.shape)
        gaps[rows, labels, bins] = truth - probs
        out.append(gaps.reshape(len(truth), -1))
    return np.column_stack(out)


def test_multilabel_ece_bootstrap_is_the_binned_ece_and_agrees_with_a_row_by_row_bootstrap():
    truth, after, before = multilabel_runs(300, 3, seed=3, shift=0.8)
    sums = ece_sums(truth, after, before)
    statistic = lambda t, h: ph.multilabel_ece_deltas(t, h, 3, BINS)  # noqa: E731
    tests = ph.block_bootstrap(sums, np.zeros((300, 0)), statistic, pt.RESAMPLES)
    naive = []
    for i in resampled(300):
        (ma, ia), (mb, ib) = reference_ece(truth[i], after[i]), reference_ece(truth[i], before[i])
        naive.append((ma - mb, ia - ib))
    (ma, ia), (mb, ib) = reference_ece(truth, after), reference_ece(truth, before)
    agree(tests["ece_macro"], np.array([d[0] for d in naive]), ma - mb)
    agree(tests["ece_micro"], np.array([d[1] for d in naive]), ia - ib)


def regression_runs(n: int, seed: int, outputs: int = 1, gap: float = 0.0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, outputs)).round(1)  # ties
    before = y + rng.normal(scale=0.8, size=(n, outputs))
    after = y + rng.normal(scale=0.8 - gap, size=(n, outputs))
    return y, after.round(2), before.round(2)


def regression_sums(y, after, before):
    """SUM_FIELDS and HIGH_FIELDS per row (one block each), as paired_regression_blocks.sql computes them."""
    yc = y - y.mean(0)
    parts, highs = [[np.ones_like(y), yc, yc * yc, np.abs(y)]], [[]]
    for p in (after, before):
        e = p - y
        ec, pc = e - e.mean(0), p - p.mean(0)
        parts.append([e * e, np.abs(e), ec, ec * ec, pc, pc * pc, yc * pc])
    sums = np.stack(parts[0] + parts[1] + parts[2], axis=2)
    highs = np.stack([np.abs(after - y), np.abs(before - y), y, -y, after, -after, before, -before], axis=2)
    return sums.reshape(len(y), -1), highs.reshape(len(y), -1)


def sk_regression(y, a, b):
    def values(p):
        return {
            "rmse": np.sqrt(np.mean((p - y) ** 2)),
            "r2": r2_score(y, p),
            "explained_variance": explained_variance_score(y, p),
            "pearson": pearsonr(y, p)[0],
            "wmape": np.abs(p - y).sum() / np.abs(y).sum(),
            "max_error": max_error(y, p),
        }

    this, other = values(a), values(b)
    return {k: this[k] - other[k] for k in this}


def test_regression_sum_statistic_on_a_resample_is_scikit_learn_and_scipy_on_its_rows():
    y, after, before = regression_runs(150, seed=4)
    sums, highs = regression_sums(y, after, before)
    picks = np.random.default_rng(6).integers(0, 150, size=150)
    weights = np.bincount(picks, minlength=150)[None, :].astype(float)
    maxima = np.where(weights.T > 0, highs, -np.inf).max(0)[None, :]
    got = ph.regression_sum_deltas(weights @ sums, maxima, 1, SUMMED)
    expected = sk_regression(y[picks, 0], after[picks, 0], before[picks, 0])
    assert {k: float(v[0]) for k, v in got.items()} == pytest.approx(expected, abs=1e-10)


def test_regression_sum_bootstrap_agrees_with_a_row_by_row_bootstrap_and_averages_outputs():
    y, after, before = regression_runs(300, seed=5, gap=0.2)
    sums, highs = regression_sums(y, after, before)
    tests = ph.block_bootstrap(sums, highs, lambda t, h: ph.regression_sum_deltas(t, h, 1, SUMMED), pt.RESAMPLES)
    picks = np.random.default_rng(99).integers(0, 300, size=(10_000, 300))  # more resamples: less Monte Carlo error
    ys = y[picks, 0]

    def brute(p):
        e = p[picks, 0] - ys
        yc, pc = ys - ys.mean(1, keepdims=True), p[picks, 0] - p[picks, 0].mean(1, keepdims=True)
        return {
            "rmse": np.sqrt((e**2).mean(1)),
            "r2": 1 - (e**2).sum(1) / (yc**2).sum(1),
            "explained_variance": 1 - e.var(1) / ys.var(1),
            "pearson": (yc * pc).sum(1) / np.sqrt((yc**2).sum(1) * (pc**2).sum(1)),
            "wmape": np.abs(e).sum(1) / np.abs(ys).sum(1),
        }

    this, other = brute(after), brute(before)
    point = sk_regression(y[:, 0], after[:, 0], before[:, 0])
    for name in this:
        agree(tests[name], this[name] - other[name], point[name])
    assert tests["max_error"]["delta"] == pytest.approx(point["max_error"])  # its interval: see the module's caveat
    y2, a2, b2 = regression_runs(200, seed=6, outputs=2)
    both = ph.regression_sum_deltas(
        *(s.sum(0)[None, :] if k == 0 else s.max(0)[None, :] for k, s in enumerate(regression_sums(y2, a2, b2))), 2, SUMMED
    )
    per_output = [sk_regression(y2[:, j], a2[:, j], b2[:, j]) for j in range(2)]
    assert {k: float(v[0]) for k, v in both.items()} == pytest.approx({k: np.mean([d[k] for d in per_output]) for k in both}, abs=1e-10)


def test_a_constant_truth_leaves_r2_and_pearson_undefined_in_that_resample():
    y = np.full((5, 1), 2.0)
    sums, highs = regression_sums(y, y + np.arange(5)[:, None], y - 1)
    got = ph.regression_sum_deltas(sums.sum(0)[None, :], highs.max(0)[None, :], 1, SUMMED)
    assert np.isnan(got["r2"][0]) and np.isnan(got["explained_variance"][0]) and np.isnan(got["pearson"][0])
    assert got["rmse"][0] == pytest.approx(np.sqrt(np.mean(np.arange(5) ** 2.0)) - 1.0)


def test_the_rank_statistics_under_resample_weights_are_scipys_on_the_expanded_rows():
    y, after, before = regression_runs(80, seed=7)
    rng = np.random.default_rng(8)
    picks = [rng.integers(0, 80, size=80) for _ in range(3)] + [np.arange(80)]
    weights = np.stack([np.bincount(p, minlength=80) for p in picks]).astype(float)
    got = ph.regression_rank_deltas(y, after, before, weights)
    for r, p in enumerate(picks):
        ys, a, b = y[p, 0], after[p, 0], before[p, 0]
        assert got["spearman"][r] == pytest.approx(spearmanr(ys, a)[0] - spearmanr(ys, b)[0], abs=1e-10)
        assert got["kendall_tau_b"][r] == pytest.approx(kendalltau(ys, a)[0] - kendalltau(ys, b)[0], abs=1e-10)
        assert got["median_absolute_error"][r] == pytest.approx(np.median(np.abs(a - ys)) - np.median(np.abs(b - ys)), abs=1e-12)
    odd = np.bincount(picks[0][:79], minlength=80)[None, :].astype(float)  # an odd row count: the middle value
    assert ph.weighted_median(np.abs(after[:, 0] - y[:, 0]), odd)[0] == np.median(np.abs(after[picks[0][:79], 0] - y[picks[0][:79], 0]))


def test_the_rank_sample_bootstrap_agrees_with_a_row_by_row_bootstrap():
    y, after, before = regression_runs(400, seed=9, gap=0.2)
    full = {k: float(v[0]) for k, v in ph.regression_rank_deltas(y, after, before, np.ones((1, 400))).items()}
    tests = ph.sample_bootstrap(full, lambda w: ph.regression_rank_deltas(y, after, before, w), 400, 400, 2000)
    naive = {k: [] for k in full}
    for i in resampled(400)[:1000]:
        for k, v in ph.regression_rank_deltas(y[i], after[i], before[i], np.ones((1, 400))).items():
            naive[k].append(v[0])
    for k in full:
        assert tests[k]["se"] == pytest.approx(np.std(naive[k], ddof=1), rel=0.12)
        assert tests[k]["method"] == "paired_bootstrap"
    # a sample of the rows stands for all of them: its spread shrinks by sqrt(m / n)
    scaled = ph.sample_bootstrap(full, lambda w: ph.regression_rank_deltas(y, after, before, w), 400, 1600, 2000)
    assert scaled["spearman"]["se"] == pytest.approx(tests["spearman"]["se"] / 2, rel=1e-9)


def test_multilabel_average_precision_under_weights_is_scikit_learns_on_the_expanded_rows():
    truth, after, _ = multilabel_runs(60, 3, seed=10)
    truth[:, 2] = True  # a label with no negative: left out of the macro
    picks = np.random.default_rng(11).integers(0, 60, size=60)
    weights = np.bincount(picks, minlength=60)[None, :].astype(float)
    got = ph.multilabel_ap(truth, after, weights)
    t, p = truth[picks], after[picks]
    macro = np.mean([average_precision_score(t[:, k], p[:, k]) for k in (0, 1)])
    assert got["average_precision_macro"][0] == pytest.approx(macro, abs=1e-12)
    assert got["average_precision_micro"][0] == pytest.approx(average_precision_score(t.ravel(), p.ravel()), abs=1e-12)


def delong_sql(truth, after, before):
    """Runs paired_multilabel_delong.sql over the tables multi_label.pair builds."""
    con = duckdb.connect()
    rows, labels = np.indices(truth.shape)
    cells = pa.table(
        {
            "row_index": rows.ravel(),
            "label_id": labels.ravel(),
            "truth": truth.ravel(),
            "prob_after": after.ravel(),
            "prob_before": before.ravel(),
        }
    )
    con.register("cells", cells)
    con.execute("CREATE TABLE ml_paired_cells AS SELECT * FROM cells")
    for side in ("after", "before"):
        cells = statement("(SELECT label_id, {prob} AS score, truth FROM ml_paired_cells)", prob=f"prob_{side}")
        con.execute(ovr_table(f"ml_paired_ovr_{side}", sql("multilabel_ovr.sql", cells=cells)))
    macro_delta, macro_sq, micro_delta, micro_sq = con.execute(sql("paired_multilabel_delong.sql")).fetchone()
    return ph.delong_influence(macro_delta, macro_sq), ph.delong_influence(micro_delta, micro_sq)


def delong_pairwise(truth, a, b):
    """DeLong, DeLong & Clarke-Pearson (1988) for two correlated AUCs, pair by pair."""
    pos, neg = truth, ~truth

    def placements(s):
        d = s[pos][:, None] - s[neg][None, :]
        psi = (d > 0) + 0.5 * (d == 0)
        return psi.mean(1), psi.mean(0), psi.mean()

    v10a, v01a, auc_a = placements(a)
    v10b, v01b, auc_b = placements(b)
    s10 = np.cov(np.stack([v10a, v10b]))
    s01 = np.cov(np.stack([v01a, v01b]))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / pos.sum() + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / neg.sum()
    return auc_a - auc_b, np.sqrt(var)


def test_delong_by_row_influence_is_delongs_formula_for_one_label_and_a_row_bootstraps_spread_for_several():
    truth, after, before = multilabel_runs(200, 1, seed=12, shift=0.5)
    macro, micro = delong_sql(truth, after, before)
    delta, se = delong_pairwise(truth[:, 0], after[:, 0], before[:, 0])
    assert macro["delta"] == pytest.approx(delta, abs=1e-12) and macro["se"] == pytest.approx(se, rel=1e-9)
    assert micro["se"] == pytest.approx(se, rel=1e-9) and macro["method"] == "delong"

    truth, after, before = multilabel_runs(300, 4, seed=13, shift=0.5)
    macro, micro = delong_sql(truth, after, before)
    sk = lambda t, a, b, avg: roc_auc_score(t, a, average=avg) - roc_auc_score(t, b, average=avg)  # noqa: E731
    assert macro["delta"] == pytest.approx(sk(truth, after, before, "macro"), abs=1e-12)
    assert micro["delta"] == pytest.approx(sk(truth, after, before, "micro"), abs=1e-12)
    naive = np.array([[sk(truth[i], after[i], before[i], avg) for avg in ("macro", "micro")] for i in resampled(300)[:400]])
    assert macro["se"] == pytest.approx(np.std(naive[:, 0], ddof=1), rel=0.15)
    assert micro["se"] == pytest.approx(np.std(naive[:, 1], ddof=1), rel=0.15)


def test_a_null_difference_spreads_p_over_0_1_and_a_real_one_gives_a_small_p():
    """40 seeded pairs of equally good runs: few p-values under 0.05 (5% expected; the percentile
    bootstrap runs a little over at 200 rows, about 9% over 150 seeds for micro F1), their mean near 1/2;
    then a run better on one label: p well under 0.05. For the block bootstrap (micro F1, r2), the
    row-sample bootstrap (spearman) and DeLong (micro ROC-AUC)."""
    ps: dict[str, list[float]] = {"micro_f1": [], "r2": [], "spearman": [], "roc_auc_micro": []}
    for seed in range(40):
        truth, after, before = multilabel_runs(200, 3, seed=100 + seed)
        f1 = ph.block_bootstrap(
            count_sums(truth, after, before), np.zeros((200, 0)), lambda t, h: ph.multilabel_count_deltas(t, h, 3), 1000
        )
        ps["micro_f1"].append(f1["micro_f1"]["p"])
        ps["roc_auc_micro"].append(delong_sql(truth, after, before)[1]["p"])
        y, a, b = regression_runs(200, seed=200 + seed)
        sums, highs = regression_sums(y, a, b)
        ps["r2"].append(ph.block_bootstrap(sums, highs, lambda t, h: ph.regression_sum_deltas(t, h, 1, SUMMED), 1000)["r2"]["p"])
        full = {"spearman": float(ph.regression_rank_deltas(y, a, b, np.ones((1, 200)))["spearman"][0])}
        rank = lambda w: {"spearman": ph.regression_rank_deltas(y, a, b, w)["spearman"]}  # noqa: E731, B023
        ps["spearman"].append(ph.sample_bootstrap(full, rank, 200, 200, 300)["spearman"]["p"])
    for name, values in ps.items():
        values_ = np.array(values)
        assert np.mean(values_ < 0.05) <= 0.175, name
        assert 0.3 < values_.mean() < 0.7, name
    truth, after, before = multilabel_runs(400, 3, seed=7, noise=0.2)
    f1 = ph.block_bootstrap(count_sums(truth, after, before), np.zeros((400, 0)), lambda t, h: ph.multilabel_count_deltas(t, h, 3), 2000)
    assert f1["micro_f1"]["p"] < 0.01 and f1["micro_f1"]["delta"] > 0
    assert delong_sql(truth, after, before)[0]["p"] < 0.01
    y, a, b = regression_runs(400, seed=8, gap=0.5)
    sums, highs = regression_sums(y, a, b)
    assert ph.block_bootstrap(sums, highs, lambda t, h: ph.regression_sum_deltas(t, h, 1, SUMMED), 2000)["r2"]["p"] < 0.01


def test_block_plan_bounds_the_work_and_hashes_rows_into_blocks_past_the_limit():
    assert ph.block_plan(50, 20) == (50, pt.RESAMPLES)
    blocks, resamples = ph.block_plan(5_000_000, 18)
    assert blocks == ph.BOOTSTRAP_BLOCKS and resamples * blocks * 18 <= ph.WORK and resamples >= pt.MIN_RESAMPLES
    blocks, resamples = ph.block_plan(5_000_000, 1 + 2 * 50 * BINS)  # 50 labels' calibration gaps
    assert blocks == ph.MIN_BLOCKS and resamples == pt.MIN_RESAMPLES

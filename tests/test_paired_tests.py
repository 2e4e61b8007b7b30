"""The paired tests of a comparison (scorekeeper/evaluation/statistics/paired_tests.py, scorekeeper/evaluation/single_label.py's comparison_tests) against
independent references: a brute-force bootstrap that resamples rows one by one (agreement within
Monte Carlo error), McNemar's exact binomial form, DeLong's variance computed pair by pair, Holm on
a hand example; then through evaluate_run(): every delta carries its test, Holm keeps null slices from
looking significant, and an `if significant` gate reads its own metric's test."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import rankdata
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

from scorekeeper.evaluation import single_label as evaluation
from scorekeeper.evaluation.base import LOG_LOSS_EPS
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.evaluation.single_label import ECE_BINS, score_tests
from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.gates import evaluate_gates
from tests.test_compare import LABELS, write_run

NAIVE = 3000  # row-by-row resamples of the brute-force references


def two_models(n: int, k: int, seed: int, shift: float = 0.3):
    """Truth and two correlated models' probabilities: the second a little better on class 0."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, size=n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), truth] += 1.2
    before = logits + rng.normal(scale=0.6, size=(n, k))
    after = logits + rng.normal(scale=0.6, size=(n, k))
    after[truth == 0, 0] += shift

    def softmax(z):
        e = np.exp(z - z.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True)).round(4)  # rounded: ties in the scores, as real models give

    return truth, softmax(before), softmax(after)


def resampled(n: int, seed: int = 99) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(NAIVE, n))


def agree(test: dict, naive: np.ndarray, delta: float) -> None:
    """Interval ends and SE within Monte Carlo error of the row-by-row bootstrap, and its p-value
    (share across 0, doubled) within a few of its standard errors."""
    se = np.std(naive, ddof=1)
    assert test["delta"] == pytest.approx(delta, abs=1e-12)
    assert test["se"] == pytest.approx(se, rel=0.08)
    low, high = np.percentile(naive, [2.5, 97.5])
    assert test["ci"][0] == pytest.approx(low, abs=0.15 * se)
    assert test["ci"][1] == pytest.approx(high, abs=0.15 * se)
    p = min(1.0, 2 * min(np.mean(naive <= 0), np.mean(naive >= 0)))
    assert test["p"] == pytest.approx(p, abs=max(0.02, 4 * math.sqrt(p * (1 - p) / NAIVE)))


def joint_table(truth, before, after) -> pt.JointTable:
    cells: dict[tuple, int] = {}
    for t, b, a in zip(truth, before, after, strict=True):
        key = (f"c{t}", f"c{b}", f"c{a}")
        cells[key] = cells.get(key, 0) + 1
    return pt.JointTable.from_rows([(*k, n) for k, n in sorted(cells.items())])


def f1s(truth, pred, k):
    """Per-class F1 written out from the counts (0/0 = 0), and macro over classes present."""
    f1 = []
    present = []
    for c in range(k):
        tp = np.sum((truth == c) & (pred == c))
        denom = np.sum(truth == c) + np.sum(pred == c)
        f1.append(2 * tp / denom if denom else 0.0)
        present.append(denom > 0)
    f1 = np.array(f1)
    return f1, f1[present].mean(), np.sum(f1 * np.bincount(truth, minlength=k)) / len(truth)


def test_count_metrics_match_a_row_by_row_bootstrap():
    truth, before, after = two_models(300, 3, seed=1)
    pred_b, pred_a = before.argmax(1), after.argmax(1)
    headline, per_class = pt.count_tests(joint_table(truth, pred_b, pred_a))
    _, macro_b, weighted_b = f1s(truth, pred_b, 3)
    _, macro_a, weighted_a = f1s(truth, pred_a, 3)
    assert macro_a == pytest.approx(f1_score(truth, pred_a, average="macro"))  # the reference is scikit-learn's F1
    naive = {"macro": [], "weighted": [], "f1_0": []}
    for rows in resampled(300):
        fb, mb, wb = f1s(truth[rows], pred_b[rows], 3)
        fa, ma, wa = f1s(truth[rows], pred_a[rows], 3)
        naive["macro"].append(ma - mb)
        naive["weighted"].append(wa - wb)
        naive["f1_0"].append(fa[0] - fb[0])
    agree(headline["macro_f1"], np.array(naive["macro"]), macro_a - macro_b)
    agree(headline["weighted_f1"], np.array(naive["weighted"]), weighted_a - weighted_b)
    agree(per_class["c0"]["f1"], np.array(naive["f1_0"]), f1s(truth, pred_a, 3)[0][0] - f1s(truth, pred_b, 3)[0][0])
    assert pt.count_tests(joint_table(truth, pred_b, pred_a)) == (headline, per_class)  # fixed seed


def test_accuracy_test_is_mcnemar_exact_with_the_bootstrap_interval():
    truth, before, after = two_models(400, 3, seed=2)
    right_b, right_a = before.argmax(1) == truth, after.argmax(1) == truth
    b, c = int(np.sum(right_b & ~right_a)), int(np.sum(~right_b & right_a))
    test = pt.accuracy_test(b, c, 400)
    assert test["method"] == "mcnemar_exact"
    exact = min(1.0, 2 * sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c))
    assert test["p"] == pytest.approx(exact, rel=1e-9)
    d = right_a.astype(float) - right_b
    naive = np.array([d[rows].mean() for rows in resampled(400)])
    assert test["se"] == pytest.approx(np.std(d) / math.sqrt(400), rel=1e-9)
    assert test["ci"][0] == pytest.approx(np.percentile(naive, 2.5), abs=0.15 * test["se"])
    assert test["ci"][1] == pytest.approx(np.percentile(naive, 97.5), abs=0.15 * test["se"])


def ece(scores, correct):
    bins = np.minimum(np.floor(scores * ECE_BINS).astype(int), ECE_BINS - 1)
    return sum(abs(correct[bins == b].sum() - scores[bins == b].sum()) for b in range(ECE_BINS)) / len(scores)


def paired_connection(truth, before, after):
    """A DuckDB connection holding `paired` and `paired_scores` for two models' probabilities."""
    con = duckdb.connect()
    n = len(truth)
    paired = pa.table(
        {
            "row_index": np.arange(n),
            "true_name": [f"c{t}" for t in truth],
            "before": [f"c{t}" for t in before.argmax(1)],
            "after": [f"c{t}" for t in after.argmax(1)],
            "score_before": before.max(1),
            "score_after": after.max(1),
            "right_before": before.argmax(1) == truth,
            "right_after": after.argmax(1) == truth,
        }
    )
    scores = pa.table(
        {
            "row_index": np.arange(n),
            "true_id": truth,
            "before": pa.array(before.tolist(), pa.list_(pa.float64())),
            "after": pa.array(after.tolist(), pa.list_(pa.float64())),
        }
    )
    con.register("paired_rows", paired)
    con.register("score_rows", scores)
    con.execute("CREATE TEMP TABLE paired AS SELECT * FROM paired_rows")
    con.execute("CREATE TEMP TABLE paired_scores AS SELECT * FROM score_rows")
    return con


def test_ece_matches_a_row_by_row_bootstrap():
    from scorekeeper.evaluation.duck import sql

    truth, before, after = two_models(300, 3, seed=3, shift=0.8)
    con = paired_connection(truth, before, after)
    cells = pt.CalibrationCells.from_rows(ECE_BINS, con.execute(sql("paired_calibration.sql"), {"bins": ECE_BINS}).fetchall())
    test = pt.ece_test(cells)
    sb, sa, cb, ca = before.max(1), after.max(1), before.argmax(1) == truth, after.argmax(1) == truth
    naive = np.array([ece(sa[r], ca[r]) - ece(sb[r], cb[r]) for r in resampled(300)])
    agree(test, naive, ece(sa, ca) - ece(sb, cb))


def auc(y, s):
    """The Mann-Whitney statistic from mid-ranks (ties one half)."""
    ranks = rankdata(s)
    m = y.sum()
    return (ranks[y].sum() - m * (m + 1) / 2) / (m * (len(y) - m))


def ap(y, s):
    """Average precision written out: over distinct scores, highest first, (R_n - R_n-1) P_n."""
    thresholds, inverse = np.unique(-s, return_inverse=True)
    pos = np.bincount(inverse, weights=y, minlength=len(thresholds))
    seen = np.bincount(inverse, minlength=len(thresholds))
    return np.sum(pos / y.sum() * np.cumsum(pos) / np.cumsum(seen))


def macro_ap(truth, probs):
    return np.mean([ap(truth == k, probs[:, k]) for k in range(probs.shape[1]) if np.any(truth == k)])


def test_log_loss_roc_auc_and_average_precision_match_a_row_by_row_bootstrap():
    truth, before, after = two_models(300, 3, seed=4)
    tests = score_tests(paired_connection(truth, before, after), 3, LOG_LOSS_EPS)
    d = -np.log(after[np.arange(300), truth]) + np.log(before[np.arange(300), truth])
    naive = np.array([d[r].mean() for r in resampled(300)])
    assert tests["log_loss"]["method"] == "paired_normal"
    assert tests["log_loss"]["se"] == pytest.approx(np.std(d, ddof=1) / math.sqrt(300), rel=1e-9)
    agree(tests["log_loss"], naive, d.mean())

    aucs = [roc_auc_score(truth == k, p[:, k]) for p in (before, after) for k in range(3)]
    assert [auc(truth == k, p[:, k]) for p in (before, after) for k in range(3)] == pytest.approx(aucs, abs=1e-12)
    assert [ap(truth == k, after[:, k]) for k in range(3)] == pytest.approx(
        [average_precision_score(truth == k, after[:, k]) for k in range(3)], abs=1e-12
    )

    def macro_auc(rows, probs):
        return np.mean([auc(truth[rows] == k, probs[rows, k]) for k in range(3)])

    naive = np.array([macro_auc(r, after) - macro_auc(r, before) for r in resampled(300)[:1000]])
    assert tests["roc_auc_macro"]["method"] == "delong"
    assert tests["roc_auc_macro"]["delta"] == pytest.approx(np.mean(aucs[3:]) - np.mean(aucs[:3]), abs=1e-12)
    assert tests["roc_auc_macro"]["se"] == pytest.approx(np.std(naive, ddof=1), rel=0.12)

    naive = np.array([macro_ap(truth[r], after[r]) - macro_ap(truth[r], before[r]) for r in resampled(300)[:1000]])
    test = tests["average_precision_macro"]
    assert test["method"] == "paired_bootstrap"
    assert test["delta"] == pytest.approx(macro_ap(truth, after) - macro_ap(truth, before), abs=1e-12)
    assert test["se"] == pytest.approx(np.std(naive, ddof=1), rel=0.12)
    assert test["ci"][0] == pytest.approx(np.percentile(naive, 2.5), abs=0.3 * test["se"])
    assert test["ci"][1] == pytest.approx(np.percentile(naive, 97.5), abs=0.3 * test["se"])


def delong_direct(truth, before, after, classes):
    """DeLong's structural components pair by pair (psi = 1 if the positive scores higher, 1/2 on
    a tie), and the variance of the mean AUC change with every row's components summed over classes."""
    phi = np.zeros(len(truth))
    deltas = []
    for k in classes:
        pos, neg = np.flatnonzero(truth == k), np.flatnonzero(truth != k)
        change = 0.0
        for probs, sign in ((after, 1), (before, -1)):
            s = probs[:, k]
            psi = (s[pos][:, None] > s[neg][None, :]) + 0.5 * (s[pos][:, None] == s[neg][None, :])
            phi[pos] += sign * psi.mean(1) / len(pos)
            phi[neg] += sign * psi.mean(0) / len(neg)
            change += sign * psi.mean()
        deltas.append(change)
    phi /= len(classes)
    variance = sum(np.sum(truth == t) * np.var(phi[truth == t], ddof=1) for t in np.unique(truth))
    return np.mean(deltas), variance


def test_delong_matches_the_pairwise_computation_and_the_textbook_formula_for_two_classes():
    truth, before, after = two_models(200, 3, seed=5)
    test = score_tests(paired_connection(truth, before, after), 3, LOG_LOSS_EPS)["roc_auc_macro"]
    delta, variance = delong_direct(truth, before, after, range(3))
    assert test["delta"] == pytest.approx(delta, abs=1e-12)
    assert test["se"] ** 2 == pytest.approx(variance, rel=1e-9)
    assert test["p"] == pytest.approx(math.erfc(abs(delta) / math.sqrt(variance) / math.sqrt(2)), rel=1e-9)

    # two classes: both one-vs-rest AUCs are the same AUC, and the test is DeLong's textbook one
    y = (truth == 0).astype(int)
    sb, sa = before[:, 0], after[:, 0]
    two = [np.stack([1 - s, s], 1) for s in (sb, sa)]
    test = score_tests(paired_connection(y, *two), 2, LOG_LOSS_EPS)["roc_auc_macro"]
    pos, neg = y == 1, y == 0
    v10 = [np.array([np.mean((s[i] > s[neg]) + 0.5 * (s[i] == s[neg])) for i in np.flatnonzero(pos)]) for s in (sb, sa)]
    v01 = [np.array([np.mean((s[pos] > s[j]) + 0.5 * (s[pos] == s[j])) for j in np.flatnonzero(neg)]) for s in (sb, sa)]
    s10, s01 = np.cov(v10), np.cov(v01)
    textbook = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / pos.sum() + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / neg.sum()
    assert test["delta"] == pytest.approx(roc_auc_score(y, sa) - roc_auc_score(y, sb), abs=1e-12)
    assert test["se"] ** 2 == pytest.approx(textbook, rel=1e-9)


def test_average_precision_on_a_subset_estimates_the_spread_of_all_rows():
    """Past AP_ROWS rows the bootstrap resamples a fixed subset and rescales: its SE estimates the
    SE of the full-row bootstrap."""
    truth, before, after = two_models(2000, 3, seed=6)
    full = pt.ap_test(0.0, truth, before, after, 2000, resamples=600)
    picked = pt.subset_positions(2000, 500)
    assert len(picked) == 500 and np.all(np.diff(picked) > 0)
    part = pt.ap_test(0.0, truth[picked], before[picked], after[picked], 2000, resamples=600)
    assert part["se"] == pytest.approx(full["se"], rel=0.25)


def test_the_log_loss_test_clips_as_the_run_does():
    assert LOG_LOSS_EPS == evaluation.LOG_LOSS_EPS


def test_paired_normal_and_detectable_change():
    test = pt.paired_normal(400, 0.01, 0.04)
    assert test["se"] == pytest.approx(0.01) and test["ci"] == pytest.approx(
        [0.01 - 1.959963984540054 * 0.01, 0.01 + 1.959963984540054 * 0.01]
    )
    assert test["p"] == pytest.approx(math.erfc(1 / math.sqrt(2)))
    assert pt.detectable_change(0.01) == pytest.approx(0.028016, abs=1e-6)
    assert pt.paired_normal(10, 0.0, 0.0)["p"] == 1.0 and pt.paired_normal(0, None, None)["p"] is None


def test_holm_on_a_hand_example():
    # sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> 0.06 (monotone)
    assert pt.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert pt.holm([0.5, None, 0.6]) == [pytest.approx(1.0), None, pytest.approx(1.0)]
    assert pt.holm([]) == []


def test_bootstrap_p_agrees_with_its_interval():
    """The percentile test's p is below 0.05 exactly when 0 is outside the percentile interval."""
    rng = np.random.default_rng(7)
    for shift in np.linspace(0, 4, 9):
        test = pt.bootstrap_summary(shift, rng.normal(shift, 1.0, size=pt.RESAMPLES))
        outside = test["ci"][0] > 0 or test["ci"][1] < 0
        assert (test["p"] < 0.05) == outside or abs(test["p"] - 0.05) < 0.002
    assert pt.bootstrap_summary(0.0, np.zeros(100))["p"] == 1.0


def _null_pair(n: int, seed: int):
    """Two runs of equally good models (exchangeable): every delta is noise."""
    return two_models(n, len(LABELS), seed, shift=0.0)


def test_holm_keeps_null_slices_from_looking_significant(tmp_path):
    """40 slices of pure noise: some raw p-values fall below 0.05 by chance, none survives Holm;
    the comparison says how many deltas it tested."""
    n = 2400
    truth, before, after = _null_pair(n, seed=11)
    group = [f"g{i % 40:02d}" for i in range(n)]
    base, _ = write_run(tmp_path, "base", before, truth, slices=[group])
    run, manifest = write_run(tmp_path, "cand", after, truth, slices=[group], complete=False)
    c = evaluate_run(run, LABELS, manifest, EvaluationSettings(slice_columns=["group"], baseline=base)).as_dict()["comparison"]
    tests = c["slice_tests"]["group"]
    assert set(tests) == set(c["slice_deltas"]["group"]) and len(tests) == 40
    raw = [t["p"] for t in tests.values()]
    assert sum(p < 0.05 for p in raw) >= 1  # chance alone
    assert all(t["p_holm"] >= 0.05 for t in tests.values())
    assert [t["p_holm"] for t in tests.values()] == pytest.approx(pt.holm(raw))
    for value, t in tests.items():
        assert t["delta"] == pytest.approx(c["slice_deltas"]["group"][value]["accuracy"], abs=1e-12)
        assert t["method"] == "mcnemar_exact" and t["ci"][0] <= t["delta"] <= t["ci"][1]
    assert c["tests_counted"]["slice_tests"] == 40
    assert c["tests_counted"]["per_class_tests"] == 3 * len(LABELS)


def test_every_delta_of_the_comparison_carries_its_test(tmp_path):
    truth, before, after = two_models(600, len(LABELS), seed=12)
    base, _ = write_run(tmp_path, "base", before, truth)
    run, manifest = write_run(tmp_path, "cand", after, truth, complete=False)
    m = evaluate_run(run, LABELS, manifest, EvaluationSettings(baseline=base)).as_dict()
    c = m["comparison"]
    assert list(c["metric_tests"]) == list(c["deltas"])
    methods = {k: t["method"] for k, t in c["metric_tests"].items()}
    assert methods == {
        "accuracy": "mcnemar_exact",
        "macro_f1": "paired_bootstrap",
        "weighted_f1": "paired_bootstrap",
        "log_loss": "paired_normal",
        "ece": "paired_bootstrap",
        "roc_auc_macro": "delong",
        "average_precision_macro": "paired_bootstrap",
    }
    for metric, test in c["metric_tests"].items():
        assert test["delta"] == pytest.approx(c["deltas"][metric], abs=1e-9), metric  # same rows, same truth
        assert test["ci"][0] <= test["delta"] <= test["ci"][1] and 0 <= test["p"] <= 1
    assert c["metric_tests"]["accuracy"]["p"] == c["mcnemar_p"] and c["metric_tests"]["accuracy"]["ci"] == c["accuracy_delta_ci"]
    for name, tests in c["per_class_tests"].items():
        for metric in ("f1", "precision", "recall"):
            assert tests[metric]["delta"] == pytest.approx(c["per_class_deltas"][name][metric], abs=1e-12)
            assert set(tests[metric]) == {"delta", "ci", "p", "p_holm", "method"}


def _lost_class_pair():
    """Same accuracy, one class lost: the other run got every 'fish' right, this run calls them all
    'cat' and gets as many other rows right instead (40 flips each way: McNemar's p is 1)."""
    rng = np.random.default_rng(13)
    n = 800
    truth = np.r_[np.full(40, 3), rng.integers(0, 3, size=n - 40)]
    before = np.full((n, 4), 0.1)
    before[np.arange(n), truth] = 0.7
    wrong = 40 + rng.permutation(n - 40)[:200]
    before[wrong] = 0.1
    before[wrong, (truth[wrong] + 1) % 3] = 0.7
    after = before.copy()
    after[:40] = [0.7, 0.1, 0.1, 0.1]  # fish -> cat: wrong now
    fixed = wrong[:40]
    after[fixed] = 0.1
    after[fixed, truth[fixed]] = 0.7  # wrong before, right now
    return truth, before, after


def test_a_significant_macro_f1_drop_fails_where_mcnemar_sees_nothing(tmp_path):
    truth, before, after = _lost_class_pair()
    base, _ = write_run(tmp_path, "base", before, truth)
    run, manifest = write_run(tmp_path, "cand", after, truth, complete=False)
    m = evaluate_run(run, LABELS, manifest, EvaluationSettings(baseline=base)).as_dict()
    c = m["comparison"]
    assert c["flipped"]["right_to_wrong"] == c["flipped"]["wrong_to_right"] == 40 and c["mcnemar_p"] == 1.0
    assert c["deltas"]["accuracy"] == pytest.approx(0.0, abs=1e-12)
    assert c["per_class_tests"]["fish"]["f1"]["delta"] == pytest.approx(-1.0) and c["per_class_tests"]["fish"]["f1"]["p_holm"] < 0.05
    gates = {"macro_f1_drop": "<=0.01 if significant", "accuracy_drop": "<=0.01 if significant"}
    [gate, accuracy_gate] = [g.model_dump(exclude_unset=True) for g in evaluate_gates(gates, m)]
    assert gate["value"] > 0.2 and gate["method"] == "paired_bootstrap" and gate["p"] < 0.05 and gate["significant"] is True
    assert gate["passed"] is False
    assert gate["ci"] == pytest.approx([-c["metric_tests"]["macro_f1"]["ci"][1], -c["metric_tests"]["macro_f1"]["ci"][0]])
    assert gate["ci"][0] <= gate["value"] <= gate["ci"][1]
    assert gate["detectable_change"] == pytest.approx(2.801585218 * c["metric_tests"]["macro_f1"]["se"])
    assert accuracy_gate["method"] == "mcnemar_exact" and accuracy_gate["p"] == 1.0 and accuracy_gate["passed"] is True


def dumped(gates: dict, metrics: dict) -> list[dict]:
    """The verdicts as metrics.json holds them (fields set only)."""
    return [g.model_dump(exclude_unset=True) for g in evaluate_gates(gates, metrics)]


def test_a_limit_below_the_detectable_change_is_warned_about():
    metrics = {
        "accuracy": 0.9,
        "comparison": {
            "deltas": {"macro_f1": -0.005, "accuracy": 0.0},
            "metric_tests": {
                "macro_f1": {"delta": -0.005, "ci": [-0.02, 0.01], "p": 0.5, "method": "paired_bootstrap", "se": 0.0075},
                "accuracy": {"delta": 0.0, "ci": [-0.01, 0.01], "p": 1.0, "method": "mcnemar_exact", "se": 0.001},
            },
        },
    }
    small, loose, flips = dumped({"macro_f1_drop": "<=0.01 if significant", "accuracy_drop": "<=0.01", "right_to_wrong": "<=5"}, metrics)
    assert small["detectable_change"] == pytest.approx(0.021012, abs=1e-6) and "below the smallest change" in small["warning"]
    assert small["passed"] and small["significant"] is False
    assert "warning" not in loose and loose["detectable_change"] == pytest.approx(0.0028016, abs=1e-7)
    assert flips["method"] == "mcnemar_exact" and "warning" not in flips
    untested = {"comparison": {"deltas": {"macro_f1": -0.05}, "metric_tests": {"macro_f1": pt.untested("paired_bootstrap")}}}
    [gate] = dumped({"macro_f1_drop": "<=0.01 if significant"}, untested)
    assert gate["significant"] is None and gate["passed"] is False  # a drop whose significance is unknown does not pass

"""The paired tests of a comparison: an interval and a p-value for every delta `comparison` reports
(metrics.json `comparison.metric_tests`, `per_class_tests`, `slice_tests`), Holm-adjusted within
the per-class and the per-slice families.

The per-row work is SQL over the comparison's `paired` table (scorekeeper/evaluation/sql/*/paired_*.sql); what comes
back is a joint table, calibration cells, per-class strata and (for average precision) a few
thousand rows at most, so the cost stays bounded at millions of rows. The statistics are
scorekeeper/evaluation/paired_tests.py's pure functions.
"""

from __future__ import annotations

import numpy as np

from scorekeeper.evaluation import paired_tests as pt
from scorekeeper.evaluation.duck import sql
from scorekeeper.metrics.document import FamilyTest, PairedTest, SignificantCounts, TestsCounted
from scorekeeper.metrics.registry import Metric, Pairing

PER_CLASS_METRICS = ("f1", "precision", "recall")  # each its own Holm family
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)  # probabilities clipped as the run's log loss clips them (scikit-learn's eps)


# the test a compared metric gets when nothing here computes it yet (another head kind's metric)
METHODS = {
    Pairing.COUNT: pt.MCNEMAR,
    Pairing.ROW_MEAN: pt.NORMAL,
    Pairing.RANKING: pt.DELONG,
    Pairing.RESAMPLED: pt.BOOTSTRAP,
    Pairing.SAMPLED: pt.BOOTSTRAP,
}


def _paired(test: dict) -> PairedTest:
    return PairedTest(delta=test["delta"], ci=test["ci"], p=test["p"], method=test["method"], se=test["se"])


def _with_holm(tests: dict[tuple, dict]) -> dict[tuple, FamilyTest]:
    """One family's tests as metrics.json carries them: with Holm's adjusted p-value, without se."""
    keys = list(tests)
    adjusted = pt.holm([tests[k]["p"] for k in keys])
    return {
        k: FamilyTest(delta=tests[k]["delta"], ci=tests[k]["ci"], p=tests[k]["p"], p_holm=a, method=tests[k]["method"])
        for k, a in zip(keys, adjusted, strict=True)
    }


def label_positions(labels: list[str], other_labels: list[str] | None) -> list[int] | None:
    """For each of this run's labels its 1-based position among the other run's labels; None when
    the other run's labels are unknown or lack one of ours (its probabilities cannot be compared)."""
    if not other_labels or not set(labels) <= set(other_labels):
        return None
    return [other_labels.index(name) + 1 for name in labels]


def _probability_tests(con, labels: list[str], positions: list[int], eps: float) -> dict:
    con.execute(sql("paired_scores.sql"), {"positions": positions})
    return score_tests(con, len(labels), eps)


def score_tests(con, width: int, eps: float) -> dict:
    """log_loss, roc_auc_macro and average_precision_macro tests over a `paired_scores` table
    (row_index, true_id, before, after: both runs' probabilities in this run's label order)."""
    n, mean, variance = con.execute(sql("paired_log_loss.sql"), {"eps": eps}).fetchall()[0]
    tests = {"log_loss": pt.paired_normal(int(n), mean, variance)}
    con.execute(sql("paired_ranks.sql"))
    ranking: dict[str, dict[int, tuple]] = {}
    for side, label_id, _, _, auc, ap in con.execute(sql("paired_ranking.sql")).fetchall():
        ranking.setdefault(side, {})[int(label_id)] = (auc, ap)
    before, after = ranking.get("before", {}), ranking.get("after", {})
    defined = [k for k in sorted(after) if after[k][0] is not None and before.get(k, (None,))[0] is not None]
    strata = []
    if defined:
        strata = [(int(rows), v) for _, rows, v in con.execute(sql("paired_delong.sql"), {"classes": len(defined)}).fetchall()]
    tests["roc_auc_macro"] = pt.delong_macro([before[k][0] for k in defined], [after[k][0] for k in defined], strata)
    with_ap = [k for k in sorted(after) if after[k][1] is not None and before.get(k, (None, None))[1] is not None]
    ap_delta = float(np.mean([after[k][1] - before[k][1] for k in with_ap])) if with_ap else None
    positions_subset = pt.subset_positions(int(n), pt.ap_rows(width)).tolist()
    rows = con.execute(sql("paired_subset.sql"), {"positions": positions_subset}).fetchall()
    truth = np.array([r[0] for r in rows], dtype=np.int64)
    before_probs = np.array([r[1] for r in rows], dtype=np.float64).reshape(len(rows), width)
    after_probs = np.array([r[2] for r in rows], dtype=np.float64).reshape(len(rows), width)
    tests["average_precision_macro"] = pt.ap_test(ap_delta, truth, before_probs, after_probs, int(n))
    return tests


def comparison_tests(
    con,
    labels: list[str],
    other_labels: list[str] | None,
    flipped: tuple[int, int, int],
    slices: dict[str, dict],
    ece_bins: int,
    compared: list[Metric],
) -> dict:
    """`metric_tests`, `per_class_tests`, `slice_tests` and `tests_counted` (Comparison's fields), on a
    connection holding the comparison's `paired` table. `flipped`: (rows, right_to_wrong,
    wrong_to_right); `slices`: {column: {value: (rows, right_to_wrong, wrong_to_right)}} as the
    comparison keys them; `ece_bins`: the bins of the run's ECE; `compared`: the metrics of
    `comparison.deltas`, each of which gets a test (untested where none is computed)."""
    rows, right_to_wrong, wrong_to_right = flipped
    table = pt.JointTable.from_rows(con.execute(sql("paired_joint.sql")).fetchall())
    headline, per_class = pt.count_tests(table)
    cells = pt.CalibrationCells.from_rows(ece_bins, con.execute(sql("paired_calibration.sql"), {"bins": ece_bins}).fetchall())
    metric_tests = {"accuracy": pt.accuracy_test(right_to_wrong, wrong_to_right, rows)} | headline | {"ece": pt.ece_test(cells)}
    positions = label_positions(labels, other_labels) if rows else None
    if positions is not None:
        metric_tests |= _probability_tests(con, labels, positions, LOG_LOSS_EPS)
    else:
        metric_tests |= {"log_loss": pt.untested(pt.NORMAL), "roc_auc_macro": pt.untested(pt.DELONG)}
        metric_tests["average_precision_macro"] = pt.untested(pt.BOOTSTRAP)

    per_class_tests: dict[str, dict[str, FamilyTest]] = {name: {} for name in per_class}
    for metric in PER_CLASS_METRICS:
        for (name,), test in _with_holm({(name,): tests[metric] for name, tests in per_class.items()}).items():
            per_class_tests[name][metric] = test
    slice_family = {(column, value): pt.accuracy_test(b, c, n) for column, groups in slices.items() for value, (n, b, c) in groups.items()}
    slice_tests: dict[str, dict[str, FamilyTest]] = {column: {} for column in slices}
    for (column, value), test in _with_holm(slice_family).items():
        slice_tests[column][value] = test
    untested = {m.name: pt.untested(METHODS[m.compared]) for m in compared if m.compared is not None}
    return {
        "metric_tests": {m.name: _paired(metric_tests.get(m.name) or untested[m.name]) for m in compared},
        "per_class_tests": per_class_tests,
        "slice_tests": slice_tests,
        "tests_counted": _counted([metric_tests[m.name] for m in compared if m.name in metric_tests], per_class_tests, slice_tests),
    }


def _counted(metric_tests: list[dict], per_class_tests: dict, slice_tests: dict) -> TestsCounted:
    """How many deltas carry a p-value, and how many are significant (the families after Holm)."""
    families = {
        "metric_tests": (metric_tests, False),
        "per_class_tests": ([t.model_dump() for c in per_class_tests.values() for t in c.values()], True),
        "slice_tests": ([t.model_dump() for g in slice_tests.values() for t in g.values()], True),
    }
    counted = {name: sum(t["p"] is not None for t in tests) for name, (tests, _) in families.items()}
    significant = {name: sum(pt.significant(t, holm) for t in tests) for name, (tests, holm) in families.items()}
    return TestsCounted(
        metric_tests=counted["metric_tests"],
        per_class_tests=counted["per_class_tests"],
        slice_tests=counted["slice_tests"],
        significant=SignificantCounts.model_validate(significant),
    )

"""The report's words for the paired tests and the label audit: p-values, significance marks, the
tests' sentence, the gate's test, the audit's matrix, and the counts report.html and the Prefect
summary show. Pure functions on the typed document's parts
(scorekeeper/metrics/document.py).

A delta is marked significant (SIGNIFICANT_MARK) when its p-value is below 0.05: the headline
metrics' own p, and for the per-class and per-slice families Holm's adjusted p only, so what is
marked survives the correction for the number of deltas tested (paired_tests.significant).
"""

from __future__ import annotations

from scorekeeper.evaluation.statistics.paired_tests import significant_p
from scorekeeper.metrics.document import Comparison, FamilyTest, GateResult, LabelAudit, PairedTest
from scorekeeper.report.render import fmt

SIGNIFICANT_MARK = "✱"


def pvalue(p) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def mark(test: PairedTest | FamilyTest | None, holm: bool = False) -> str:
    """The significance mark of a test: by its p-value, or a family member's by Holm's adjusted one (`holm`)."""
    if test is None:
        return ""
    p = (test.p_holm if isinstance(test, FamilyTest) else None) if holm else test.p
    return SIGNIFICANT_MARK if significant_p(p) else ""


def tests_sentence(comparison: Comparison) -> str:
    n = comparison.tests_counted
    tested = [n.metric_tests, n.per_class_tests, n.slice_tests] if n else [0, 0, 0]
    hits = [n.significant.metric_tests, n.significant.per_class_tests, n.significant.slice_tests] if n else [0, 0, 0]
    return (
        f"{sum(tested)} deltas tested: {tested[0]} headline metrics, {tested[1]} per-class (Holm-adjusted within F1, "
        f"within precision and within recall), {tested[2]} per-slice accuracies (Holm-adjusted together). "
        f"{SIGNIFICANT_MARK} = significant at the 5% level (per class and per slice: after the correction): "
        f"{hits[0]} headline, {hits[1]} per-class, {hits[2]} per-slice."
    )


def gate_test_text(gate: GateResult) -> str:
    """A comparison gate's test for the gate line: p, method, the detectable change."""
    if not gate.method:
        return ""
    return f"p {pvalue(gate.p)} ({gate.method}), detectable change {fmt(gate.detectable_change)}"


CLASS_TESTS = ("f1", "precision", "recall")  # a class's family members in `per_class_tests`, in the tables' order


def class_mark(tests: dict[str, FamilyTest]) -> str:
    """A class's mark: any of its F1, precision and recall changes significant after Holm's correction."""
    return next((m for m in (mark(tests[k], True) for k in CLASS_TESTS) if m), "")


def audit_matrix(audit: LabelAudit) -> tuple[list[str], list[list[int]]]:
    """The suspected rows as a (given x suggested) matrix over the labels that occur in it."""
    names = sorted({g for g in audit.by_pair} | {s for row in audit.by_pair.values() for s in row})
    return names, [[audit.by_pair.get(g, {}).get(s, 0) for s in names] for g in names]

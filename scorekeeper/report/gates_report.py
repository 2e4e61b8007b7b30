"""The report's quality gates: one view (`GatesView`, built by `gates_view` from the typed document)
rendered by templates/gates.md.j2 and templates/gates.html.j2 (scorekeeper/report/view.py); report.html's
banner reads the same view."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report.report_stats import gate_test_text
from scorekeeper.report.view import Num, at


@dataclass(frozen=True)
class GateRow:
    """One gate's verdict; a comparison gate adds its metric's test."""

    gate: str
    value: Num
    limit: Num
    passed: bool
    method: str | None
    ci: Num
    p: Num
    detectable_change: Num
    test: str  # the test in words (report.md)
    warning: str | None


@dataclass(frozen=True)
class GatesView:
    """The gates' table, those that failed, and whether any gate carries a test."""

    rows: tuple[GateRow, ...]
    failed: tuple[GateRow, ...]
    tests: bool


def gates_view(document: MetricsDocument) -> GatesView | None:
    """The gates' view (None: a run without gates)."""
    if not document.gates:
        return None
    rows = tuple(
        GateRow(
            gate=g.gate,
            value=at(document, "gates", i, "value"),
            limit=at(document, "gates", i, "limit"),
            passed=g.passed,
            method=g.method,
            ci=at(document, "gates", i, "ci"),
            p=at(document, "gates", i, "p"),
            detectable_change=at(document, "gates", i, "detectable_change"),
            test=gate_test_text(g),
            warning=g.warning,
        )
        for i, g in enumerate(document.gates)
    )
    return GatesView(rows, tuple(g for g in rows if not g.passed), any(g.method for g in rows))

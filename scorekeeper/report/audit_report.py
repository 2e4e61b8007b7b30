"""The report's label audit (confident learning): one view (`AuditView`, built by `audit_view` from
the typed document) rendered by templates/label_audit.md.j2 and templates/label_audit.html.j2
(scorekeeper/report/view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report.report_stats import audit_matrix
from scorekeeper.report.view import Num, at


@dataclass(frozen=True)
class AuditPairs:
    """A given label's row of the (given x suggested) matrix: a count per suggested label, None for 0."""

    given: str
    counts: tuple[Num | None, ...]


@dataclass(frozen=True)
class AuditRowView:
    row_index: int
    id: object
    text: str | None
    given: str
    suggested: str
    margin: Num


@dataclass(frozen=True)
class AuditView:
    """The label audit section (templates/label_audit.md.j2, label_audit.html.j2)."""

    suspected: Num
    evaluated: Num
    share: float | None  # suspected / evaluated (None: nothing evaluated)
    accuracy_excluding_suspected: Num
    accuracy: float | None
    names: tuple[str, ...]  # the labels of the matrix (given and suggested)
    pairs: tuple[AuditPairs, ...]
    thresholds: tuple[tuple[str, Num], ...]
    rows: tuple[AuditRowView, ...]


def audit_view(document: MetricsDocument) -> AuditView | None:
    """The label audit's view (None: a run without one)."""
    audit = document.label_audit
    if not audit:
        return None
    names, counts = audit_matrix(audit) if audit.by_pair else ([], [])
    pairs = tuple(
        AuditPairs(g, tuple(at(document, "label_audit", "by_pair", g, s) if counts[i][j] else None for j, s in enumerate(names)))
        for i, g in enumerate(names)
    )
    return AuditView(
        suspected=at(document, "label_audit", "suspected"),
        evaluated=at(document, "evaluated"),
        share=audit.suspected / document.evaluated if document.evaluated else None,
        accuracy_excluding_suspected=at(document, "label_audit", "accuracy_excluding_suspected"),
        accuracy=document.accuracy,
        names=tuple(names),
        pairs=pairs,
        thresholds=tuple((label, at(document, "label_audit", "thresholds", label, digits=3)) for label in audit.thresholds),
        rows=tuple(
            AuditRowView(r.row_index, r.id, r.text, r.given, r.suggested, at(document, "label_audit", "rows", i, "margin", digits=3))
            for i, r in enumerate(audit.rows)
        ),
    )

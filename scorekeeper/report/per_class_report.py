"""A single-label run's per-class table and confusion matrix (`PerClassView`), and the ground-truth
values the model cannot predict (`UnknownLabelsView`: a section of report.md, a banner of
report.html). Rendered by templates/per_class.*.j2 and unknown_labels.*.j2 (scorekeeper/report/view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import ClassAreas, MetricsDocument
from scorekeeper.report import plots
from scorekeeper.report.view import Num, at

CLASS_FIELDS = ("precision", "recall", "f1", "support")  # the per-class table's columns after the label


@dataclass(frozen=True)
class UnknownLabelsView:
    """Ground-truth values that are no label of the model, with their rows."""

    values: tuple[tuple[str, Num], ...]


@dataclass(frozen=True)
class ClassRow:
    label: str
    scores: tuple[Num, ...]  # CLASS_FIELDS' order
    roc_auc: Num | None  # None: the class has no area
    average_precision: Num | None


@dataclass(frozen=True)
class PerClassView:
    """The per-class table and the confusion matrix (names and counts: report.md; the plot: report.html)."""

    rows: tuple[ClassRow, ...]
    roc_auc: bool  # the run has per-class areas
    average_precision: bool
    names: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    grouped: int  # the labels summed into "other"
    svg: str | None


def unknown_labels_view(document: MetricsDocument) -> UnknownLabelsView | None:
    if not document.unknown_labels:
        return None
    return UnknownLabelsView(tuple((value, at(document, "unknown_labels", value)) for value in document.unknown_labels))


def _areas(document: MetricsDocument, area: str) -> dict:
    values = getattr(document, area)
    return values.per_class if isinstance(values, ClassAreas) else {}


def per_class_view(document: MetricsDocument) -> PerClassView | None:
    """The per-class section's view (None: a run without per-class scores)."""
    if not document.per_class:
        return None
    auc, ap = _areas(document, "roc_auc"), _areas(document, "average_precision")
    rows = tuple(
        ClassRow(
            label,
            tuple(at(document, "per_class", label, k) for k in CLASS_FIELDS),
            Num(auc.get(label), ("roc_auc", "per_class", label)) if label in auc else None,
            Num(ap.get(label), ("average_precision", "per_class", label)) if label in ap else None,
        )
        for label in document.per_class
    )
    names, counts, grouped = plots.confusion_cells(document)
    return PerClassView(
        rows, bool(auc), bool(ap), tuple(names), tuple(tuple(row) for row in counts), grouped, plots.confusion_svg(document) or None
    )

"""A multi-label run's own report sections (its kind's spec names them: evaluation/base.KindReport):
the table per label with the tuning's halves and the labels per row (`PerLabelView`), and the most
confident wrong labels (`WrongLabelsView`; report.md shows them under the table, report.html in a
section of their own). Rendered by templates/per_label.md.j2, per_label.html.j2 and
wrong_labels.html.j2 (scorekeeper/report/view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.registry import number_at
from scorekeeper.report.view import Num, at

PER_LABEL_HEADER: tuple[str, ...] = ("label", "precision", "recall", "f1", "support", "prevalence", "threshold", "tuned threshold")
PER_LABEL_HEADER += ("tuned F1 (tuning half)", "tuned F1 (held out)", "F1 at threshold (held out)", "ROC-AUC", "avg precision")
# The per-label table's columns after the label: a field of LabelScores each, then the label's areas.
PER_LABEL_FIELDS: tuple[str, ...] = ("precision", "recall", "f1", "support", "prevalence", "threshold", "tuned_threshold")
PER_LABEL_FIELDS += ("tuned_f1_in_sample", "tuned_f1_heldout", "heldout_f1_at_threshold")
PER_LABEL_AREAS = ("roc_auc", "average_precision")


@dataclass(frozen=True)
class WrongLabel:
    row_index: int
    id: object
    label: str
    truth: bool
    probability: Num


@dataclass(frozen=True)
class WrongLabelsView:
    """The labels predicted but not true with the highest probability, and true but not predicted with the lowest."""

    rows: tuple[WrongLabel, ...]


@dataclass(frozen=True)
class Tuning:
    split: str
    tuning_rows: Num
    heldout_rows: Num


@dataclass(frozen=True)
class Cardinality:
    truth: Num
    predicted: Num
    rows_without_prediction: Num


@dataclass(frozen=True)
class LabelRow:
    label: str
    cells: tuple[Num, ...]  # PER_LABEL_HEADER's order after the label


@dataclass(frozen=True)
class PerLabelView:
    """The per-label section (templates/per_label.md.j2, per_label.html.j2)."""

    tuning: Tuning | None
    header: tuple[str, ...]
    rows: tuple[LabelRow, ...]
    cardinality: Cardinality | None
    wrong: WrongLabelsView | None


def wrong_labels_view(document: MetricsDocument) -> WrongLabelsView | None:
    """The most confident wrong labels (None: none)."""
    wrong = document.confident_wrong_labels
    if not wrong:
        return None
    return WrongLabelsView(
        tuple(
            WrongLabel(e.row_index, e.id, e.label, e.truth, at(document, "confident_wrong_labels", i, "probability", digits=3))
            for i, e in enumerate(wrong)
        )
    )


def per_label_view(document: MetricsDocument) -> PerLabelView | None:
    """The per-label section's view (None: a run with no per-label scores)."""
    if not document.per_label:
        return None
    tuning = document.threshold_tuning
    card = document.label_cardinality
    rows = tuple(
        LabelRow(
            label,
            tuple(at(document, "per_label", label, k) for k in PER_LABEL_FIELDS)
            + tuple(Num(number_at(document, (area, "per_label", label)), (area, "per_label", label)) for area in PER_LABEL_AREAS),
        )
        for label in document.per_label
    )
    return PerLabelView(
        tuning=Tuning(tuning.split, at(document, "threshold_tuning", "tuning_rows"), at(document, "threshold_tuning", "heldout_rows"))
        if tuning
        else None,
        header=PER_LABEL_HEADER,
        rows=rows,
        cardinality=Cardinality(
            at(document, "label_cardinality", "truth", digits=3),
            at(document, "label_cardinality", "predicted", digits=3),
            at(document, "label_cardinality", "rows_without_prediction"),
        )
        if card
        else None,
        wrong=wrong_labels_view(document),
    )

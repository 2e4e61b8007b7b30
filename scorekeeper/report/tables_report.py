"""The report's remaining tables, each a view rendered by its templates (scorekeeper/report/view.py):
the confidence thresholds (`ThresholdsView`), the most confident errors (`ErrorsView`), the history
of runs under the same output (`HistoryView`), the scoring groups of a fanned-out run (`GroupsView`,
also in report.md) and the run's facts (`FactsView`). Only the groups have a report.md template; the
others are report.html's."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.registry import history_columns, value_at
from scorekeeper.report import plots
from scorekeeper.report.render import GROUP_HEADER, group_rows
from scorekeeper.report.view import Num, at, render_markdown_section
from scorekeeper.scoring_summary import ScoringSummary

THRESHOLD_FIELDS = ("rows", "coverage", "accuracy", "macro_precision", "macro_recall", "macro_f1")  # the table's numbers


@dataclass(frozen=True)
class ThresholdRow:
    threshold: object
    numbers: tuple[Num, ...]  # THRESHOLD_FIELDS' order


@dataclass(frozen=True)
class ThresholdsView:
    svg: str | None  # the coverage plot
    rows: tuple[ThresholdRow, ...]


@dataclass(frozen=True)
class ErrorRow:
    row_index: int
    id: object
    text: object
    truth: object
    predicted: object
    score: Num


@dataclass(frozen=True)
class ErrorsView:
    rows: tuple[ErrorRow, ...]


@dataclass(frozen=True)
class HistoryRow:
    run_id: object
    finished_at: object
    rows: object
    values: tuple[object, ...]  # the columns' order
    model: str  # the fingerprints' first 12 characters
    input: str


@dataclass(frozen=True)
class HistoryView:
    svg: str
    columns: tuple[str, ...]  # the history metrics' labels
    rows: tuple[HistoryRow, ...]  # newest first


@dataclass(frozen=True)
class GroupsView:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class FactsView:
    facts: tuple[tuple[str, str], ...]  # (name, text), report/report.run_facts


def thresholds_view(document: MetricsDocument) -> ThresholdsView | None:
    if not document.thresholds:
        return None
    rows = tuple(
        ThresholdRow(t.threshold, tuple(at(document, "thresholds", i, k) for k in THRESHOLD_FIELDS))
        for i, t in enumerate(document.thresholds)
    )
    return ThresholdsView(plots.coverage_svg(document) or None, rows)


def errors_view(document: MetricsDocument) -> ErrorsView | None:
    if not document.confident_errors:
        return None
    return ErrorsView(
        tuple(
            ErrorRow(e.row_index, e.id, e.text, e.truth, e.predicted, at(document, "confident_errors", i, "score", digits=3))
            for i, e in enumerate(document.confident_errors)
        )
    )


def history_view(document: MetricsDocument) -> HistoryView | None:
    svg = plots.history_svg(document)
    if not svg:
        return None
    history = document.history or []
    columns = history_columns(document.head, history)
    rows = tuple(
        HistoryRow(
            h.run_id,
            h.finished_at,
            h.rows,
            tuple(value_at(h, (c.name,)) for c in columns),
            (h.model_fingerprint or "")[:12],
            (h.input_fingerprint or "")[:12],
        )
        for h in reversed(history)
    )
    return HistoryView(svg, tuple(c.label for c in columns), rows)


def groups_view(scoring: ScoringSummary | None) -> GroupsView | None:
    """A fanned-out run's groups: which machine scored which ranges, how fast (None: one machine)."""
    rows = group_rows(scoring)
    return GroupsView(GROUP_HEADER, tuple(rows)) if rows else None


def groups_markdown(scoring: ScoringSummary | None) -> list[str]:
    """The fan-out table of report.md (report.html shows the same view in its `groups` section)."""
    return render_markdown_section("groups", groups_view(scoring))

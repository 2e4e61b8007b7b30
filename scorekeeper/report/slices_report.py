"""The report's slice tables: one view (`SlicesView`, built by `slices_view` from the typed document
and the kind's slice metrics, evaluation/base.KindReport) rendered by templates/slices.md.j2 and
templates/slices.html.j2 (scorekeeper/report/view.py). Groups worst first (render.sorted_slices),
each with its interval bar (plots.interval_svg) in report.html."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.evaluation.kinds import evaluation_for
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report import plots
from scorekeeper.report.render import slice_note, slice_scale, sorted_slices
from scorekeeper.report.view import Num, at


@dataclass(frozen=True)
class SliceCell:
    """A slice metric of one group: its value, the value as a float (report.md), its interval."""

    value: Num
    shown: float | None
    interval: Num


@dataclass(frozen=True)
class SliceGroupRow:
    value: str
    rows: Num
    cells: tuple[SliceCell, ...]  # the kind's slice metrics' order
    bar: str  # the first metric's interval bar (SVG, report.html)


@dataclass(frozen=True)
class SliceTable:
    column: str
    scale: float  # the bars' upper end
    groups: tuple[SliceGroupRow, ...]  # worst first


@dataclass(frozen=True)
class SlicesView:
    """The slice tables (templates/slices.md.j2, slices.html.j2)."""

    note: str  # report.html's sentence above the tables
    keys: tuple[str, ...]  # the slice metrics' names
    lower_is_better: bool  # the first metric's direction (the order)
    intervals: bool  # any group has an interval
    tables: tuple[SliceTable, ...]


def slices_view(document: MetricsDocument) -> SlicesView | None:
    """The slice tables' view (None: a run without slices)."""
    if not document.slices:
        return None
    kind = evaluation_for(document.head).report
    shown = kind.slice_metrics
    first = shown[0]
    overall = first.overall(document)
    tables = []
    for column, values in document.slices.items():
        groups = sorted_slices(values, first)
        scale = slice_scale(first, groups, overall)
        rows = tuple(
            SliceGroupRow(
                value,
                at(document, "slices", column, value, "rows"),
                tuple(
                    SliceCell(
                        at(document, "slices", column, value, s.key),
                        s.of(group),
                        at(document, "slices", column, value, s.interval, digits=3),
                    )
                    for s in shown
                ),
                plots.interval_svg(first.of(group), first.interval_of(group), overall, scale=scale),
            )
            for value, group in groups
        )
        tables.append(SliceTable(column, scale, rows))
    intervals = any(s.interval_of(g) for values in document.slices.values() for g in values.values() for s in shown)
    return SlicesView(
        note=slice_note(document, shown, kind.slice_caption, intervals),
        keys=tuple(s.key for s in shown),
        lower_is_better=first.lower_is_better,
        intervals=intervals,
        tables=tuple(tables),
    )

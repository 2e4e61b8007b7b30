"""A regression run's own report section (its kind's spec names it: evaluation/base.KindReport):
the metrics per output (the kind's table_metrics), each output's plots, calibration by decile and
largest errors. One view (`PerOutputView`) rendered by templates/per_output.md.j2 and
per_output.html.j2 (scorekeeper/report/view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.evaluation.kinds import evaluation_for
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report import plots
from scorekeeper.report.view import Num, at

REGRESSION_PLOTS = (plots.predicted_vs_true_svg, plots.residual_histogram_svg, plots.deciles_svg)  # each output's, in this order
SUMMARY = ("max_error", "median_absolute_error", "mape_rows", "mean_truth", "mean_prediction")  # one output's line in report.html


@dataclass(frozen=True)
class DecileRow:
    decile: int
    rows: Num
    mean_prediction: Num
    mean_truth: Num


@dataclass(frozen=True)
class ErrorRow:
    row_index: int
    id: object
    truth: Num
    prediction: Num
    error: Num
    text: str


@dataclass(frozen=True)
class OutputPart:
    """One output: its plots (report.html), its summary line's numbers (SUMMARY's order), deciles, largest errors."""

    name: str
    plots: tuple[str, ...]
    summary: tuple[Num, ...]
    deciles: tuple[DecileRow, ...]
    errors: tuple[ErrorRow, ...]


@dataclass(frozen=True)
class PerOutputView:
    """The regression section (templates/per_output.md.j2, per_output.html.j2)."""

    names: tuple[str, ...]  # the outputs of the metrics table
    table: tuple[tuple[str, tuple[Num, ...]], ...]  # per table metric, its value per output
    outputs: tuple[OutputPart, ...]


def per_output_view(document: MetricsDocument) -> PerOutputView | None:
    """The regression section's view (None: a run with no regression outputs)."""
    per_output = document.per_output or {}
    outputs = document.outputs or []
    if not per_output and not outputs:
        return None
    metrics = evaluation_for(document.head).report.table_metrics
    table = tuple((k, tuple(at(document, "per_output", o, k) for o in per_output)) for k in metrics)
    parts = []
    for output in outputs if outputs else per_output:
        deciles = (document.calibration_deciles or {}).get(output) or []
        errors = (document.largest_errors or {}).get(output) or []
        parts.append(
            OutputPart(
                name=output,
                plots=tuple(svg for draw in REGRESSION_PLOTS if (svg := draw(document, output))),
                summary=tuple(at(document, "per_output", output, k) for k in SUMMARY),
                deciles=tuple(_decile(document, output, i, d.decile) for i, d in enumerate(deciles)),
                errors=tuple(_error(document, output, i, e.row_index, e.id, e.text) for i, e in enumerate(errors)),
            )
        )
    return PerOutputView(tuple(per_output), table, tuple(parts))


def _decile(document: MetricsDocument, output: str, i: int, decile: int) -> DecileRow:
    rows, mean_prediction, mean_truth = (
        at(document, "calibration_deciles", output, i, k) for k in ("rows", "mean_prediction", "mean_truth")
    )
    return DecileRow(decile, rows, mean_prediction, mean_truth)


def _error(document: MetricsDocument, output: str, i: int, row_index: int, id_: object, text: str | None) -> ErrorRow:
    truth, prediction, error = (at(document, "largest_errors", output, i, k) for k in ("truth", "prediction", "error"))
    return ErrorRow(row_index, id_, truth, prediction, error, text or "")

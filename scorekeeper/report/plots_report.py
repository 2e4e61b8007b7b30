"""report.html's plot sections, each a view rendered by its template (scorekeeper/report/view.py):
the ROC and precision-recall curves (`CurvesView`), calibration and scores (`CalibrationView`) and
a multi-label run's calibration per label (`LabelCalibrationView`). The plots are plots.py's."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.report import plots
from scorekeeper.report.view import Num, at


@dataclass(frozen=True)
class CurvesView:
    svgs: tuple[str, ...]  # ROC, then precision-recall
    per_label: bool  # a multi-label run's curves (one per label), else one-vs-rest per class
    curves: int  # the curves in metrics.json
    max_curves: int  # the most drawn


@dataclass(frozen=True)
class CalibrationView:
    svgs: tuple[str, ...]  # reliability, then the scores' histogram
    ece: Num | None
    bins: int | None


@dataclass(frozen=True)
class LabelCalibrationView:
    svg: str
    bins: int | None
    macro: Num | None  # ECE averaged over labels (None: not measured)
    micro: Num


def curves_view(document: MetricsDocument) -> CurvesView | None:
    svgs = tuple(svg for svg in (plots.curve_svg(document, "roc"), plots.curve_svg(document, "pr")) if svg)
    if not svgs:
        return None
    curves = len(document.curves.roc) if document.curves is not None else 0
    return CurvesView(svgs, bool(document.per_label), curves, plots.MAX_CURVES)


def calibration_view(document: MetricsDocument) -> CalibrationView | None:
    svgs = tuple(svg for svg in (plots.reliability_svg(document), plots.score_histogram_svg(document)) if svg)
    if not svgs:
        return None
    return CalibrationView(svgs, at(document, "ece") if document.ece is not None else None, document.ece_bins)


def label_calibration_view(document: MetricsDocument) -> LabelCalibrationView | None:
    svg = plots.label_calibration_svg(document)
    if not svg:
        return None
    ece = document.ece
    macro = at(document, "ece", "macro") if ece and getattr(ece, "macro", None) is not None else None
    return LabelCalibrationView(svg, document.ece_bins, macro, at(document, "ece", "micro"))

"""The report's drift part (docs/drift.md): the alarm in one sentence (which signals, by how much,
against which reference), the signals worst PSI first, the worst three signals' bins drawn as
reference-vs-current bars, and the estimated performance (beside the truth on a labelled run); the bars are drift_plot.py's.

One view (`DriftView`, built by `drift_view` from the typed document) rendered by
templates/drift.md.j2 (report.md and the Prefect summary artifact) and templates/drift.html.j2; a
run without `drift` has no view, so its report is as before. Text from data (signal names carry
slice column names, bins their values) is escaped by each template's rule (scorekeeper/report/view.py),
SVG by plots.Canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import Drift, DriftSignal, MetricsDocument, RepresentationSignal
from scorekeeper.metrics.registry import metric_value, run_metrics, value_at
from scorekeeper.report.drift_plot import drift_svg
from scorekeeper.report.view import Num, at, render_markdown_section

SHOWN_SIGNALS = 3  # the worst signals drawn as bars (drift_plot.py)


def alarm_sentence(drift: Drift) -> str:
    """The alarm (or its absence) in one sentence, plain text: the caller escapes it."""
    against = f"against run {drift.reference} ({drift.rows.reference} rows; this run {drift.rows.current})"
    signals = list(drift.signals.items())
    if signals and all(s.drifted is None for _, s in signals):
        reason = signals[0][1].reason or "too few rows"
        return f"Drift not judged {against}: {reason}."
    if drift.alarm:
        moved = ", ".join(f"{name} ({_size(drift.signals[name])})" for name in drift.drifted)
        return f"Drift alarm: {len(drift.drifted)} of {len(signals)} signals moved {against}: {moved}."
    if not signals:
        return f"No drift signal could be measured {against}."
    binned = list(drift.binned().items())
    largest = f"largest PSI {binned[0][1].psi:.3g}, {binned[0][0]}" if binned else "no PSI signal"
    rep = drift.representation()
    if rep is not None:
        largest += f"; representation AUC {rep.auc:.3g}"
    return f"No drift {against}: no signal moved by PSI >= {drift.min_psi:g} beyond noise ({largest})."


def _size(signal: DriftSignal | RepresentationSignal) -> str:
    return f"PSI {signal.psi:.3g}" if isinstance(signal, DriftSignal) else f"AUC {signal.auc:.3g}"


@dataclass(frozen=True)
class EstimateRow:
    metric: str  # the estimated metric's name in metrics.json `estimated`
    estimate: float | None
    ci: list[float] | None
    truth: float | None  # this run's own value, on a labelled run
    interval: list[str] | None = None  # the interval's path in metrics.json


def estimate_rows(document: MetricsDocument) -> list[EstimateRow]:
    """The estimates the run has, each beside this run's measured value (None without labels)."""
    if document.estimated is None:
        return []
    rows = []
    for metric in run_metrics(document.head):
        if not metric.monitoring or metric.path[0] != "estimated" or (value := metric.value(document)) is None:
            continue
        name = str(metric.path[1])  # estimated.accuracy beside the run's own accuracy
        ci = value_at(document, metric.interval) if metric.interval else None
        interval = [str(part) for part in metric.interval] if metric.interval else None
        rows.append(EstimateRow(name, value, ci, metric_value(document, name) if document.evaluated else None, interval))
    return rows


@dataclass(frozen=True)
class SignalRow:
    """A binned signal: its kind, bins, PSI, p-values, KS and verdict."""

    name: str
    kind: str
    bins: int
    psi: Num
    p: Num
    p_holm: Num
    ks: Num
    drifted: bool | None


@dataclass(frozen=True)
class ExampleRow:
    """A text most unlike the reference (the representation classifier's highest scores)."""

    row_index: int
    id: object
    score: Num
    text: str


@dataclass(frozen=True)
class RepresentationView:
    """SPEC 14's signal: the classifier's rows, AUC with its interval, p-values, verdict, examples."""

    reference_fit: Num
    current_fit: Num
    reference_test: Num
    current_test: Num
    auc: Num
    auc_ci: Num
    p: Num
    p_holm: Num
    drifted: bool | None
    reason: str | None
    examples: tuple[ExampleRow, ...]


@dataclass(frozen=True)
class TokenRow:
    """A token whose share moved, in both runs."""

    token: str | None
    reference_count: int
    reference_share: float
    current_count: int
    current_share: float
    log_ratio: Num


@dataclass(frozen=True)
class EstimateLine:
    """An estimated metric beside this run's measured one (None without labels)."""

    metric: str
    estimate: Num
    ci: Num | None
    truth: Num | None


@dataclass(frozen=True)
class EstimateView:
    """The estimated performance from the reference's calibration."""

    caveat: str | None
    reference: str
    rows: Num
    assumptions: str
    unavailable: str | None
    lines: tuple[EstimateLine, ...]


@dataclass(frozen=True)
class DriftView:
    """The drift part (templates/drift.md.j2, drift.html.j2): the alarm, the representation signal,
    the moved tokens, the binned signals worst PSI first, what was skipped, the plot and the estimate."""

    sentence: str
    alarm: bool | None  # report.html's banner: failed, passed, or not judged
    reference: str
    rows_reference: Num
    rows_current: Num
    min_psi: Num
    min_auc: Num
    representation: RepresentationView | None
    moved_tokens: tuple[TokenRow, ...]
    signals: tuple[SignalRow, ...]
    skipped: tuple[tuple[str, str], ...]
    svg: str | None  # drift_plot.py's bars (report.html)
    estimate: EstimateView | None


def drift_view(document: MetricsDocument) -> DriftView | None:
    """The drift part's view; None for a run without drift."""
    drift = document.drift
    if drift is None:
        return None

    def signal(name: str, s: DriftSignal) -> SignalRow:
        base = ("drift", "signals", name)
        psi, p, p_holm, ks = (at(document, *base, k) for k in ("psi", "p", "p_holm", "ks"))
        return SignalRow(name, s.kind, len(s.bins), psi, p, p_holm, ks, s.drifted)

    signals = tuple(signal(name, s) for name, s in drift.binned().items())
    tokens = tuple(
        TokenRow(
            t.token,
            t.reference_count,
            t.reference_share,
            t.current_count,
            t.current_share,
            at(document, "drift", "moved_tokens", i, "log_ratio"),
        )
        for i, t in enumerate(drift.moved_tokens or [])
    )
    return DriftView(
        sentence=alarm_sentence(drift),
        alarm=drift.alarm,
        reference=drift.reference,
        rows_reference=at(document, "drift", "rows", "reference"),
        rows_current=at(document, "drift", "rows", "current"),
        min_psi=at(document, "drift", "min_psi"),
        min_auc=at(document, "drift", "min_auc"),
        representation=_representation_view(document, drift),
        moved_tokens=tokens,
        signals=signals,
        skipped=tuple(drift.skipped.items()),
        svg=drift_svg(document),
        estimate=_estimate_view(document),
    )


def _representation_view(document: MetricsDocument, drift: Drift) -> RepresentationView | None:
    name = next((n for n, s in drift.signals.items() if isinstance(s, RepresentationSignal)), None)
    rep = drift.representation()
    if name is None or rep is None:
        return None
    base = ("drift", "signals", name)
    return RepresentationView(
        reference_fit=at(document, *base, "rows", "reference", "fit"),
        current_fit=at(document, *base, "rows", "current", "fit"),
        reference_test=at(document, *base, "rows", "reference", "test"),
        current_test=at(document, *base, "rows", "current", "test"),
        auc=at(document, *base, "auc"),
        auc_ci=at(document, *base, "auc_ci"),
        p=at(document, *base, "p"),
        p_holm=at(document, *base, "p_holm"),
        drifted=rep.drifted,
        reason=rep.reason,
        examples=tuple(
            ExampleRow(e.row_index, e.id, at(document, *base, "examples", i, "score"), e.text or "") for i, e in enumerate(rep.examples)
        ),
    )


def _estimate_view(document: MetricsDocument) -> EstimateView | None:
    est = document.estimated
    if est is None:
        return None
    lines = tuple(
        EstimateLine(
            r.metric,
            at(document, "estimated", r.metric),
            Num(r.ci, tuple(r.interval)) if r.ci and r.interval else None,
            Num(r.truth, (r.metric,)) if r.truth is not None else None,
        )
        for r in estimate_rows(document)
    )
    return EstimateView(est.caveat, est.reference, at(document, "estimated", "rows"), est.assumptions, est.unavailable, lines)


def drift_markdown(document: MetricsDocument) -> list[str]:
    """report.md's drift part (the sentence first); empty without drift."""
    return render_markdown_section("drift", drift_view(document))

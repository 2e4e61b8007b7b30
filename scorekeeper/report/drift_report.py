"""The report's drift part (docs/drift.md): the alarm in one sentence (which signals, by how much,
against which reference), the signals worst PSI first, the worst three signals' bins drawn as
reference-vs-current bars, and the estimated performance (beside the truth on a labelled run); the bars are drift_plot.py's.

Pure functions of the typed document, used by report.md, report.html and the Prefect summary
artifact alike; a run without `drift` gets nothing from here, so its report is as before. Text
from data (signal names carry slice column names, bins their values) is escaped by each caller's
own rule: markdown here, HTML by the template's autoescaping, SVG by plots.Canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.escape import md_code, md_text
from scorekeeper.metrics.document import Drift, DriftSignal, MetricsDocument
from scorekeeper.metrics.registry import metric_value, run_metrics, value_at
from scorekeeper.report.render import fmt
from scorekeeper.report.report_stats import pvalue

SHOWN_SIGNALS = 3  # the worst signals drawn as bars (drift_plot.py)


def alarm_sentence(drift: Drift) -> str:
    """The alarm (or its absence) in one sentence, plain text: the caller escapes it."""
    against = f"against run {drift.reference} ({drift.rows.reference} rows; this run {drift.rows.current})"
    signals = list(drift.signals.items())
    if signals and all(s.drifted is None for _, s in signals):
        reason = signals[0][1].reason or "too few rows"
        return f"Drift not judged {against}: {reason}."
    if drift.alarm:
        moved = ", ".join(f"{name} (PSI {drift.signals[name].psi:.3g})" for name in drift.drifted)
        return f"Drift alarm: {len(drift.drifted)} of {len(signals)} signals moved {against}: {moved}."
    if not signals:
        return f"No drift signal could be measured {against}."
    name, worst = signals[0]
    return f"No drift {against}: no signal moved by PSI >= {drift.min_psi:g} beyond noise (largest PSI {worst.psi:.3g}, {name})."


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


def drift_markdown(document: MetricsDocument) -> list[str]:
    """report.md's drift part (the sentence first); empty without drift."""
    drift = document.drift
    if drift is None:
        return []
    lines = [
        f"**{md_text(alarm_sentence(drift))}**",
        "",
        "| signal | kind | PSI | p | p (Holm) | KS | drifted |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in drift.signals.items():
        lines.append(f"| {md_code(name)} | {s.kind} | {s.psi:.4g} | {pvalue(s.p)} | {pvalue(s.p_holm)} | {fmt(s.ks)} | {_verdict(s)} |")
    if drift.skipped:
        lines += ["", "Skipped: " + "; ".join(f"{md_code(n)} ({md_text(why)})" for n, why in drift.skipped.items()) + "."]
    lines.append("")
    lines += estimate_markdown(document)
    return lines


def estimate_markdown(document: MetricsDocument) -> list[str]:
    est = document.estimated
    if est is None:
        return []
    rows = estimate_rows(document)
    lines = []
    if est.caveat:  # first: an input drifted, so the numbers below rest on an assumption in doubt
        lines += [f"**The estimate's assumption is in doubt:** {md_text(est.caveat)}.", ""]
    lines += [f"Estimated performance from run {md_code(est.reference)}'s calibration ({est.rows} rows):"]
    if rows:
        lines += ["", "| metric | estimate | 95% interval | measured |", "|---|---|---|---|"]
        for r in rows:
            interval = f"[{fmt(r.ci[0])}, {fmt(r.ci[1])}]" if r.ci else ""
            lines.append(
                f"| estimated {r.metric} | {fmt(r.estimate)} | {interval} | {fmt(r.truth) if r.truth is not None else 'no labels'} |"
            )
    if est.unavailable:
        lines += ["", f"No estimate: {md_text(est.unavailable)}."]
    lines += ["", f"Assumes {md_text(est.assumptions)}.", ""]
    return lines


def _verdict(s: DriftSignal) -> str:
    return "not judged" if s.drifted is None else "**drifted**" if s.drifted else "no"

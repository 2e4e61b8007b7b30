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
from scorekeeper.metrics.document import Drift, DriftSignal, MetricsDocument, RepresentationSignal
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


def drift_markdown(document: MetricsDocument) -> list[str]:
    """report.md's drift part (the sentence first); empty without drift."""
    drift = document.drift
    if drift is None:
        return []
    lines = [f"**{md_text(alarm_sentence(drift))}**", ""]
    lines += representation_markdown(drift)
    lines += [
        "| signal | kind | PSI | p | p (Holm) | KS | drifted |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in drift.binned().items():
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


def representation_markdown(drift: Drift) -> list[str]:
    """SPEC 14 under the alarm: the representation signal with the texts most unlike the reference,
    and beside it the tokens whose share moved most ("what the texts say more, and less")."""
    lines: list[str] = []
    rep = drift.representation()
    if rep is not None:
        rows = rep.rows
        lines += [
            f"Representation (a classifier of both runs' embeddings, {rows.reference.fit} + {rows.current.fit} rows fit, "
            f"{rows.reference.test} + {rows.current.test} tested): AUC {rep.auc:.3f} [{rep.auc_ci[0]:.3f}, {rep.auc_ci[1]:.3f}], "
            f"p {pvalue(rep.p)}, p (Holm) {pvalue(rep.p_holm)}, floor {fmt(drift.min_auc)}: {_verdict(rep)}"
            + (f" ({md_text(rep.reason)})" if rep.reason else "")
            + ".",
            "",
        ]
        if rep.examples:
            lines += ["The texts most unlike the reference (this run's test rows the classifier scores highest):", ""]
            lines += ["| row | id | score | text |", "|---|---|---|---|"]
            lines += [f"| {e.row_index} | {md_text(e.id)} | {e.score:.3g} | {md_text(e.text or '')} |" for e in rep.examples]
            lines.append("")
    if drift.moved_tokens:
        lines += ["What the texts say more, and less (the tokens whose share moved most; not a test):", ""]
        lines += ["| token | reference | this run | ln(this run / reference) |", "|---|---|---|---|"]
        lines += [
            f"| {md_text(t.token)} | {t.reference_count} ({t.reference_share:.3%}) | {t.current_count} ({t.current_share:.3%}) | "
            f"{t.log_ratio:+.2f} |"
            for t in drift.moved_tokens
        ]
        lines.append("")
    return lines


def _verdict(s: DriftSignal | RepresentationSignal) -> str:
    return "not judged" if s.drifted is None else "**drifted**" if s.drifted else "no"

"""The report's "What the length costs": the headline metric within and over the window
(metrics.json `length_impact`), and in chunk mode the rows scored on each number of windows
(`scoring.long_text.windows_per_row`); and the run fact saying which long-text mode ran.

Pure functions of the typed document. Nothing is shown for a truncate run with no row over the
window, so such a report is the same as a report of a run that never had a long text.
"""

from __future__ import annotations

from scorekeeper.escape import md_code
from scorekeeper.long_text import LongTextCounts
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.registry import length_metric, lower_is_better
from scorekeeper.report.render import ci, fmt

SIDES = (("within", "within the window"), ("over", "over the window"))


def _long_text(metrics: MetricsDocument) -> LongTextCounts | None:
    return metrics.scoring.long_text if metrics.scoring is not None else None


def shown(metrics: MetricsDocument) -> bool:
    """Whether the report has a length section: rows over the window, or a mode other than truncate."""
    long_text = _long_text(metrics)
    if metrics.length_impact is not None:
        return True
    return long_text is not None and (bool(long_text.rows_over_length) or long_text.mode != "truncate")


def length_section(metrics: MetricsDocument) -> dict | None:
    """What report.html's length section shows (None: no section)."""
    if not shown(metrics):
        return None
    long_text, impact = _long_text(metrics), metrics.length_impact
    metric = length_metric(metrics.head)
    sides = []
    if impact is not None:
        for side, words in SIDES:
            part = getattr(impact, side)
            sides.append((side, words, part.rows, getattr(part, metric), getattr(part, f"{metric}_ci")))
    histogram = (long_text.windows_per_row if long_text is not None else None) or {}
    most = max(histogram.values(), default=0)
    windows = [(k, rows, 100.0 * rows / most if most else 0.0) for k, rows in histogram.items()]
    return {
        "metric": metric,
        "lower_is_better": metric in lower_is_better(metrics.head),
        "sides": sides,
        "mode": long_text.mode if long_text is not None else None,
        "windows": windows,
        "summary": summary_sentence(long_text),
    }


def summary_sentence(long_text: LongTextCounts | None) -> str:
    """What the mode did with the lengths, in one sentence."""
    if long_text is None:
        return ""
    text = (
        f"{long_text.rows_over_length:,} rows are longer than the window of {long_text.window:,} content tokens "
        f"(max length {long_text.max_length:,}); {long_text.tokens_scored:,} of their {long_text.tokens_content:,} "
        f"content tokens were scored, {long_text.tokens_dropped:,} never seen by the model"
    )
    if long_text.mode == "chunk":
        text += f"; {long_text.chunks or 0:,} windows scored, {long_text.rows_capped or 0:,} rows capped at max_chunks"
    return text + "."


def length_markdown(metrics: MetricsDocument) -> list[str]:
    """report.md's section."""
    section = length_section(metrics)
    if section is None:
        return []
    lines = ["## What the length costs", ""]
    if section["summary"]:
        lines += [f"Long texts: {md_code(section['mode'])}. {section['summary']}", ""]
    if section["sides"]:
        metric = section["metric"]
        lines += [f"| rows | evaluated | {metric} | 95% CI |", "|---|---|---|---|"]
        lines += [f"| {words} | {rows} | {fmt(value)} | {ci(interval)} |" for _, words, rows, value, interval in section["sides"]]
        lines.append("")
    if section["windows"]:
        lines += ["| windows per row | rows |", "|---|---|"] + [f"| {k} | {rows} |" for k, rows, _ in section["windows"]] + [""]
    return lines


def long_text_fact(metrics: MetricsDocument) -> tuple[str, str] | None:
    """The run fact naming the long-text mode (None for a truncate run with nothing over the window)."""
    long_text = _long_text(metrics)
    if not shown(metrics) or long_text is None:
        return None
    return ("long texts", f"{long_text.mode}: {summary_sentence(long_text)}")

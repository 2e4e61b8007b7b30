"""The report's "What the length costs": the headline metric within and over the window
(metrics.json `length_impact`), and in chunk mode the rows scored on each number of windows
(`scoring.long_text.windows_per_row`); and the run fact saying which long-text mode ran.

Pure functions of the typed document. Nothing is shown for a truncate run with no row over the
window, so such a report is the same as a report of a run that never had a long text.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        "summary": summary_parts(metrics),
    }


@dataclass(frozen=True)
class Figure:
    """A number a sentence states, and its place in metrics.json: the sentence says what the field
    is, never more (report.html marks it with data-key, tests/test_report_sentences.py checks it)."""

    path: tuple[str, ...]
    value: int


Part = str | Figure


def summary_parts(metrics: MetricsDocument) -> list[Part]:
    """What the mode did with the lengths, in one sentence, each number a field of the document.
    The token counts of `scoring.long_text` are the whole run's (every scored row, long or not)."""
    long_text = _long_text(metrics)
    if long_text is None:
        return []

    def field(name: str) -> Figure:
        return Figure(("scoring", "long_text", name), getattr(long_text, name))

    parts: list[Part] = [
        field("rows_over_length"), " of the ", Figure(("scored",), metrics.scored), " rows scored are longer than the window of ",
        field("window"), " content tokens (max length ", field("max_length"), "). The run's ", field("tokens_content"),
        " content tokens: ", field("tokens_scored"), " fed to the model (an overlap counted each time), ", field("tokens_dropped"),
        " never seen by it",
    ]  # fmt: skip
    if long_text.mode == "chunk" and long_text.chunks is not None and long_text.rows_capped is not None:
        parts += ["; ", field("chunks"), " windows scored, ", field("rows_capped"), " rows capped at max_chunks"]
    return [*parts, "."]


def plain(parts: list[Part]) -> str:
    """The sentence as text, numbers with thousands separators."""
    return "".join(p if isinstance(p, str) else f"{p.value:,}" for p in parts)


def summary_sentence(metrics: MetricsDocument) -> str:
    """summary_parts as plain text (report.md, the run facts)."""
    return plain(summary_parts(metrics))


def length_markdown(metrics: MetricsDocument) -> list[str]:
    """report.md's section."""
    section = length_section(metrics)
    if section is None:
        return []
    lines = ["## What the length costs", ""]
    if section["summary"]:
        lines += [f"Long texts: {md_code(section['mode'])}. {plain(section['summary'])}", ""]
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
    return ("long texts", f"{long_text.mode}: {summary_sentence(metrics)}")

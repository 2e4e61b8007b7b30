"""The report's "What the length costs": the headline metric within and over the window
(metrics.json `length_impact`), and in chunk mode the rows scored on each number of windows
(`scoring.long_text.windows_per_row`); and the run fact saying which long-text mode ran.

Pure functions of the document as metrics.json holds it. Nothing is shown for a truncate run with
no row over the window, so such a report is what it was before long texts were handled.
"""

from __future__ import annotations

from scorekeeper.escape import md_code
from scorekeeper.metrics.registry import head_of, length_metric, lower_is_better
from scorekeeper.report.render import ci, fmt

SIDES = (("within", "within the window"), ("over", "over the window"))


def _long_text(metrics: dict) -> dict:
    return (metrics.get("scoring") or {}).get("long_text") or {}


def shown(metrics: dict) -> bool:
    """Whether the report has a length section: rows over the window, or a mode other than truncate."""
    long_text = _long_text(metrics)
    return bool(metrics.get("length_impact") or long_text.get("rows_over_length") or long_text.get("mode", "truncate") != "truncate")


def length_section(metrics: dict) -> dict | None:
    """What report.html's length section shows (None: no section)."""
    if not shown(metrics):
        return None
    long_text, impact = _long_text(metrics), metrics.get("length_impact") or {}
    metric = length_metric(head_of(metrics))
    sides = [
        (side, words, impact[side]["rows"], impact[side].get(metric), impact[side].get(f"{metric}_ci"))
        for side, words in SIDES
        if side in impact
    ]
    histogram = long_text.get("windows_per_row") or {}
    most = max(histogram.values(), default=0)
    windows = [(k, rows, 100.0 * rows / most if most else 0.0) for k, rows in histogram.items()]
    return {
        "metric": metric,
        "lower_is_better": metric in lower_is_better(head_of(metrics)),
        "sides": sides,
        "long_text": long_text,
        "windows": windows,
        "summary": summary_sentence(long_text),
    }


def summary_sentence(long_text: dict) -> str:
    """What the mode did with the lengths, in one sentence."""
    if not long_text:
        return ""
    mode = long_text["mode"]
    text = (
        f"{long_text['rows_over_length']:,} rows are longer than the window of {long_text['window']:,} content tokens "
        f"(max length {long_text['max_length']:,}); {long_text['tokens_scored']:,} of their {long_text['tokens_content']:,} "
        f"content tokens were scored, {long_text['tokens_dropped']:,} never seen by the model"
    )
    if mode == "chunk":
        text += f"; {long_text.get('chunks', 0):,} windows scored, {long_text.get('rows_capped', 0):,} rows capped at max_chunks"
    return text + "."


def length_markdown(metrics: dict) -> list[str]:
    """report.md's section."""
    section = length_section(metrics)
    if section is None:
        return []
    lines = ["## What the length costs", ""]
    if section["summary"]:
        lines += [f"Long texts: {md_code(section['long_text']['mode'])}. {section['summary']}", ""]
    if section["sides"]:
        metric = section["metric"]
        lines += [f"| rows | evaluated | {metric} | 95% CI |", "|---|---|---|---|"]
        lines += [f"| {words} | {rows} | {fmt(value)} | {ci(interval)} |" for _, words, rows, value, interval in section["sides"]]
        lines.append("")
    if section["windows"]:
        lines += ["| windows per row | rows |", "|---|---|"] + [f"| {k} | {rows} |" for k, rows, _ in section["windows"]] + [""]
    return lines


def long_text_fact(metrics: dict) -> tuple[str, str] | None:
    """The run fact naming the long-text mode (None for a truncate run with nothing over the window)."""
    long_text = _long_text(metrics)
    if not shown(metrics) or not long_text:
        return None
    return ("long texts", f"{long_text['mode']}: {summary_sentence(long_text)}")

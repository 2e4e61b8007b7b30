"""The report's "What the length costs": the headline metric within and over the window
(metrics.json `length_impact`), and in chunk mode the rows scored on each number of windows
(`scoring.long_text.windows_per_row`); and the run fact saying which long-text mode ran.

Pure functions of the typed document. Nothing is shown for a truncate run with no row over the
window, so such a report is the same as a report of a run that never had a long text.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.long_text import LongTextCounts
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.registry import length_metric, lower_is_better
from scorekeeper.report.view import Num, at, render_markdown_section

SIDES = (("within", "within the window"), ("over", "over the window"))


def _long_text(metrics: MetricsDocument) -> LongTextCounts | None:
    return metrics.scoring.long_text if metrics.scoring is not None else None


def shown(metrics: MetricsDocument) -> bool:
    """Whether the report has a length section: rows over the window, or a mode other than truncate."""
    long_text = _long_text(metrics)
    if metrics.length_impact is not None:
        return True
    return long_text is not None and (bool(long_text.rows_over_length) or long_text.mode != "truncate")


@dataclass(frozen=True)
class LengthSide:
    """The evaluated rows within or over the window: how many, the length metric, its interval."""

    words: str
    rows: Num
    value: Num
    interval: Num


@dataclass(frozen=True)
class WindowCount:
    """Chunk mode: the rows scored on `windows` windows, and their bar's width in percent of the largest."""

    windows: str
    rows: Num
    width: float


@dataclass(frozen=True)
class LengthView:
    """The section "What the length costs" (templates/length.md.j2, length.html.j2)."""

    metric: str
    lower_is_better: bool
    mode: str | None
    summary: tuple[Part, ...]
    sides: tuple[LengthSide, ...]
    windows: tuple[WindowCount, ...]


def length_view(metrics: MetricsDocument) -> LengthView | None:
    """The length section's view (None: no section)."""
    if not shown(metrics):
        return None
    long_text, impact = _long_text(metrics), metrics.length_impact
    metric = length_metric(metrics.head)
    sides = []
    if impact is not None:
        for side, words in SIDES:
            base = ("length_impact", side)
            sides.append(LengthSide(words, at(metrics, *base, "rows"), at(metrics, *base, metric), at(metrics, *base, f"{metric}_ci")))
    histogram = (long_text.windows_per_row if long_text is not None else None) or {}
    most = max(histogram.values(), default=0)
    windows = tuple(
        WindowCount(k, at(metrics, "scoring", "long_text", "windows_per_row", k), 100.0 * rows / most if most else 0.0)
        for k, rows in histogram.items()
    )
    return LengthView(
        metric=metric,
        lower_is_better=metric in lower_is_better(metrics.head),
        mode=long_text.mode if long_text is not None else None,
        summary=tuple(summary_parts(metrics)),
        sides=tuple(sides),
        windows=windows,
    )


Part = str | Num


def summary_parts(metrics: MetricsDocument) -> list[Part]:
    """What the mode did with the lengths, in one sentence, each number a field of the document: the
    sentence says what the field is, never more (tests/test_report_sentences.py checks it). The
    token counts of `scoring.long_text` are the whole run's (every scored row, long or not)."""
    long_text = _long_text(metrics)
    if long_text is None:
        return []

    def field(name: str) -> Num:
        return at(metrics, "scoring", "long_text", name)

    parts: list[Part] = [
        field("rows_over_length"), " of the ", at(metrics, "scored"), " rows scored are longer than the window of ",
        field("window"), " content tokens (max length ", field("max_length"), "). The run's ", field("tokens_content"),
        " content tokens: ", field("tokens_scored"), " fed to the model (an overlap counted each time), ", field("tokens_dropped"),
        " never seen by it",
    ]  # fmt: skip
    if long_text.mode == "chunk" and long_text.chunks is not None and long_text.rows_capped is not None:
        parts += ["; ", field("chunks"), " windows scored, ", field("rows_capped"), " rows capped at max_chunks"]
    return [*parts, "."]


def plain(parts: list[Part] | tuple[Part, ...]) -> str:
    """The sentence as text, numbers with thousands separators."""
    return "".join(p if isinstance(p, str) else f"{p.value:,}" for p in parts)


def summary_sentence(metrics: MetricsDocument) -> str:
    """summary_parts as plain text (report.md, the run facts)."""
    return plain(summary_parts(metrics))


def length_markdown(metrics: MetricsDocument) -> list[str]:
    """report.md's section."""
    return render_markdown_section("length", length_view(metrics))


def long_text_fact(metrics: MetricsDocument) -> tuple[str, str] | None:
    """The run fact naming the long-text mode (None for a truncate run with nothing over the window)."""
    long_text = _long_text(metrics)
    if not shown(metrics) or long_text is None:
        return None
    return ("long texts", f"{long_text.mode}: {summary_sentence(metrics)}")

"""Long documents: what the flow and the worker both need to know about `long_text` (no torch).

A row's content tokens (L of them, the tokenizer's output without special tokens) are scored in
windows of W = max_length - s content tokens, s being the special tokens the tokenizer adds to one
text. `truncate` keeps the first W, `head_tail` the first `head_tokens` and the last W - head_tokens,
`chunk` covers the whole text with windows (the worker's `windows.py` builds them; docs/long_text.md).

Here: the checks made before anything is scored (a window with no room, an aggregation the head
cannot have), and the counts a committed range carries, summed into metrics.json
`scoring.long_text`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from scorekeeper.head_kind import HeadKind

TRUNCATE, HEAD_TAIL, CHUNK = "truncate", "head_tail", "chunk"
MEAN, MAX = "mean", "max"


def window_size(max_length: int, specials: int) -> int:
    """W: the content tokens one model input holds."""
    return max_length - specials


def aggregate_problem(long_text: str, aggregate: str, head: str) -> str | None:
    """Why this aggregation cannot serve this head (None when it can): the maximum of each logit
    over windows is no distribution's logits, so `max` is refused for single-label heads."""
    if long_text == CHUNK and aggregate == MAX and head == HeadKind.SINGLE_LABEL:
        return (
            "chunk_aggregate max takes each output's largest value over a row's windows, which for a single_label head "
            "mixes classes from different windows; use chunk_aggregate mean (max serves multi_label and regression heads)"
        )
    return None


def check_aggregate(long_text: str, aggregate: str, head: str) -> None:
    """aggregate_problem as a ValueError (the parameter model's validators raise these)."""
    problem = aggregate_problem(long_text, aggregate, head)
    if problem:
        raise ValueError(problem)


def window_problem(long_text: str, head_tokens: int, chunk_overlap: int, max_length: int, specials: int) -> str | None:
    """Why the window leaves no room for this mode (None when it does)."""
    window = window_size(max_length, specials)
    if window < 1:
        return (
            f"max_length {max_length} leaves no room for text: the tokenizer adds {specials} special token(s) to every input; "
            "raise max_length"
        )
    if long_text == HEAD_TAIL and head_tokens >= window:
        return (
            f"head_tokens {head_tokens} leaves no room for the tail: the window is {window} content tokens "
            f"(max_length {max_length} minus {specials} special token(s)); use head_tokens below {window}"
        )
    if long_text == CHUNK and chunk_overlap >= window:
        return (
            f"chunk_overlap {chunk_overlap} leaves windows no room to advance: the window is {window} content tokens "
            f"(max_length {max_length} minus {specials} special token(s)); use chunk_overlap below {window}"
        )
    return None


class LongTextCounts(BaseModel):
    """What one range (or, summed, the run) did with its texts' lengths: metrics.json
    `scoring.long_text`. `chunks` and `rows_capped` only in chunk mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: str
    max_length: int
    window: int
    rows_over_length: int  # rows with L > W
    tokens_content: int  # sum of L
    tokens_scored: int  # content tokens fed to the model, an overlap counted each time
    tokens_dropped: int  # content tokens never fed to the model
    chunks: int | None = None  # windows scored (chunk mode)
    rows_capped: int | None = None  # rows needing more than max_chunks windows (chunk mode)
    windows_per_row: dict[str, int] | None = None  # chunk mode: rows scored on each number of windows

    @classmethod
    def summed(cls, parts: Iterable[LongTextCounts]) -> LongTextCounts | None:
        """The counts of several ranges as one (None for none). Every part must come from the same
        mode and window: they are one run's ranges under one scoring fingerprint."""
        parts = list(parts)
        if not parts:
            return None
        first = parts[0]
        if any((p.mode, p.max_length, p.window) != (first.mode, first.max_length, first.window) for p in parts):
            raise ValueError("the ranges' long-text counts were made with different modes or windows")
        total: dict[str, Any] = {
            name: sum(getattr(p, name) or 0 for p in parts)
            for name in ("rows_over_length", "tokens_content", "tokens_scored", "tokens_dropped")
        }
        chunked: dict[str, Any] = {}
        if first.mode == CHUNK:
            chunked = {name: sum(getattr(p, name) or 0 for p in parts) for name in ("chunks", "rows_capped")}
            histogram: dict[str, int] = {}
            for p in parts:
                for windows, rows in (p.windows_per_row or {}).items():
                    histogram[windows] = histogram.get(windows, 0) + rows
            chunked["windows_per_row"] = dict(sorted(histogram.items(), key=lambda kv: int(kv[0])))
        return cls(mode=first.mode, max_length=first.max_length, window=first.window, **total, **chunked)

    def as_dict(self) -> dict:
        return self.model_dump(exclude_none=True)

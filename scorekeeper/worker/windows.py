"""The model inputs of a range's rows: each row's content tokens cut into windows by `long_text`.

Definitions (docs/long_text.md): a row's content tokens `c` are the tokenizer's output without
special tokens, L of them; s is the number of special tokens it adds to one text, and the window
is W = max_length - s content tokens. One window `w` becomes the model input `prefix + w + suffix`,
where prefix and suffix are the special tokens the tokenizer puts around one text's content
(read from the special-tokens mask of one encoded text).

* truncate: `c[0:W]`;
* head_tail: `c[0:H] + c[L-(W-H):L]` when L > W, else `c`;
* chunk: `c` when L <= W; else step = W - overlap and k = 1 + ceil((L - W) / step) windows,
  window i < k-1 is `c[i*step : i*step+W]` and the last is `c[L-W:L]`; a row needing more than
  max_chunks is scored on its first max_chunks windows (counted apart).

A window is a tuple of spans `(start, end)` into `c` (two for a head_tail cut, one otherwise).
The windows of a range are listed row by row, so a row's windows are consecutive and the row's
raw outputs are aggregated with one `reduceat` (`aggregate`): the mean or the maximum in float64,
before the head's activation. Everything here is a pure function of the rows and the settings,
like the batches (batching.py): nothing depends on the process count.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from scorekeeper.errors import InputError, ModelError
from scorekeeper.long_text import CHUNK, HEAD_TAIL, MAX, TRUNCATE, LongTextCounts, window_problem, window_size
from scorekeeper.representation import count_tokens
from scorekeeper.worker.batching import Encoded, encode

Span = tuple[int, int]
Window = tuple[Span, ...]
PROBE_TEXT = "The delivery came on time and the box was intact."


@dataclass(frozen=True)
class WindowSettings:
    """How long texts are cut (ScoringSettings' long-text fields) and the window they are cut to."""

    mode: str
    window: int
    head_tokens: int = 128
    overlap: int = 0
    aggregate: str = "mean"
    max_chunks: int = 64


def row_windows(length: int, settings: WindowSettings) -> tuple[list[Window], bool]:
    """The windows of a row of `length` content tokens, and whether max_chunks capped them."""
    w = settings.window
    if length <= w:
        return [((0, length),)], False
    if settings.mode == TRUNCATE:
        return [((0, w),)], False
    if settings.mode == HEAD_TAIL:
        h = settings.head_tokens
        return [((0, h), (length - (w - h), length))], False
    step = w - settings.overlap
    k = 1 + math.ceil((length - w) / step)
    if k > settings.max_chunks:  # the first max_chunks windows, all before the last
        return [((i * step, i * step + w),) for i in range(settings.max_chunks)], True
    windows: list[Window] = [((i * step, i * step + w),) for i in range(k - 1)]
    return windows + [((length - w, length),)], False


def covered(windows: list[Window]) -> int:
    """Content positions at least one window holds (windows' spans are contiguous from 0 or end at L)."""
    seen: set[int] = set()
    for window in windows:
        for start, end in window:
            seen.update(range(start, end))
    return len(seen)


@dataclass(frozen=True)
class TextFrame:
    """What the tokenizer puts around one text's content: the special tokens before and after it
    (and their token type ids), the type id of the content, and its unknown token."""

    prefix: list[int]
    suffix: list[int]
    prefix_types: list[int]
    suffix_types: list[int]
    content_type: int
    unknown_id: int | None

    @property
    def specials(self) -> int:
        return len(self.prefix) + len(self.suffix)


def text_frame(tokenizer) -> TextFrame:
    """The frame read from one encoded text's special-tokens mask (its leading and trailing runs).
    Refused when the tokenizer puts special tokens anywhere else, or counts them otherwise
    (num_special_tokens_to_add): windows could not be framed as it frames a text."""
    enc = tokenizer(PROBE_TEXT, return_special_tokens_mask=True, return_token_type_ids=True)
    ids, mask = list(enc["input_ids"]), list(enc["special_tokens_mask"])
    types = list(enc.get("token_type_ids") or [0] * len(ids))
    lead = next((i for i, m in enumerate(mask) if not m), len(mask))
    trail = next((i for i, m in enumerate(reversed(mask)) if not m), len(mask))
    content = ids[lead : len(ids) - trail]
    expected = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    if content != list(expected) or lead + trail != specials:
        raise ModelError(
            "this tokenizer does not frame a text as special tokens before and after its content "
            f"({specials} special tokens to add, {lead} before and {trail} after); long_text head_tail and chunk need that frame"
        )
    return TextFrame(
        prefix=ids[:lead],
        suffix=ids[len(ids) - trail :],
        prefix_types=types[:lead],
        suffix_types=types[len(ids) - trail :],
        content_type=types[lead] if lead < len(types) - trail else 0,
        unknown_id=getattr(tokenizer, "unk_token_id", None),
    )


def window_settings(scoring, max_length: int, frame: TextFrame) -> WindowSettings:
    """WindowSettings from the job's ScoringSettings; the window's room checked again here (the
    flow checks it from the folder's files, but a folder without tokenizer.json only here)."""
    problem = window_problem(scoring.long_text, scoring.head_tokens, scoring.chunk_overlap, max_length, frame.specials)
    if problem:
        raise InputError(problem)
    return WindowSettings(
        mode=scoring.long_text,
        window=window_size(max_length, frame.specials),
        head_tokens=scoring.head_tokens,
        overlap=scoring.chunk_overlap,
        aggregate=scoring.chunk_aggregate,
        max_chunks=scoring.max_chunks,
    )


@dataclass
class RowLengths:
    """Per row of a range: `tokens` (L + s), `unknown` content tokens, windows scored (`chunks`)."""

    tokens: np.ndarray
    unknown: np.ndarray
    chunks: np.ndarray
    counts: LongTextCounts
    # every content token of the range's rows, counted (SPEC 14's words): ids ascending, their counts
    token_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    token_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def one_window_each(self) -> bool:
        return bool(np.all(self.chunks == 1))


def content_tokens(tokenizer, texts: list[str]) -> list[list[int]]:
    """Each text's content tokens, whole (the tokenizer's long-input warning is not for us: no input
    longer than the window reaches the model)."""
    logger = logging.getLogger("transformers.tokenization_utils_base")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return tokenizer(texts, add_special_tokens=False, truncation=False, padding=False, return_attention_mask=False)["input_ids"]
    finally:
        logger.setLevel(level)


def encode_windows(tokenizer, texts: list[str], frame: TextFrame, settings: WindowSettings, max_length: int, with_type_ids: bool):
    """The range's model inputs (one per window, rows in order, each row's windows together) and
    each row's lengths and the range's long-text counts."""
    contents = content_tokens(tokenizer, texts)
    n = len(contents)
    ids: list[list[int]] = []
    zero_types = with_type_ids and not any(frame.prefix_types) and not any(frame.suffix_types) and frame.content_type == 0
    type_ids: list[list[int]] | None = [] if with_type_ids and not zero_types else None
    tokens = np.empty(n, dtype=np.int64)
    unknown = np.zeros(n, dtype=np.int64)
    chunks = np.empty(n, dtype=np.int64)
    over = scored = dropped = capped = 0
    prefix, suffix = frame.prefix, frame.suffix
    unknown_id, window, specials = frame.unknown_id, settings.window, frame.specials
    for i, c in enumerate(contents):
        length = len(c)
        if length <= window:  # the common case, one window: the row itself
            tokens[i] = length + specials
            if unknown_id is not None:
                unknown[i] = c.count(unknown_id)
            chunks[i] = 1
            ids.append(prefix + c + suffix if specials else c)
            if type_ids is not None:
                type_ids.append(frame.prefix_types + [frame.content_type] * length + frame.suffix_types)
            scored += length
            continue
        windows, was_capped = row_windows(length, settings)
        tokens[i] = length + specials
        if unknown_id is not None:
            unknown[i] = c.count(unknown_id)
        chunks[i] = len(windows)
        for spans in windows:
            body = c[spans[0][0] : spans[0][1]] if len(spans) == 1 else [t for a, b in spans for t in c[a:b]]
            ids.append(prefix + body + suffix)
            if type_ids is not None:
                type_ids.append(frame.prefix_types + [frame.content_type] * len(body) + frame.suffix_types)
            scored += len(body)
        over += 1
        dropped += length - _covered_fast(length, windows, settings)
        capped += was_capped
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    encoded = Encoded(ids=ids, type_ids=type_ids, lengths=lengths, truncated=0, zero_type_ids=zero_types)
    chunk_mode = settings.mode == CHUNK
    counts = LongTextCounts(
        mode=settings.mode,
        max_length=max_length,
        window=settings.window,
        rows_over_length=over,
        tokens_content=int(tokens.sum() - frame.specials * n),
        tokens_scored=scored,
        tokens_dropped=dropped,
        chunks=len(ids) if chunk_mode else None,
        rows_capped=capped if chunk_mode else None,
        windows_per_row={str(k): int(v) for k, v in enumerate(np.bincount(chunks)) if v} if chunk_mode else None,
    )
    encoded.truncated = over if settings.mode != CHUNK else capped
    return encoded, RowLengths(tokens, unknown, chunks, counts, *count_tokens(contents))


def _covered_fast(length: int, windows: list[Window], settings: WindowSettings) -> int:
    """`covered(windows)` without a set: truncate and head_tail keep W positions of a longer row; the
    first m windows of a chunked row cover [0, (m-1)*step + W), or all L when the last is there."""
    if settings.mode != CHUNK:
        return settings.window
    last_start = windows[-1][0][0]
    return length if last_start == length - settings.window else last_start + settings.window


def aggregate(raw: np.ndarray, chunks: np.ndarray, how: str) -> np.ndarray:
    """Each row's outputs from its windows' raw outputs (windows x outputs, float64, each row's
    windows consecutive and in row order): their element-wise mean or maximum."""
    if len(raw) == len(chunks):
        return raw  # one window a row: the row's own outputs, untouched
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]])
    if how == MAX:
        return np.maximum.reduceat(raw, starts, axis=0)
    return np.add.reduceat(raw, starts, axis=0) / chunks[:, None]


def encode_plain(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int, with_type_ids: bool):
    """Text pairs (and, in truncate mode, a tokenizer without a plain frame): the tokenizer's own
    truncation, as ever; each row's lengths from a second, untruncated encoding (L + s is the
    encoded pair's length, L its tokens other than the special ones)."""
    encoded = encode(tokenizer, texts, pairs, max_length, with_type_ids)
    logger = logging.getLogger("transformers.tokenization_utils_base")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        whole_encoded = tokenizer(
            texts, pairs, truncation=False, padding=False, return_attention_mask=False, return_special_tokens_mask=True
        )
    finally:
        logger.setLevel(level)
    whole = whole_encoded["input_ids"]
    # the content tokens: what the tokenizer did not add around the text(s)
    contents = [[t for t, special in zip(ids, mask) if not special] for ids, mask in zip(whole, whole_encoded["special_tokens_mask"])]
    specials = tokenizer.num_special_tokens_to_add(pair=pairs is not None)
    unknown_id = getattr(tokenizer, "unk_token_id", None)
    tokens = np.fromiter((len(x) for x in whole), dtype=np.int64, count=len(whole))
    unknown = np.fromiter((x.count(unknown_id) if unknown_id is not None else 0 for x in whole), dtype=np.int64, count=len(whole))
    content = int(tokens.sum()) - specials * len(whole)
    scored = int(encoded.lengths.sum()) - specials * len(whole)
    counts = LongTextCounts(
        mode=TRUNCATE,
        max_length=max_length,
        window=window_size(max_length, specials),
        rows_over_length=int(np.sum(tokens > max_length)),
        tokens_content=content,
        tokens_scored=scored,
        tokens_dropped=content - scored,
    )
    return encoded, RowLengths(tokens, unknown, np.ones(len(whole), dtype=np.int64), counts, *count_tokens(contents))


def encode_rows(
    tokenizer,
    texts: list[str],
    pairs: list[str] | None,
    frame: TextFrame | None,
    settings: WindowSettings,
    max_length: int,
    with_type_ids: bool,
):
    """A range's model inputs and row lengths: windows per `settings` for single texts, the
    tokenizer's own truncation for text pairs (refused up front for head_tail and chunk). Truncate
    mode with a tokenizer that cuts from the left (`truncation_side: left`) keeps the tokenizer's own
    cut too, the last tokens: truncate mode's inputs are always what `tokenizer(text, truncation=True)`
    gives."""
    keeps_the_tokenizers_cut = settings.mode == TRUNCATE and getattr(tokenizer, "truncation_side", "right") != "right"
    if pairs is None and frame is not None and not keeps_the_tokenizers_cut:
        return encode_windows(tokenizer, texts, frame, settings, max_length, with_type_ids)
    if settings.mode != TRUNCATE:
        raise InputError(f"long_text {settings.mode} scores one text per row; text pairs (and this tokenizer) only truncate")
    return encode_plain(tokenizer, texts, pairs, max_length, with_type_ids)


def text_frame_or_none(tokenizer) -> TextFrame | None:
    """The tokenizer's frame, or None for one that frames a text some other way (truncate mode
    then leaves the cut to the tokenizer, as it always did)."""
    try:
        return text_frame(tokenizer)
    except ModelError:
        return None


def with_lengths(table, lengths: RowLengths, settings: WindowSettings | None):
    """A range's prediction table with the length columns: `tokens` (L + s) and `unknown_tokens`
    for every run, `chunks` (windows scored) in chunk mode; int32."""
    import pyarrow as pa

    table = table.append_column("tokens", pa.array(lengths.tokens.astype(np.int32), type=pa.int32()))
    table = table.append_column("unknown_tokens", pa.array(lengths.unknown.astype(np.int32), type=pa.int32()))
    if settings is not None and settings.mode == CHUNK:
        table = table.append_column("chunks", pa.array(lengths.chunks.astype(np.int32), type=pa.int32()))
    return table

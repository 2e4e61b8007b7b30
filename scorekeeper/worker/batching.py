"""Length-aware batching inside one range: a pure function of the range's rows.

Rows are sorted by token length (longest first, ties by position, so the result is
deterministic), and batches are cut so that rows x longest-row stays under a token budget. Each
batch is padded only to its own longest row. Because nothing here depends on the process count,
a row's batch, and hence its prediction, is the same however many processes run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Encoded:
    """Token ids of a range's rows, truncated to the model's maximum."""

    ids: list[list[int]]
    type_ids: list[list[int]] | None
    lengths: np.ndarray
    truncated: int
    zero_type_ids: bool = False  # token type ids wanted, every one 0 (type_ids not listed: collate makes zeros)


@dataclass
class Batch:
    positions: np.ndarray  # positions of the batch's rows inside their range
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor | None
    useful_tokens: int
    padded_tokens: int

    def model_inputs(self) -> dict[str, torch.Tensor]:
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs

    def to(self, device: torch.device, non_blocking: bool = False) -> Batch:
        move = lambda t: t.to(device, non_blocking=non_blocking)  # noqa: E731
        return Batch(
            self.positions,
            move(self.input_ids),
            move(self.attention_mask),
            None if self.token_type_ids is None else move(self.token_type_ids),
            self.useful_tokens,
            self.padded_tokens,
        )


def encode(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int, with_type_ids: bool) -> Encoded:
    """Tokenize without padding; count rows the truncation shortened."""
    enc = tokenizer(
        texts,
        pairs,
        truncation=True,
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=with_type_ids,
    )
    ids = enc["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    return Encoded(
        ids=ids,
        type_ids=enc.get("token_type_ids") if with_type_ids else None,
        lengths=lengths,
        truncated=count_truncated(tokenizer, enc, texts, pairs, lengths, max_length),
    )


def count_truncated(tokenizer, enc, texts, pairs, lengths: np.ndarray, max_length: int) -> int:
    """Rows that were longer than max_length. Fast tokenizers keep the cut-off part as `overflowing`."""
    encodings = getattr(enc, "encodings", None)
    if encodings:
        return sum(1 for e in encodings if e.overflowing)
    # Slow tokenizers: only rows that hit the limit can have been cut; re-check those alone.
    at_limit = np.flatnonzero(lengths >= max_length)
    if not len(at_limit):
        return 0
    again = tokenizer(
        [texts[i] for i in at_limit],
        [pairs[i] for i in at_limit] if pairs is not None else None,
        truncation=False,
        padding=False,
        return_attention_mask=False,
    )["input_ids"]
    return sum(1 for x in again if len(x) > max_length)


def cut_batches(lengths: np.ndarray, tokens_per_batch: int, max_rows: int, groups: np.ndarray | None = None) -> list[np.ndarray]:
    """Positions of each batch: longest rows first, rows x longest <= tokens_per_batch. With `groups`
    (a key per row), rows of different keys never share a batch: the keys in increasing order, each
    key's rows cut as above. When every row has the same key, the batches are those without keys."""
    keys = (np.arange(len(lengths)), -lengths) if groups is None else (np.arange(len(lengths)), -lengths, groups)
    order = np.lexsort(keys)
    ends = None if groups is None else np.searchsorted(groups[order], groups[order], side="right")  # each key's end
    batches: list[np.ndarray] = []
    start = 0
    n = len(order)
    while start < n:
        longest = max(int(lengths[order[start]]), 1)
        rows = max(1, min(max_rows, tokens_per_batch // longest, (n if ends is None else int(ends[start])) - start))
        batches.append(order[start : start + rows])
        start += rows
    return batches


def count_of(encoded: Encoded, token_id: int) -> np.ndarray:
    """How many times each encoded sequence holds `token_id`."""
    return np.fromiter((ids.count(token_id) for ids in encoded.ids), dtype=np.int64, count=len(encoded.ids))


def collate(encoded: Encoded, positions: np.ndarray, pad_token_id: int, pin_memory: bool = False) -> Batch:
    """Right-pad the rows at `positions` to the longest of them (pads never reach an output)."""
    lengths = encoded.lengths[positions]
    width = max(int(lengths.max()), 1)
    mask = np.arange(width)[None, :] < lengths[:, None]
    input_ids = np.full((len(positions), width), pad_token_id, dtype=np.int64)
    input_ids[mask] = np.concatenate([encoded.ids[p] for p in positions]) if lengths.sum() else []
    token_type_ids = None
    if encoded.zero_type_ids:
        token_type_ids = np.zeros((len(positions), width), dtype=np.int64)
    elif encoded.type_ids is not None:
        token_type_ids = np.zeros((len(positions), width), dtype=np.int64)
        if lengths.sum():
            token_type_ids[mask] = np.concatenate([encoded.type_ids[p] for p in positions])
    as_tensor = lambda a: torch.from_numpy(a).pin_memory() if pin_memory else torch.from_numpy(a)  # noqa: E731
    return Batch(
        positions=positions,
        input_ids=as_tensor(input_ids),
        attention_mask=as_tensor(mask.astype(np.int64)),
        token_type_ids=None if token_type_ids is None else as_tensor(token_type_ids),
        useful_tokens=int(lengths.sum()),
        padded_tokens=int(len(positions) * width),
    )

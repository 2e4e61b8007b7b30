"""Each range's part of SPEC section 14: the sampled rows' representation and the content tokens' counts.

The representation is the final hidden state the classification head reads, at the position the
head pools: `model(**inputs).hidden_states[-1]`, which is the base model's `last_hidden_state` (the
pooler's input for BERT-like encoders; the final norm's output, the tensor `score` multiplies, for
decoders). A forward hook on the base model keeps that tensor for the batch that is running (per
thread: the CPU's batch threads run batches side by side), and the rows of the sample are read off
it at the head's position: 0 for encoder families; for decoder families transformers' own rule for
the row alone, the rightmost position whose token id is not the model's own `pad_token_id`, or the
row's last position when the model has none (`stages.head_position`: the job pads such a model with
eos, which a text may end with), so right padding in a batch does not move it. Architectures the
registry does not know are read where transformers' own head reads them (`head_pooling`): a
sequence-to-sequence head (BART, mBART, T5 and their kin) reads the decoder's output at the row's
last eos, CTRL's `classifier` the last non-pad position as `score` does; a head that reads no one
position of it (ModernBERT's mean pooling, XLNet's summary of the padded batch's last position) is
refused rather than written at a guessed one (docs/heads.md, "Which position a decoder's head
reads"). Nothing else of the forward pass is kept (no
`output_hidden_states`, which keeps every layer). Pipeline mode's last stage hands the same tensor
back beside the logits (stages.py). A row of several windows (chunk mode) gets the float64 mean of
its windows' vectors, then float32; a model under an unmerged adapter is read through the adapter.

Which rows are sampled is scorekeeper/representation.py's rule, a function of the row index and
the run's row count alone. Imports torch, never Prefect or DuckDB.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import torch

from scorekeeper.errors import ModelError
from scorekeeper.representation import TOKEN_COUNTS_SCHEMA, embedding_sample, embeddings_table
from scorekeeper.worker.families import HFModule, find_family
from scorekeeper.worker.last_position import LAST_TOKEN_CLASSIFIERS
from scorekeeper.worker.stages import head_position, unwrap_adapter

FIRST, LAST, EOS = "first", "last", "eos"  # where a classifier's head reads the final hidden state


def head_pooling(model: torch.nn.Module) -> str:
    """Where the classifier's head reads the final hidden state, as transformers' head code does for
    the row alone: FIRST (position 0), LAST (the rightmost position whose id is not the pad id:
    decoder families, heads named `score`, LAST_TOKEN_CLASSIFIERS), EOS (the row's last eos, in the
    decoder's output: transformers' sequence-to-sequence heads, `classification_head`), or, for a
    head that reads no one position of that tensor, a sentence saying what it reads instead.
    The family registry says first; else the head's own attributes and config."""
    family = find_family(getattr(model.config, "model_type", None))
    if family is not None:
        return LAST if family.kind == "decoder" else FIRST
    config = model.config
    if hasattr(model, "sequence_summary"):  # XLNet, XLM, Flaubert: SequenceSummary's `summary_type`
        summary = getattr(config, "summary_type", "last")
        if summary == "first":
            return FIRST
        return f"its head summarises the final hidden states by {summary!r} (summary_type), not at a row's own position"
    pooling = getattr(config, "classifier_pooling", None)  # ModernBERT, EuroBERT: "cls" or "mean"
    if pooling not in (None, "cls", "bos"):
        return f"its head pools the final hidden states by {pooling!r} (classifier_pooling), not at one position"
    if (hasattr(model, "score") and not hasattr(model, "classifier")) or type(model).__name__ in LAST_TOKEN_CLASSIFIERS:
        return LAST
    if getattr(config, "is_encoder_decoder", False):
        if hasattr(model, "classification_head") and getattr(config, "eos_token_id", None) is not None:
            return EOS
        return "its head reads an encoder-decoder's output at a position this job does not know"
    return FIRST


class Representation:
    """Reads the pooled hidden state of a loaded model's batches (a hook on its base model)."""

    def __init__(self, model: torch.nn.Module, embedding_rows: int, total_rows: int, model_pad_token_id: int | None):
        """`model_pad_token_id`: the model's own pad id (LoadedModel.model_pad_token_id), None when its
        config has none (the job pads with eos then, and the head's position is each row's last)."""
        inner: HFModule = unwrap_adapter(model)  # under an unmerged adapter: the adapted transformers model
        self.embedding_rows, self.total_rows = embedding_rows, total_rows
        self.pooling = head_pooling(inner)
        if self.pooling not in (FIRST, LAST, EOS):  # a vector at a guessed position would be a wrong answer
            raise ModelError(
                f"this {type(inner).__name__} has no representation to sample (SPEC 14 reads the final hidden state at the "
                f"position the head pools): {self.pooling}; run it with embedding_rows 0"
            )
        self.pad_token_id = model_pad_token_id
        self.eos_token_id = int(inner.config.eos_token_id) if self.pooling == EOS else -1  # (head_pooling: EOS has one)
        self._local = threading.local()
        self._hook = inner.base_model.register_forward_hook(self._keep)

    def _keep(self, _module, _args, output) -> None:
        self._local.hidden = output[0]  # last_hidden_state (a ModelOutput or a tuple)

    def remove(self) -> None:
        self._hook.remove()

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: np.ndarray | None) -> torch.Tensor | None:
        """The head's input for rows `keep` of the (right-padded) batch that just ran on this thread:
        (rows, width), on the batch's device; None when no row of the batch is sampled."""
        hidden = self._local.hidden
        self._local.hidden = None
        if keep is None or not len(keep):
            return None
        index = torch.from_numpy(keep).to(hidden.device)
        rows = hidden.index_select(0, index)
        if self.pooling == FIRST:
            return rows[:, 0]
        ids, mask = input_ids.index_select(0, index), attention_mask.index_select(0, index)
        if self.pooling == EOS:  # the decoder's output at the row's last eos (a pad is outside the row's mask, whatever its id)
            position = last_of(ids, mask, self.eos_token_id)
        else:
            position = head_position(ids, mask, self.pad_token_id)
        return rows[torch.arange(rows.shape[0], device=rows.device), position]

    def sample(self, row_index: np.ndarray, chunks: np.ndarray) -> RangeSample:
        return RangeSample.of(embedding_sample(row_index, self.embedding_rows, self.total_rows), chunks)


@dataclass
class RangeSample:
    """A range's sampled rows and their windows, and the vectors collected for them batch by batch."""

    rows: np.ndarray  # positions of the sampled rows in the range
    chunks: np.ndarray  # windows of each sampled row
    window_mask: np.ndarray  # per window of the range: whether its row is sampled
    windows: np.ndarray  # positions of the sampled rows' windows, ascending
    _parts: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    @classmethod
    def of(cls, sampled: np.ndarray, chunks: np.ndarray) -> RangeSample:
        window_mask = np.repeat(sampled, chunks)
        return cls(np.flatnonzero(sampled), chunks[sampled], window_mask, np.flatnonzero(window_mask))

    def __bool__(self) -> bool:
        return bool(len(self.rows))

    def keep(self, positions: np.ndarray) -> np.ndarray:
        """Which rows of a batch (its window positions in the range) belong to the sample."""
        return np.flatnonzero(self.window_mask[positions])

    def add(self, positions: np.ndarray, vectors: np.ndarray) -> None:
        """The vectors of windows at `positions` (rows x width, float32: what any model dtype converts
        to exactly; a row's windows are averaged in float64)."""
        if len(positions):
            self._parts.append((positions, vectors))

    def table(self, rows: pa.Table) -> pa.Table | None:
        """The sampled rows' embeddings (row order): each row's windows' float64 mean, as float32."""
        if not self:
            return None
        width = self._parts[0][1].shape[1]
        several = len(self.windows) != len(self.chunks)  # a row of several windows: their mean, in float64
        raw = np.empty((len(self.windows), width), dtype=np.float64 if several else np.float32)
        seen = 0
        for positions, vectors in self._parts:
            raw[np.searchsorted(self.windows, positions)] = vectors
            seen += len(positions)
        if seen != len(self.windows):
            raise RuntimeError(f"{seen} window vectors collected for the {len(self.windows)} windows of the sampled rows")
        if several:  # (imported here: the rest of this module runs without pydantic)
            from scorekeeper.worker.windows import aggregate

            raw = aggregate(raw, self.chunks, "mean")
        vectors = raw.astype(np.float32, copy=False)
        row_index = rows.column("row_index").to_numpy()[self.rows]
        return embeddings_table(row_index, rows.column("id").take(pa.array(self.rows)).combine_chunks(), vectors)


def last_of(input_ids: torch.Tensor, attention_mask: torch.Tensor, token_id: int) -> torch.Tensor:
    """Each row's rightmost position of its own (attention-masked) whose id is `token_id` (0 when none
    is): where transformers' sequence-to-sequence heads read the row's last eos."""
    found = (input_ids == token_id) & attention_mask.bool()
    positions = torch.arange(input_ids.shape[-1], device=input_ids.device, dtype=torch.int32)
    return (positions * found.to(torch.int32)).argmax(-1).to(torch.int64)


def token_counts_table(tokenizer, ids: np.ndarray, counts: np.ndarray) -> pa.Table:
    """report/token_counts.parquet's rows for a range: token_id, token (the tokenizer's string), count."""
    tokens = tokenizer.convert_ids_to_tokens([int(i) for i in ids]) if len(ids) else []
    return pa.Table.from_arrays(
        [pa.array(ids, type=pa.int64()), pa.array(tokens, type=pa.string()), pa.array(counts, type=pa.int64())],
        schema=TOKEN_COUNTS_SCHEMA,
    )

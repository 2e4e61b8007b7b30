"""Replica mode: every process holds the whole model and scores whole ranges.

The range loop is split into plain functions so that the benchmark's scoring step
(`bench/step.py`) runs exactly this code without a run folder:
`prepare_range` (tokenise, sort, cut, collate), `score_batches` (the model), and
`scored_ranges` (the two, with preparation ahead of the model where that pays).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from scorekeeper.boundary import Job, PrecisionChecked
from scorekeeper.errors import InputError
from scorekeeper.head_kind import HeadKind
from scorekeeper.run_folder import IndexRange, RunFolder
from scorekeeper.scoring_summary import PrecisionCheck
from scorekeeper.worker.batching import Batch, collate, count_of, cut_batches
from scorekeeper.worker.device import accelerator_path, cpu_batch_threads, default_tokens_per_batch, pin_host_memory
from scorekeeper.worker.embeddings import RangeSample, Representation, token_counts_table
from scorekeeper.worker.first_token import first_token_last_layer
from scorekeeper.worker.last_position import LastPositionLogits
from scorekeeper.worker.model import LoadedModel, first_error_line
from scorekeeper.worker.outputs import HeadOutputs, activate
from scorekeeper.worker.precision import PrecisionSample
from scorekeeper.worker.runtime import Ranks, claim, emit, prefetch
from scorekeeper.worker.shards import RangeCommits, StagedInput
from scorekeeper.worker.windows import RowLengths, WindowSettings, aggregate, encode_rows, with_lengths

log = logging.getLogger(__name__)


@dataclass
class PreparedRange:
    """A range read, tokenised and cut into collated batches, ready for the model."""

    range: IndexRange
    rows: pa.Table
    batches: list[Batch]
    truncated: int
    lengths: np.ndarray  # each row's token count as scored (its first window), row order
    rows_lengths: RowLengths  # each row's length before any cut, its windows; the range's long-text counts
    sample: RangeSample | None = None  # the rows whose representation is kept (embeddings.py)
    keeps: list[np.ndarray | None] | None = None  # per batch: its rows in the sample
    embeddings: pa.Table | None = None  # the sampled rows' representation, once scored

    @property
    def useful_tokens(self) -> int:
        return sum(b.useful_tokens for b in self.batches)

    @property
    def padded_tokens(self) -> int:
        return sum(b.padded_tokens for b in self.batches)


def prepare_range(
    r: IndexRange, rows: pa.Table, loaded: LoadedModel, tokens_per_batch: int, max_batch_rows: int, pin: bool
) -> PreparedRange:
    """Tokenise one range (one batched fast-tokenizer call), sort it by length and collate its batches."""
    texts = rows.column("text").to_pylist()
    pairs = rows.column("text_pair").to_pylist() if "text_pair" in rows.column_names else None
    settings = loaded.windows or WindowSettings("truncate", window=0)  # no frame: the tokenizer truncates
    encoded, lengths = encode_rows(loaded.tokenizer, texts, pairs, loaded.frame, settings, loaded.max_length, loaded.uses_token_type_ids)
    refuse_rows_without_tokens(lengths.tokens, rows)
    # A head that reads each row's last eos needs the same number of eos in every row of a batch:
    # a text holding the eos string is batched with its like, and read at its last eos as alone.
    groups = None if loaded.eos_head_token_id is None else count_of(encoded, loaded.eos_head_token_id)
    batches = [
        collate(encoded, positions, loaded.pad_token_id, pin_memory=pin)
        for positions in cut_batches(encoded.lengths, tokens_per_batch, max_batch_rows, groups)
    ]
    first_window = np.minimum(lengths.tokens, loaded.max_length) if pairs is None else encoded.lengths
    prepared = PreparedRange(r, rows, batches, encoded.truncated, first_window, lengths)
    if loaded.representation is not None:
        prepared.sample = sample = loaded.representation.sample(rows.column("row_index").to_numpy(), lengths.chunks)
        prepared.keeps = [sample.keep(b.positions) if sample else None for b in batches]
    return prepared


def refuse_rows_without_tokens(tokens: np.ndarray, rows: pa.Table, shown: int = 5) -> None:
    """A row the model would read no token of is refused, naming the range's first such rows: an
    empty text under a tokenizer that adds no special tokens around a text (GPT-2's, Qwen2's). Its
    batch row would be all padding, masked out, so its scores would come from the padding alone
    (transformers itself cannot score an empty input). A tokenizer that adds tokens gives an empty
    text at least those, and the model reads them as it reads any row."""
    empty = np.flatnonzero(tokens == 0)
    if not len(empty):
        return
    row_index = rows.column("row_index")
    named = ", ".join(str(row_index[int(i)].as_py()) for i in empty[:shown])
    more = f" (and {len(empty) - shown} more in its range)" if len(empty) > shown else ""
    raise InputError(
        f"row_index {named}{more}: no token for the model to read (an empty text, and this tokenizer adds no special "
        "tokens around a text), so a score would come from the padding alone: give these rows text or leave them out"
    )


def prepare_ranges(job: Job, ranks: Ranks, staged: StagedInput, loaded: LoadedModel) -> Iterator[PreparedRange]:
    """This process's ranges (claimed one at a time), read from the staged input and prepared."""
    budget = job.scoring.tokens_per_batch or default_tokens_per_batch(ranks.device)
    pin = pin_host_memory(ranks.device)
    for r in claim(job.ranges, ranks):
        yield prepare_range(r, staged.read(r), loaded, budget, job.scoring.max_batch_rows, pin)


def ahead_of_the_model(prepared: Iterable[PreparedRange], device: torch.device) -> Iterable[PreparedRange]:
    """Prepare ranges in a background thread on a GPU; inline on CPU.

    On a GPU the host is otherwise idle while the device computes, so tokenising the next range
    in a thread hides it. On CPU the batch threads already use every core: one more busy thread
    does not add compute, it only preempts them (bench/README.md: on 2 cores, `scorekeeper run`
    went from 100 to 121 rows/s when this thread was left out on CPU).
    """
    return prefetch(prepared, depth=2) if accelerator_path(device) else prepared


def _forward(model: torch.nn.Module, device: torch.device, batch: Batch, last_position: LastPositionLogits | None = None) -> torch.Tensor:
    """The batch's logits; with `last_position` (a decoder without a pad id of its own), each row's
    read at its last position, as transformers reads the row alone (last_position.py)."""
    with torch.inference_mode():  # thread-local: each batch thread enters it itself
        moved = batch.to(device, non_blocking=True)
        logits = model(**moved.model_inputs()).logits
        return logits if last_position is None else last_position.logits(moved.attention_mask)


def _forward_keeping(
    model: torch.nn.Module,
    device: torch.device,
    batch: Batch,
    representation: Representation | None,
    keep: np.ndarray | None,
    last_position: LastPositionLogits | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The batch's logits, and the representation of its sampled rows (on the device; None if none)."""
    if representation is None:
        return _forward(model, device, batch, last_position), None
    with torch.inference_mode():
        moved = batch.to(device, non_blocking=True)
        logits = model(**moved.model_inputs()).logits
        if last_position is not None:
            logits = last_position.logits(moved.attention_mask)
        return logits, representation.pooled(moved.input_ids, moved.attention_mask, keep)


@contextmanager
def batch_runner(device: torch.device) -> Iterator[ThreadPoolExecutor | None]:
    """A pool of batch threads on a multi-core CPU (None otherwise); intra-op threads are 1 meanwhile."""
    threads = cpu_batch_threads(device)
    if threads <= 1:
        yield None
        return
    intra_op = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="scorekeeper-batch") as pool:
            yield pool
    finally:
        torch.set_num_threads(intra_op)


def score_batches(
    model: torch.nn.Module,
    batches: list[Batch],
    rows: int,
    num_labels: int,
    device: torch.device,
    head: HeadKind = HeadKind.SINGLE_LABEL,
    chunks: np.ndarray | None = None,
    how: str = "mean",
    last_position: LastPositionLogits | None = None,
) -> np.ndarray:
    """The head's outputs (float64: softmax, sigmoid or the raw values of the logits) for every row
    of a range, in row order. With `chunks` (windows per row), the batches hold windows, and each
    row's windows' raw outputs are aggregated (`how`) before the activation. `last_position`: the
    loaded model's (LoadedModel.last_position), for a decoder without a pad id of its own.

    Logits stay on the device until the range is done and come back in one copy: a copy per
    batch would make the device wait for the host before every batch.
    """
    return _probabilities(
        batches, [_forward(model, device, batch, last_position) for batch in batches], rows, num_labels, head, chunks, how
    )


def _probabilities(
    batches: list[Batch],
    logits: list[torch.Tensor],
    rows: int,
    num_labels: int,
    head: HeadKind,
    chunks: np.ndarray | None = None,
    how: str = "mean",
) -> np.ndarray:
    probabilities = np.empty((rows, num_labels), dtype=np.float64)
    if not batches:
        return probabilities
    order = np.concatenate([batch.positions for batch in batches])
    with torch.inference_mode():
        if chunks is None or len(order) == rows:  # a window a row: the row's own logits
            probabilities[order] = activate(head, torch.cat(logits)).cpu().numpy()
            return probabilities
        raw = np.empty((len(order), num_labels), dtype=np.float64)
        raw[order] = torch.cat(logits).double().cpu().numpy()
        return activate(head, torch.from_numpy(aggregate(raw, chunks, how))).numpy()


def scored_ranges(
    prepared: Iterable[PreparedRange], loaded: LoadedModel, device: torch.device
) -> Iterator[tuple[PreparedRange, np.ndarray]]:
    """Each prepared range with its probabilities (rows x labels, row order); with a representation
    to keep, the range's `embeddings` are set too.

    With batch threads (multi-core CPU), the next range is prepared and its batches queued
    behind this range's before this range's results are awaited: the threads never wait at a
    range boundary, neither for the last (shortest) batches of a range nor for the next range's
    tokenisation, which runs meanwhile on this thread.
    """
    num_labels, head = len(loaded.labels), loaded.head
    how = loaded.windows.aggregate if loaded.windows is not None else "mean"
    representation = loaded.representation

    def run(p: PreparedRange, k: int):
        keep = p.keeps[k] if p.keeps is not None else None
        return loaded.model, device, p.batches[k], representation, keep, loaded.last_position

    with batch_runner(device) as pool:
        if pool is None:
            for p in ahead_of_the_model(prepared, device):
                yield _finished(p, [_forward_keeping(*run(p, k)) for k in range(len(p.batches))], num_labels, head, how)
            return
        in_flight: tuple[PreparedRange, list[Future]] | None = None
        for p in prepared:
            queued = (p, [pool.submit(_forward_keeping, *run(p, k)) for k in range(len(p.batches))])
            if in_flight is not None:
                yield _finished(in_flight[0], [f.result() for f in in_flight[1]], num_labels, head, how)
            in_flight = queued
        if in_flight is not None:
            yield _finished(in_flight[0], [f.result() for f in in_flight[1]], num_labels, head, how)


def _finished(
    p: PreparedRange, outs: list[tuple[torch.Tensor, torch.Tensor | None]], num_labels: int, head: HeadKind, how: str
) -> tuple[PreparedRange, np.ndarray]:
    probabilities = _probabilities(p.batches, [logits for logits, _ in outs], p.range.rows, num_labels, head, p.rows_lengths.chunks, how)
    if p.sample is not None and p.keeps is not None:
        for batch, keep, (_, pooled) in zip(p.batches, p.keeps, outs):
            if pooled is not None and keep is not None:
                p.sample.add(batch.positions[keep], pooled.float().cpu().numpy())
        p.embeddings = p.sample.table(p.rows)
    return p, probabilities


def run_replica(job: Job, ranks: Ranks, run: RunFolder, loaded: LoadedModel, reference: Callable[[], LoadedModel] | None = None) -> None:
    """Score and commit this process's ranges. With `reference` (a reduced dtype: it loads the
    float32 model), a sample of the rows is scored again with it and the check is sent."""
    if first_token_last_layer(loaded.model) and ranks.is_main:
        log.info("the last layer runs for the classifier's first token only")
    staged = StagedInput(run)
    outputs = HeadOutputs.of(loaded.head, loaded.labels, job.scoring.thresholds)
    sample = PrecisionSample(job.precision_check_rows if reference else 0, job.total_rows)
    with RangeCommits(run, job, ranks.rank, attempt=f"{job.attempt}-r{ranks.rank}") as commits:
        for prepared, probabilities in scored_ranges(prepare_ranges(job, ranks, staged, loaded), loaded, ranks.device):
            commits.submit(
                prepared.range,
                with_lengths(outputs.table(prepared.rows, probabilities), prepared.rows_lengths, loaded.windows),
                tokens=prepared.useful_tokens,
                padded_tokens=prepared.padded_tokens,
                truncated=prepared.truncated,
                long_text=prepared.rows_lengths.counts,
                embeddings=prepared.embeddings,
                token_counts=token_counts_table(loaded.tokenizer, prepared.rows_lengths.token_ids, prepared.rows_lengths.token_counts),
            )
            sample.keep(prepared.range, prepared.rows, prepared.lengths, probabilities)
    if reference is not None and sample.ranges:
        dtype = str(next(loaded.model.parameters()).dtype).removeprefix("torch.")
        # Every range is committed: the reduced model is dropped before the float32 one is loaded,
        # so the check needs the float32 model's memory, not both models' at once.
        loaded.model = None  # type: ignore[assignment]
        try:
            check = check_precision(job, ranks, loaded, dtype, sample, reference())
        except torch.OutOfMemoryError as exc:  # the run's outputs stand; the check says why it is missing
            log.warning("precision check skipped: the float32 model does not fit on %s (%s)", ranks.device, first_error_line(exc)[:200])
            check = PrecisionCheck(dtype=dtype, rows=0, skipped=f"the float32 model does not fit on {ranks.device}")
        emit(PrecisionChecked(rank=ranks.rank, check=check))


def check_precision(
    job: Job, ranks: Ranks, loaded: LoadedModel, dtype: str, sample: PrecisionSample, reference: LoadedModel
) -> PrecisionCheck:
    """The sample's committed values against the float32 model's. Each range's sampled rows are
    prepared and scored as a range of their own, by the same code as every range (batches cut
    from those rows alone, a batch per core on CPU): the reference does not depend on which
    process checks them, nor on how many there are."""
    budget = job.scoring.tokens_per_batch or default_tokens_per_batch(ranks.device)
    prepared = (
        prepare_range(IndexRange(r.index, r.start, r.start + rows.num_rows), rows, reference, budget, job.scoring.max_batch_rows, pin=False)
        for r, rows, _ in sample.ranges
    )
    values = [v for _, v in scored_ranges(prepared, reference, ranks.device)]
    return sample.check(dtype, loaded.head, loaded.labels, job.scoring.thresholds, values)

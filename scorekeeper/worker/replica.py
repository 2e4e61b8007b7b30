"""Replica mode: every process holds the whole model and scores whole ranges."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from scorekeeper.storage import Location
from scorekeeper.worker.batching import Batch, collate, cut_batches, encode
from scorekeeper.worker.job import IndexRange, Job
from scorekeeper.worker.model import LoadedModel
from scorekeeper.worker.runtime import Ranks, claim, default_tokens_per_batch, emit, prefetch
from scorekeeper.worker.shards import StagedInput, commit_shard, prediction_table

log = logging.getLogger(__name__)


@dataclass
class PreparedRange:
    """A range read, tokenised and cut into collated batches, ready for the model."""

    range: IndexRange
    rows: pa.Table
    batches: list[Batch]
    truncated: int


def prepare_ranges(job: Job, ranks: Ranks, staged: StagedInput, loaded: LoadedModel) -> Iterator[PreparedRange]:
    budget = job.request.tokens_per_batch or default_tokens_per_batch(ranks.device)
    pin = ranks.device.type == "cuda"
    for r in claim(job.ranges, ranks):
        rows = staged.read(r)
        texts = rows.column("text").to_pylist()
        pairs = rows.column("text_pair").to_pylist() if "text_pair" in rows.column_names else None
        encoded = encode(loaded.tokenizer, texts, pairs, loaded.max_length, loaded.uses_token_type_ids)
        batches = [
            collate(encoded, positions, loaded.pad_token_id, pin_memory=pin)
            for positions in cut_batches(encoded.lengths, budget, job.request.max_batch_rows)
        ]
        yield PreparedRange(r, rows, batches, encoded.truncated)


@torch.inference_mode()
def score_batches(model: torch.nn.Module, batches: list[Batch], rows: int, num_labels: int, device: torch.device) -> np.ndarray:
    """Probabilities (softmax in float64 of the logits) for every row of a range, in row order."""
    probabilities = np.empty((rows, num_labels), dtype=np.float64)
    for batch in batches:
        on_device = batch.to(device, non_blocking=True)
        logits = model(**on_device.model_inputs()).logits
        probabilities[batch.positions] = torch.softmax(logits.double(), dim=-1).cpu().numpy()
    return probabilities


def run_replica(job: Job, ranks: Ranks, run: Location, loaded: LoadedModel) -> None:
    staged = StagedInput(run)
    attempt = f"{job.attempt}-r{ranks.rank}"
    writes: list[Future] = []
    started = time.time()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scorekeeper-commit") as writer:
        for prepared in prefetch(prepare_ranges(job, ranks, staged, loaded), depth=2):
            probabilities = score_batches(
                loaded.model, prepared.batches, prepared.range.rows, len(loaded.labels), ranks.device
            )
            table = prediction_table(prepared.rows, probabilities, loaded.labels)
            useful = sum(b.useful_tokens for b in prepared.batches)
            padded = sum(b.padded_tokens for b in prepared.batches)
            writes.append(
                writer.submit(
                    _commit_and_report, run, prepared.range, table, job, attempt, ranks.rank,
                    useful, padded, prepared.truncated, started,
                )
            )
            # Surface a failed commit early instead of scoring on.
            for done in [w for w in writes if w.done()]:
                done.result()
        for w in writes:
            w.result()


def _commit_and_report(run, r, table, job, attempt, rank, useful, padded, truncated, started) -> None:
    committed = commit_shard(
        run, r, table, scoring_fingerprint=job.scoring_fingerprint, attempt=attempt, tokens=useful, truncated=truncated
    )
    emit(
        "range_done",
        rank=rank,
        range=r.index,
        rows=r.rows,
        tokens=useful,
        padded_tokens=padded,
        truncated=truncated,
        committed=committed,
        elapsed=time.time() - started,
    )

"""Reading a range's rows from the staged input, and committing a range's predictions as one shard.

The staged input is a Parquet file whose row group k holds exactly range k, so a process reads
only its own rows. A shard is published first under a name unique to this attempt; the commit
record, created exclusively afterwards, is what makes it count. A process killed between the two
leaves an orphan shard that nothing refers to, never a half-counted range.
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from scorekeeper.boundary import Job, RangeDone
from scorekeeper.errors import ModelError
from scorekeeper.long_text import LongTextCounts
from scorekeeper.representation import EMBEDDINGS_PARQUET
from scorekeeper.run_folder import CommitRecord, IndexRange, PartSeal, RunFolder, row_index_checksum
from scorekeeper.worker.runtime import emit

FAULT_AFTER_RANGES_ENV = "SCOREKEEPER_FAULT_AFTER_RANGES"
"""Debug option for failure testing: with N in this variable, each scoring process exits (code
FAULT_EXIT_CODE) right after its N-th commit, before reporting it, as a machine that dies mid-job
would. The flow fails; a rerun (or a Prefect retry) resumes from the committed ranges. The
docs/failure-modes.md, "Failure testing", shows its use; tests/test_deployments.py relies on it."""
FAULT_EXIT_CODE = 17


class StagedInput:
    """The staged input of a run, opened once per process."""

    def __init__(self, run: RunFolder):
        self._file = pq.ParquetFile(run.fs.open(run.join(RunFolder.STAGED_INPUT), "rb"))
        self.columns = set(self._file.schema_arrow.names)

    def read(self, r: IndexRange) -> pa.Table:
        wanted = [c for c in ("row_index", "id", "text", "text_pair") if c in self.columns]
        table = self._file.read_row_group(r.index, columns=wanted)
        row_index = table.column("row_index").to_numpy()
        if table.num_rows != r.rows or row_index[0] != r.start or row_index[-1] != r.end - 1:
            raise RuntimeError(f"staged row group {r.index} does not hold rows [{r.start}, {r.end})")
        return table


def prediction_table(rows: pa.Table, probabilities: np.ndarray, labels: list[str]) -> pa.Table:
    """The prediction columns (docs/contracts.md, section 3) for one range, in row order."""
    predicted = probabilities.argmax(axis=1)
    n, k = probabilities.shape
    flat = pa.array(probabilities.reshape(-1), type=pa.float64())
    offsets = pa.array(np.arange(0, (n + 1) * k, k, dtype=np.int32))
    return pa.table(
        {
            "row_index": rows.column("row_index"),
            "id": rows.column("id"),
            "predicted_id": pa.array(predicted.astype(np.int64)),
            "predicted_label": pa.array(np.asarray(labels, dtype=object)[predicted], type=pa.string()),
            "score": pa.array(probabilities[np.arange(n), predicted], type=pa.float64()),
            "probabilities": pa.ListArray.from_arrays(offsets, flat),
        }
    )


def non_finite_rows(table: pa.Table) -> np.ndarray:
    """The positions of the rows holding a NaN or an infinity in any floating-point column (a
    list of them included: the probabilities)."""
    bad = np.zeros(table.num_rows, dtype=bool)
    for column in table.columns:
        column = column.combine_chunks()
        rows = None
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or pa.types.is_fixed_size_list(column.type):
            if not pa.types.is_floating(column.type.value_type):
                continue  # a multi-label head's predicted_labels: names, not scores
            rows = pc.list_parent_indices(column).to_numpy()
            column = pc.list_flatten(column)
        elif not pa.types.is_floating(column.type):
            continue
        values = column.to_numpy(zero_copy_only=False)
        flagged = ~np.isfinite(values)
        bad[rows[flagged] if rows is not None else flagged] = True
    return np.flatnonzero(bad)


def refuse_non_finite(r: IndexRange, table: pa.Table) -> None:
    """Every score is finite, or nothing of the range is committed: NaN weights, or a dtype whose
    range the logits overflow, give NaN or infinite scores, and a prediction made from them means
    nothing. The job fails naming the first such rows, before their range is committed, so the
    flow publishes nothing (evaluation never sees them)."""
    bad = non_finite_rows(table)
    if len(bad):
        first = ", ".join(str(i) for i in table.column("row_index").to_numpy()[bad[:5]])
        raise ModelError(
            f"the model's scores are not finite (NaN or infinite) for {len(bad)} of the {table.num_rows} rows of range {r.index}, "
            f"first row_index {first}: its weights hold NaN or infinite values, or its logits overflow the dtype "
            "(try dtype=float32). Nothing was published"
        )


def commit_shard(
    run: RunFolder,
    r: IndexRange,
    table: pa.Table,
    *,
    scoring_fingerprint: str,
    attempt: str,
    tokens: int,
    truncated: int,
    long_text: LongTextCounts | None = None,
    embeddings: pa.Table | None = None,
    token_counts: pa.Table | None = None,
) -> bool:
    """Publish the shard (and the files committed with it), then create its commit record; False if
    the range was committed already."""
    shard = RunFolder.shard_name(r.index, attempt)
    data = parquet_bytes(table)
    run.publish_bytes(data, shard)
    parts = {
        part: publish_part(run, RunFolder.shard_name(r.index, attempt, part), content)
        for part, content in (("embeddings", embeddings), ("token_counts", token_counts))
        if content is not None
    }
    record = CommitRecord(
        range_index=r.index,
        start=r.start,
        end=r.end,
        rows=table.num_rows,
        row_index_sha256=row_index_checksum(table.column("row_index").to_numpy()),
        shard=shard,
        scoring_fingerprint=scoring_fingerprint,
        tokens=tokens,
        truncated=truncated,
        attempt=attempt,
        long_text=long_text,
        shard_sha256=hashlib.sha256(data).hexdigest(),
        shard_bytes=len(data),
        **parts,
    )
    if run.create_commit(record):
        return True
    for name in record.files():
        run.remove(name)  # another attempt committed this range first; ours is not needed
    return False


def parquet_bytes(table: pa.Table, **options) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **({"compression": "zstd"} | options))
    return sink.getvalue().to_pybytes()


def publish_part(run: RunFolder, name: str, table: pa.Table) -> PartSeal:
    """Publish a file committed with a shard; its seal goes into the commit record."""
    data = parquet_bytes(table, **(EMBEDDINGS_PARQUET if name.endswith(".embeddings.parquet") else {}))
    run.publish_bytes(data, name)
    return PartSeal(name=name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), rows=table.num_rows)


class RangeCommits:
    """A process's scored ranges, each committed as one shard and then reported to the flow (a
    `range_done` event), in the order they were scored.

    One background thread writes them: Parquet encoding and storage I/O stay off the model's
    critical path (they are a small fraction of a range's time, so they do not compete much). A
    failed commit raises at the next `submit`, instead of scoring on, or on leaving the block.
    """

    def __init__(self, run: RunFolder, job: Job, rank: int, attempt: str):
        self.run, self.job, self.rank, self.attempt = run, job, rank, attempt
        self.started = time.time()
        self.committed = 0
        self.fault_after = int(os.environ.get(FAULT_AFTER_RANGES_ENV) or 0)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scorekeeper-commit")
        self._writes: list[Future] = []

    def __enter__(self) -> RangeCommits:
        return self

    def __exit__(self, exc_type, *_) -> None:
        self._writer.shutdown(wait=True)
        if exc_type is None:
            for w in self._writes:
                w.result()

    def submit(
        self,
        r: IndexRange,
        table: pa.Table,
        *,
        tokens: int,
        padded_tokens: int,
        truncated: int,
        long_text: LongTextCounts | None = None,
        embeddings: pa.Table | None = None,
        token_counts: pa.Table | None = None,
    ) -> None:
        """Commit and report a scored range in the background (refused here, before anything of it
        is written, if a score is not finite)."""
        refuse_non_finite(r, table)
        if embeddings is not None:
            refuse_non_finite(r, embeddings)
        parts = {"embeddings": embeddings, "token_counts": token_counts}
        self._writes.append(self._writer.submit(self._commit, r, table, tokens, padded_tokens, truncated, long_text, parts))
        for done in [w for w in self._writes if w.done()]:
            done.result()
            self._writes.remove(done)

    def _commit(
        self,
        r: IndexRange,
        table: pa.Table,
        tokens: int,
        padded_tokens: int,
        truncated: int,
        long_text: LongTextCounts | None,
        parts: dict[str, pa.Table | None],
    ) -> None:
        committed = commit_shard(
            self.run, r, table, scoring_fingerprint=self.job.scoring_fingerprint, attempt=self.attempt, tokens=tokens,
            truncated=truncated, long_text=long_text, **parts,
        )  # fmt: skip
        if committed:
            self.committed += 1
            if self.fault_after and self.committed >= self.fault_after:
                os._exit(FAULT_EXIT_CODE)
        emit(
            RangeDone(
                rank=self.rank, range=r.index, rows=r.rows, tokens=tokens, padded_tokens=padded_tokens,
                truncated=truncated, committed=committed, elapsed=time.time() - self.started,
            )
        )  # fmt: skip

"""Reading a range's rows from the staged input, and committing a range's predictions as one shard.

The staged input is a Parquet file whose row group k holds exactly range k, so a process reads
only its own rows. A shard is published first under a name unique to this attempt; the commit
record, created exclusively afterwards, is what makes it count. A process killed between the two
leaves an orphan shard that nothing refers to, never a half-counted range.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.run_folder import CommitRecord, RunFolder, row_index_checksum
from scorekeeper.worker.job import IndexRange

# Fault injection for tests: SCOREKEEPER_FAULT_AFTER_RANGES=N makes a process die right after its
# N-th commit, as a crashed or preempted machine would (tests/test_deployments.py retries such a run).
_FAULT_AFTER_RANGES = int(os.environ.get("SCOREKEEPER_FAULT_AFTER_RANGES") or 0)
_commits_here = 0


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


def commit_shard(
    run: RunFolder,
    r: IndexRange,
    table: pa.Table,
    *,
    scoring_fingerprint: str,
    attempt: str,
    tokens: int,
    truncated: int,
) -> bool:
    """Publish the shard, then create its commit record; False if the range was committed already."""
    shard = RunFolder.shard_name(r.index, attempt)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    run.publish_bytes(sink.getvalue().to_pybytes(), shard)
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
    )
    if run.create_commit(record):
        _after_commit()
        return True
    run.remove(shard)  # another attempt committed this range first; ours is not needed
    return False


def _after_commit() -> None:
    global _commits_here
    _commits_here += 1
    if _FAULT_AFTER_RANGES and _commits_here >= _FAULT_AFTER_RANGES:
        os._exit(17)

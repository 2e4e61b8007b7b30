"""Gather: prove that the committed shards tile [0, n) exactly once, then stream them into
predictions.parquet in row order; the ranges' sampled embeddings into embeddings.parquet and their
token counts, summed, into work/token_counts.parquet (SPEC 14; the report publishes it).

Nothing is exchanged between processes: the commit records are the whole truth. A gap, an
overlap or a shard whose rows differ from its record fails the run and names the ranges; a shard
that is missing or fails its record's checksum also withdraws that record, so a rerun scores the
range again (the plan withdraws those whose shard is missing or of another size before scoring).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from pydantic import BaseModel, ConfigDict

from scorekeeper.errors import GatherError
from scorekeeper.long_text import LongTextCounts
from scorekeeper.redact import raises_redacted
from scorekeeper.representation import EMBEDDINGS_PARQUET, TOKEN_COUNTS_SCHEMA, embeddings_schema
from scorekeeper.run_folder import CommitRecord, PartSeal, RunFolder, row_index_checksum
from scorekeeper.tasks.memory import release_memory
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.plan import committed_ranges, withdraw_commit
from scorekeeper.tasks.retries import IO_RETRIES

log = logging.getLogger(__name__)

_SHOWN = 5


def tiling_problems(spans: Sequence[tuple[int, int]], total_rows: int) -> list[str]:
    """What keeps [start, end) spans from covering [0, total_rows) exactly once; empty if nothing."""
    problems = []
    position = 0
    for start, end in sorted(spans):
        if end <= start:
            problems.append(f"empty or reversed range [{start}, {end})")
            continue
        if start > position:
            problems.append(f"rows [{position}, {start}) have no prediction")
        elif start < position:
            problems.append(f"rows [{start}, {min(end, position)}) are predicted more than once")
        position = max(position, end)
    if position < total_rows:
        problems.append(f"rows [{position}, {total_rows}) have no prediction")
    if position > total_rows:
        problems.append(f"rows [{total_rows}, {position}) are beyond the input's {total_rows} rows")
    return problems


class Gathered(BaseModel):
    """What the gather step wrote and found: the rows of predictions.parquet, the committed ranges,
    their tokens and truncated rows, every range's long-text counts summed (metrics.json
    `scoring.long_text`, None when a range did not count them) and SPEC 14's parts (the rows of
    embeddings.parquet and the token counts' rows, None when a range wrote none)."""

    model_config = ConfigDict(frozen=True)

    rows: int
    ranges: int
    tokens: int
    truncated: int
    long_text: LongTextCounts | None = None
    embeddings: int | None = None
    token_counts: int | None = None


def gather_predictions(run: RunFolder, total_rows: int, scoring_fingerprint: str) -> Gathered:
    """Verify every commit, then publish predictions.parquet sorted by row_index."""
    records = sorted(committed_ranges(run, scoring_fingerprint).values(), key=lambda r: r.start)
    problems = tiling_problems([(r.start, r.end) for r in records], total_rows)
    if problems:
        raise GatherError(f"the committed ranges do not cover the input exactly once: {'; '.join(problems[:_SHOWN])}")
    if not records:  # only zero rows tile with no range: a predictions file needs one shard's schema
        raise GatherError(f"no committed range to gather: the input has {total_rows} rows")
    fd, local = tempfile.mkstemp(prefix="scorekeeper-predictions-", suffix=".parquet")
    os.close(fd)
    writer: pq.ParquetWriter | None = None
    tokens = truncated = 0
    try:
        for record in records:
            table = _read_verified_shard(run, record)
            if writer is None:
                writer = pq.ParquetWriter(local, table.schema, compression="zstd")
            elif table.schema != writer.schema:
                table = table.cast(writer.schema)
            writer.write_table(table)
            tokens += record.tokens
            truncated += record.truncated
        assert writer is not None, "at least one record was written"
        id_type = writer.schema.field("id").type
        writer.close()
        writer = None
        run.publish_local_file(local, RunFolder.PREDICTIONS)
    finally:
        if writer is not None:
            writer.close()
        os.unlink(local)
    long_text = long_text_of(records)
    parts = gather_parts(run, records, id_type, long_text)
    return Gathered(rows=total_rows, ranges=len(records), tokens=tokens, truncated=truncated, long_text=long_text, **parts)


def gather_parts(run: RunFolder, records: Sequence[CommitRecord], id_type: pa.DataType, long_text: LongTextCounts | None) -> dict:
    """SPEC 14's files from the ranges' parts: embeddings.parquet (the sampled rows, row order) and
    the token counts summed over every range (work/, published with the report). Nothing when a
    range was committed by a version that wrote no parts: they would hold some ranges only."""
    if any(r.token_counts is None for r in records):
        log.warning("a committed range has no token counts (committed by an earlier version): no embeddings.parquet, no token counts")
        return {"embeddings": None, "token_counts": None}
    fd, local = tempfile.mkstemp(prefix="scorekeeper-embeddings-", suffix=".parquet")
    os.close(fd)
    embedded = 0
    counts = np.zeros(0, dtype=np.int64)
    names: dict[int, str] = {}
    try:
        with pq.ParquetWriter(local, embeddings_schema(id_type), **EMBEDDINGS_PARQUET) as writer:
            for record in records:
                if record.embeddings is not None:
                    table = _read_verified_part(run, record, record.embeddings)
                    row_index = table.column("row_index").to_numpy()
                    if len(row_index) and (row_index[0] < record.start or row_index[-1] >= record.end or np.any(np.diff(row_index) <= 0)):
                        raise GatherError(
                            f"{record.embeddings.name} holds rows outside range [{record.start}, {record.end}) or out of order"
                        )
                    writer.write_table(table.cast(writer.schema))
                    embedded += table.num_rows
                assert record.token_counts is not None, "checked above"
                words = _read_verified_part(run, record, record.token_counts)
                ids, seen = words.column("token_id").to_numpy(), words.column("count").to_numpy()
                if len(ids) and ids.max() >= len(counts):
                    counts = np.concatenate([counts, np.zeros(int(ids.max()) + 1 - len(counts), dtype=np.int64)])
                np.add.at(counts, ids, seen)
                names.update(zip(ids.tolist(), words.column("token").to_pylist()))
        run.publish_local_file(local, RunFolder.EMBEDDINGS)
    finally:
        os.unlink(local)
    ids = np.flatnonzero(counts)
    total = int(counts.sum())
    if long_text is not None and total != long_text.tokens_content:
        raise GatherError(f"the ranges' token counts sum to {total:,} content tokens, their lengths to {long_text.tokens_content:,}")
    table = pa.Table.from_arrays(
        [pa.array(ids, type=pa.int64()), pa.array([names[int(i)] for i in ids], type=pa.string()), pa.array(counts[ids])],
        schema=TOKEN_COUNTS_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    run.publish_bytes(sink.getvalue().to_pybytes(), RunFolder.TOKEN_COUNTS_WORK)
    return {"embeddings": embedded, "token_counts": len(ids)}


def _read_vouched(run: RunFolder, record: CommitRecord, name: str, what: str, sha256: str | None) -> bytes:
    """The bytes of a file committed with a range (`what`: its shard, or a file beside it), as its
    commit record vouches for them (sha256 None: a record too old to hold one); else the record is
    withdrawn, so a rerun scores the range again."""
    try:
        data = run.read_bytes(name)
    except FileNotFoundError:
        withdraw_commit(run, record, f"its {what} {name} is missing")
        raise GatherError(
            f"range {record.range_index} [{record.start}, {record.end}) is committed but its {what} {name} is missing: "
            "its commit record is withdrawn; rerun with the same run name to score the range again"
        ) from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        withdraw_commit(run, record, f"its {what} {name} fails its checksum")
        raise GatherError(
            f"range {record.range_index} [{record.start}, {record.end}): its {what} {name} is not the file its commit "
            "record vouches for (sha256 differs): the record is withdrawn; rerun with the same run name to score the range again"
        )
    return data


def _read_verified_part(run: RunFolder, record: CommitRecord, part: PartSeal) -> pa.Table:
    """A file committed with a range's shard, as its commit record vouches for it."""
    table = pq.read_table(pa.BufferReader(_read_vouched(run, record, part.name, "file", part.sha256)))
    if table.num_rows != part.rows:
        raise GatherError(f"{part.name} holds {table.num_rows} rows, its commit record says {part.rows}")
    return table


def long_text_of(records: Sequence[CommitRecord]) -> LongTextCounts | None:
    """metrics.json `scoring.long_text`: every committed range's counts summed (this attempt's and
    earlier ones'), so they hold for all rows; None when a range was committed by a version that
    did not count them."""
    if any(r.long_text is None for r in records):
        return None
    return LongTextCounts.summed(r.long_text for r in records if r.long_text is not None)


def _read_verified_shard(run: RunFolder, record: CommitRecord):
    data = _read_vouched(run, record, record.shard, "shard", record.shard_sha256)
    table = pq.read_table(pa.BufferReader(data))
    row_index = table.column("row_index").to_numpy()
    expected = np.arange(record.start, record.end, dtype=np.int64)
    if (
        table.num_rows != record.rows
        or record.rows != record.end - record.start
        or not np.array_equal(row_index, expected)
        or row_index_checksum(row_index) != record.row_index_sha256
    ):
        raise GatherError(f"shard {record.shard} does not hold exactly rows [{record.start}, {record.end}) as its commit record says")
    return table


@task(name="gather predictions", **IO_RETRIES)
@raises_redacted
def gather_task(context: RunContext, job) -> Gathered:
    """Prove the committed ranges tile the rows exactly once, then write predictions.parquet."""
    gathered = gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)
    release_memory(job.total_rows)  # the shards' pages, before the evaluation's DuckDB connection takes its limit
    return gathered

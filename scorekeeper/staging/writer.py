"""The staged file's writer: row groups of exactly `rows_per_group` rows, so range k is row group k."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


class RowGroupWriter:
    """Writes exactly `rows_per_group` rows per row group, whatever sizes the batches come in."""

    def __init__(self, path: str, rows_per_group: int):
        self.path = path
        self.rows_per_group = rows_per_group
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema, compression="zstd")
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.rows += table.num_rows
        while self.pending_rows >= self.rows_per_group:
            self._flush(self.rows_per_group)

    def _flush(self, rows: int) -> None:
        assert self.writer is not None, "write() opens it before anything is pending"
        merged = pa.concat_tables(self.pending).combine_chunks()
        self.writer.write_table(merged.slice(0, rows), row_group_size=rows)
        rest = merged.slice(rows)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def close(self) -> None:
        if self.pending_rows:
            self._flush(self.pending_rows)
        if self.writer is not None:
            self.writer.close()

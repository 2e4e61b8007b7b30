"""One input file as a stream of record batches, and its read errors as one line naming the file."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from scorekeeper.errors import InputError
from scorekeeper.run_folder import InputFile
from scorekeeper.staging.listing import compression
from scorekeeper.storage import fs_and_path

BATCH_ROWS = 65536
READ_BUFFER_BYTES = 1 << 20
# What pyarrow and the filesystems raise on a file that is not what its name says.
READ_ERRORS = (pa.ArrowException, OSError, ValueError, UnicodeDecodeError, EOFError)


def _open_batches(f: InputFile, string_columns: list[str], columns: list[str] | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A file's schema and its record batches, streamed (Parquet reads only `columns`)."""
    fs, path = fs_and_path(f.uri)
    if f.format == "parquet":
        handle = fs.open(path, "rb")
        # pre_buffer (pyarrow's default) keeps every row group's buffers until the reader is
        # dropped: the process grew by the file's size (3M rows: +150 MB). A buffered stream
        # reads each column chunk a page at a time, so a file written as one huge row group
        # streams too.
        parquet = pq.ParquetFile(handle, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        schema = parquet.schema_arrow
        wanted = [c for c in columns if c in schema.names] if columns is not None else None
        return schema, parquet.iter_batches(batch_size=BATCH_ROWS, columns=wanted)
    codec = compression(path)
    if codec == "zstd":
        handle = pa.CompressedInputStream(pa.PythonFile(fs.open(path, "rb"), mode="r"), "zstd")
    else:
        handle = fs.open(path, "rb", compression=codec)
    if f.format == "csv":
        reader = pacsv.open_csv(
            handle,
            read_options=pacsv.ReadOptions(block_size=1 << 22),
            # A quoted cell may hold line breaks (reviews often do). Without this, pyarrow cuts its
            # 4 MiB blocks at any line break and refuses the file once a cut lands inside a cell.
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in string_columns}),
        )
    else:
        reader = pajson.open_json(handle, read_options=pajson.ReadOptions(block_size=1 << 22))
    return reader.schema, iter(reader)


def open_or_explain(
    f: InputFile, string_columns: list[str], columns: list[str] | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """`_open_batches`, a file pyarrow cannot read refused in one line naming it."""
    try:
        return _open_batches(f, string_columns, columns)
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {f.uri}: {_short(exc)}") from None


def batches_or_explain(f: InputFile, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, a read error met midway refused in one line naming the file."""
    try:
        yield from batches
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {f.uri}: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

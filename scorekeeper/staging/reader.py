"""One input file as a stream of record batches, and its read errors as one line naming the file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from scorekeeper.errors import InputError
from scorekeeper.run_folder import InputFile
from scorekeeper.staging.columns import SAVE_AS_UTF8, first_invalid_utf8
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
        schema, batches = _open_batches(f, string_columns, columns)
    except READ_ERRORS as exc:
        raise InputError(_explain(f, exc, None)) from None
    try:
        # pyarrow decodes a CSV header's names only when they are asked for: a Latin-1 header raised
        # its UnicodeDecodeError later, outside every refusal (a traceback, exit 1).
        schema.names
    except UnicodeDecodeError:
        shape = _wrong_shape(f) or (f"its header (the column names) is not valid UTF-8 text; {SAVE_AS_UTF8}")
        raise InputError(f"cannot read {f.uri}: {shape}") from None
    return schema, _with_schema(batches, schema)


class _Batches(Iterator[pa.RecordBatch]):
    """A file's batches that remember the file's schema (to name a column in a read error)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema):
        self._batches, self.schema = batches, schema

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)


def _with_schema(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    return _Batches(batches, schema)


def batches_or_explain(f: InputFile, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, a read error met midway refused in one line naming the file (and, for text
    that is not UTF-8, the column by name and the file's first row that holds it)."""
    try:
        yield from batches
    except READ_ERRORS as exc:
        raise InputError(_explain(f, exc, getattr(batches, "schema", None))) from None


_CSV_COLUMN = re.compile(r"CSV column #(\d+)")


def _explain(f: InputFile, exc: BaseException, schema: pa.Schema | None) -> str:
    """One line for a read error: pyarrow's words, but a CSV column by its name (pyarrow numbers
    them from 0) and, for invalid UTF-8, the first row of the file that holds it."""
    text = _short(exc)
    shape = _wrong_shape(f)
    if shape is not None:
        return f"cannot read {f.uri}: {shape}"
    if f.format == "csv" and text.startswith(_CSV_PARSE_ERROR):
        return f"cannot read {f.uri}: {_parse_error(f, text)}"
    found = _CSV_COLUMN.search(text)
    names = (schema.names if schema is not None else _csv_header(f)) if found is not None and f.format == "csv" else []
    if found is None or int(found.group(1)) >= len(names):
        return f"cannot read {f.uri}: {text}"
    column = names[int(found.group(1))]
    if "UTF8" not in text:
        return f"cannot read {f.uri}: column '{column}': {text[found.end() :].lstrip(': ')}"
    row = _first_invalid_utf8_row(f, column)
    at = f" at its row {row} (from 1, the header not counted)" if row is not None else ""
    return f"cannot read {f.uri}: column '{column}' is not valid UTF-8 text{at}; {SAVE_AS_UTF8}"


_CSV_PARSE_ERROR = "CSV parse error: "


def _parse_error(f: InputFile, text: str) -> str:
    """pyarrow's words for a row it cannot split ("Expected 3 columns, got 4: <the row's start>"),
    with the row's place in the file: pyarrow numbers rows only when it reads on one thread, so the
    file is read again so."""
    what = re.sub(r"^Row #\d+: ", "", text.removeprefix(_CSV_PARSE_ERROR))
    number = _first_unsplit_csv_row(f)
    at = f" at its row {number} (from 1, the header not counted)" if number is not None else ""
    return f"CSV parse error{at}: {what}"


def _first_unsplit_csv_row(f: InputFile) -> int | None:
    """The file's first data row (from 1) that pyarrow cannot split into the header's columns."""
    found: list[int] = []

    def first(row) -> str:
        if row.number is not None:
            found.append(row.number - 1)  # pyarrow counts the header as row 1 (and a quoted line break as none)
        return "error"

    try:
        with _decompressed(f) as source:
            for _ in pacsv.open_csv(
                source,
                read_options=pacsv.ReadOptions(use_threads=False, block_size=1 << 22),
                parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=first),
                # every column as bytes: nothing is converted or validated, only split into rows
                convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(_csv_header(f), pa.binary())),
            ):
                pass
    except READ_ERRORS:
        pass
    return found[0] if found else None


def _wrong_shape(f: InputFile) -> str | None:
    """What a file that pyarrow cannot read is instead, where its first bytes say it: UTF-16 text
    (Excel's "Unicode text"; pyarrow said "Expected 2 columns, got 1"), or a JSON array in a JSON
    Lines file (pyarrow said "Column() changed from object to array in row 0")."""
    if f.format == "parquet":
        return None
    head = _first_bytes(f, 4096)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "it is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8"
    if f.format == "jsonl" and head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        return "it holds a JSON array, not JSON Lines: write one JSON object per line"
    return None


@contextmanager
def _decompressed(f: InputFile) -> Iterator:
    """A text file's bytes as a stream, decompressed, for reading it again to explain a read error."""
    fs, path = fs_and_path(f.uri)
    codec = compression(path)
    with fs.open(path, "rb", compression=None if codec == "zstd" else codec) as handle:
        yield pa.CompressedInputStream(pa.PythonFile(handle, mode="r"), "zstd") if codec == "zstd" else handle


def _first_bytes(f: InputFile, n: int) -> bytes:
    """A file's first `n` bytes, decompressed; b"" when they cannot be read."""
    try:
        with _decompressed(f) as source:
            return bytes(source.read(n))
    except (OSError, ValueError, EOFError, pa.ArrowException):
        return b""


def _csv_header(f: InputFile) -> list[str]:
    """A CSV file's column names, from its first line (a read error can come before pyarrow has a schema)."""
    import csv

    try:
        with _decompressed(f) as source:
            line = source.readline() if hasattr(source, "readline") else b""
        return next(csv.reader([line.decode("utf-8", errors="replace")]), [])
    except (OSError, ValueError, pa.ArrowException, StopIteration):
        return []


def _first_invalid_utf8_row(f: InputFile, column: str) -> int | None:
    """The file's first data row (from 1) whose `column` is not valid UTF-8: the column read again as bytes."""
    try:
        with _decompressed(f) as source:
            reader = pacsv.open_csv(
                source,
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(include_columns=[column], column_types={column: pa.binary()}),
            )
            seen = 0
            for batch in reader:
                i = first_invalid_utf8(batch.column(0).to_pylist())
                if i is not None:
                    return seen + i + 1
                seen += batch.num_rows
    except READ_ERRORS:
        return None
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

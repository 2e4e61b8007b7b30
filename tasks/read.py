"""Read and validate the input files, and stage them once as one Parquet file of fixed row groups.

The input order is fixed here (files sorted by full path, rows in file order) and every row gets
its `row_index`. Staging renames the user's columns to canonical ones (row_index, id, text,
text_pair, label, slice_*), so no user-supplied name ever reaches SQL, and writes row groups of
exactly `rows_per_range` rows, so range k is row group k and a scoring process reads only its
rows. Everything streams: no step holds the whole dataset.
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
from prefect import task

from scorekeeper.errors import InputError, RunConflict
from scorekeeper.params import STAGING_PARAMETERS, ScoreRequest
from scorekeeper.redact import redact_uri
from scorekeeper.run_folder import InputFile, RunFolder, StagedGroundTruth, StagedManifest
from scorekeeper.storage import Location, digest_of, file_fingerprint, fs_and_path, to_uri
from scorekeeper.tasks.retries import IO_RETRIES
from scorekeeper.tasks.runlog import run_logger

log = logging.getLogger(__name__)

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Compressed text files, by suffix: fsspec's codec name (gzip, bz2, lzma: the standard library), or
# pyarrow's own zstd codec (fsspec has one only when the optional zstandard package is installed).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".zstd": "zstd"}
_BATCH_ROWS = 65536
_SHOWN = 5  # offending rows named in a message


def compression(path: str) -> str | None:
    """The codec a file name asks for (.csv.gz -> gzip), or None."""
    return COMPRESSIONS.get(posixpath.splitext(path.lower())[1])


def _sibling_runs(fs, output_root: str, paths: list[str]) -> list[str]:
    """Folders directly under output_root that hold a run (its request.json or work/ folder)."""
    root = output_root.rstrip("/")
    firsts = {p[len(root) + 1 :].split("/", 1)[0] for p in paths if p.startswith(root + "/") and "/" in p[len(root) + 1 :]}
    return [
        f"{root}/{c}"
        for c in sorted(firsts)
        if fs.exists(f"{root}/{c}/{RunFolder.REQUEST}") or fs.isdir(f"{root}/{c}/{RunFolder.WORK_DIR}")
    ]


def file_format(path: str) -> str | None:
    name = path.lower()
    if compression(name):
        name = posixpath.splitext(name)[0]
    return FORMATS.get(posixpath.splitext(name)[1])


def _hidden(path: str) -> bool:
    # Spark/Hadoop markers (_SUCCESS, .crc) and dot-files are not data.
    return any(part.startswith((".", "_")) for part in path.split("/")[-1:])


def list_input_files(uri: str, what: str = "input", exclude: Location | None = None) -> list[InputFile]:
    """The files a URI names: a file, a folder/prefix (recursively) or a glob; sorted by full path.

    Files under `exclude` (the run's own folder, when output_uri lies inside the input folder) are
    not input: the run would otherwise read its own lease, staged input and predictions. Nor are
    the files of other runs beside it (folders under the same output_uri holding a run's
    request.json or work/): an earlier run's predictions are not rows of this one."""
    fs, path = fs_and_path(uri)
    if any(ch in path for ch in "*?["):
        paths = [p for p in fs.glob(path) if fs.isfile(p)]
        if not paths:
            raise InputError(f"{what} not found: no file matches {uri}")
    elif fs.isdir(path):
        paths = [p for p in fs.find(path) if not _hidden(p)]
        if not paths:
            raise InputError(f"{what} not found: the folder {uri} holds no files")
    elif fs.isfile(path):
        paths = [path]
    else:
        raise InputError(f"{what} not found: {uri}")
    if exclude is not None and type(exclude.fs) is type(fs):
        own = exclude.path.rstrip("/")
        runs = (own, *_sibling_runs(fs, posixpath.dirname(own), paths))
        inside = [p for p in paths if any(p == r or p.startswith(r + "/") for r in runs)]
        if inside:
            run_logger(__name__).warning(
                "%s %s: skipping %d file(s) of scorekeeper runs under %s",
                what,
                redact_uri(uri),
                len(inside),
                redact_uri(posixpath.dirname(exclude.uri.rstrip("/"))),
            )
            paths = [p for p in paths if p not in set(inside)]
            if not paths:
                raise InputError(f"{what} not found: {redact_uri(uri)} holds no files outside the run folders of output_uri")
    unsupported = [p for p in paths if file_format(p) is None]
    if unsupported:
        raise InputError(
            f"{what} {uri}: unsupported file type for {', '.join(to_uri(fs, p) for p in unsupported[:_SHOWN])}"
            " (expected .parquet, .csv, .jsonl/.ndjson/.json; .csv and .jsonl optionally .gz, .bz2, .xz or .zst)"
        )
    packed = [p for p in paths if file_format(p) == "parquet" and compression(p)]
    if packed:
        raise InputError(
            f"{what} {uri}: compressed Parquet file {to_uri(fs, packed[0])}; Parquet compresses its own pages: "
            "give the .parquet file itself"
        )
    files = []
    for p in sorted(paths, key=lambda p: to_uri(fs, p)):
        info = fs.info(p)
        files.append(
            InputFile(uri=to_uri(fs, p), size=int(info.get("size") or 0), format=file_format(p), fingerprint=file_fingerprint(fs, p, info))
        )
    return files


def _open_batches(f: InputFile, string_columns: list[str], columns: list[str] | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A file's schema and its record batches, streamed (Parquet reads only `columns`)."""
    fs, path = fs_and_path(f.uri)
    if f.format == "parquet":
        handle = fs.open(path, "rb")
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        wanted = [c for c in columns if c in schema.names] if columns is not None else None
        return schema, parquet.iter_batches(batch_size=_BATCH_ROWS, columns=wanted)
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


@dataclass
class _Columns:
    """Which user column becomes which canonical column."""

    mapping: dict[str, str]  # canonical -> user column
    required: list[str]

    @classmethod
    def for_input(cls, request: ScoreRequest, has_label: bool) -> _Columns:
        mapping = {"text": request.text_column}
        if request.text_pair_column:
            mapping["text_pair"] = request.text_pair_column
        if request.id_column:
            mapping["id"] = request.id_column
        if has_label and request.ground_truth_uri is None and request.label_column:
            mapping["label"] = request.label_column
        for i, name in enumerate(request.slice_columns):
            mapping[f"slice_{i}"] = name
        return cls(mapping, list(mapping.values()))


def _is_text(t: pa.DataType) -> bool:
    """Arrow's text types: string, large_string and string_view (Polars and DuckDB write the last)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _empty_cells_null(column: pa.Array) -> pa.Array:
    """A CSV's empty cell is a missing value, in a text column as in a number column.

    pyarrow reads an empty cell of an integer column as null but of a text column as "": without
    this, an empty label cell in a column of label names became an unknown label "" counted as an
    error (and an empty id the id ""), while the same cell among integer labels was left out.
    Applied to ids, labels and slice columns; the text columns keep "" (an empty text is scored)."""
    if not _is_text(column.type):
        return column
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)


def _normalise(canonical: str, column: pa.ChunkedArray | pa.Array, where: str, user_name: str, first_row: int | None = None) -> pa.Array:
    """Cast a column to the canonical type family, or explain why it cannot be.

    `first_row` is the row_index of the column's first value, to name offending rows by."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = column.type
    if canonical in ("text", "text_pair") or canonical.startswith("slice_"):
        if _is_text(t):
            return column.cast(pa.string())
        if canonical.startswith("slice_"):
            if pa.types.is_nested(t) or pa.types.is_union(t):
                raise InputError(
                    f"slice column '{user_name}' in {where} is {t}: slice columns must hold single values "
                    "(text, numbers, booleans, dates), not structs, lists or maps"
                )
            return column.cast(pa.string())
        if pa.types.is_null(t):
            return column.cast(pa.string())
        raise InputError(f"column '{user_name}' in {where} is {t}, not text")
    # ids and labels keep their own type family: integers, or strings
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return _to_int64(column, canonical, where, user_name, first_row)
    if _is_text(t):
        return column.cast(pa.string())
    if pa.types.is_floating(t) and canonical == "label":
        # Integer labels written through pandas with missing values arrive as floats, and the
        # missing values as NaN where the writer kept NumPy's spelling (Polars, pa.array(ndarray)).
        import pyarrow.compute as pc

        column = pc.if_else(pc.is_nan(column), pa.scalar(None, t), column)
        valid = pc.drop_null(column)
        if len(valid) and not pc.all(pc.equal(pc.floor(valid), valid)).as_py():
            raise InputError(f"label column '{user_name}' in {where} holds non-integer numbers")
        return _to_int64(column, canonical, where, user_name, first_row)
    if pa.types.is_null(t):
        return column.cast(pa.string())
    if canonical == "id":
        raise InputError(f"id column '{user_name}' in {where} is {t}; ids must be integers or strings")
    raise InputError(f"label column '{user_name}' in {where} is {t}; labels must be names or integer ids")


_INT64_MAX = 2**63 - 1


def _to_int64(column, canonical: str, where: str, user_name: str, first_row: int | None) -> pa.Array:
    """Integers are stored as int64; a uint64 (or float) value beyond its range is refused, not wrapped."""
    try:
        return column.cast(pa.int64())
    except (pa.ArrowInvalid, OverflowError):
        pass
    values = column.to_pylist()
    position = next(i for i, v in enumerate(values) if v is not None and not -_INT64_MAX - 1 <= v <= _INT64_MAX)
    at = f" (first at row_index {first_row + position})" if first_row is not None else ""
    raise InputError(
        f"{canonical} column '{user_name}' in {where} holds {int(values[position])}{at}, beyond the 64-bit signed integers "
        f"{canonical}s are stored as; write the {canonical}s as text"
    )


class _RowGroupWriter:
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


@dataclass
class StagedInput:
    """What reading found: the staged file, row count, and facts later steps need."""

    files: list[InputFile]
    total_rows: int
    local_path: str
    has_label: bool
    label_type: str | None
    id_type: str
    has_text_pair: bool
    null_text_rows: int
    slice_columns: list[str] = field(default_factory=list)

    def manifest(self, staging_key: str, ground_truth: StagedGroundTruth | None) -> StagedManifest:
        return StagedManifest(
            files=[f.redacted() for f in self.files],
            total_rows=self.total_rows,
            has_label=self.has_label,
            label_type=self.label_type,
            id_type=self.id_type,
            has_text_pair=self.has_text_pair,
            null_text_rows=self.null_text_rows,
            slice_columns=self.slice_columns,
            staging_key=staging_key,
            ground_truth=ground_truth,
        )


def stage_input(request: ScoreRequest, files: list[InputFile], workdir: str) -> StagedInput:
    """Validate every input row and write the staged Parquet file into `workdir`."""
    first_schema, _ = _read_or_explain(files[0], [], [])
    has_label = (
        request.label_column is not None
        and request.ground_truth_uri is None
        and (request.label_column in first_schema.names or request.label_column != "label")
    )
    columns = _Columns.for_input(request, has_label)
    # Columns a CSV file gives as text, whatever they look like: ids keep their spelling (`007` is
    # not 7). JSON Lines and Parquet carry their own types and keep them.
    text_names = [c for k, c in columns.mapping.items() if k in ("text", "text_pair", "id") or k.startswith("slice_")]
    target = os.path.join(workdir, "input.parquet")
    out = _RowGroupWriter(target, request.rows_per_range)
    offset = 0
    null_rows: list[int] = []
    null_count = 0
    types: dict[str, tuple[pa.DataType, str]] = {}
    for f in files:
        schema, batches = _read_or_explain(f, text_names, columns.required)
        missing = [c for c in columns.required if c not in schema.names]
        if missing:
            raise InputError(
                f"column {', '.join(repr(c) for c in missing)} not found in {f.uri}; its columns are: {', '.join(schema.names)}"
            )
        for batch in _batches_or_explain(f, batches):
            n = batch.num_rows
            if n == 0:
                continue
            out_columns = {"row_index": pa.array(range(offset, offset + n), type=pa.int64())}
            for canonical, user in columns.mapping.items():
                column = batch.column(user)
                if f.format == "csv" and canonical not in ("text", "text_pair"):
                    column = _empty_cells_null(column)
                out_columns[canonical] = _normalise(canonical, column, f.uri, user, offset)
            if "id" not in out_columns:
                out_columns["id"] = out_columns["row_index"]
            for canonical in ("id", "label"):
                if canonical in out_columns:
                    _check_type(types, canonical, out_columns[canonical].type, f.uri, columns.mapping.get(canonical, "row index"))
            if out_columns["id"].null_count and "id" in columns.mapping:
                bad = [offset + i for i, v in enumerate(out_columns["id"].is_null().to_pylist()) if v][:_SHOWN]
                raise InputError(f"id column '{request.id_column}' is null at row_index {', '.join(map(str, bad))} ({f.uri})")
            for canonical in ("text", "text_pair"):
                col = out_columns.get(canonical)
                if col is not None and col.null_count:
                    null_count += col.null_count
                    if len(null_rows) < _SHOWN:
                        null_rows += [offset + i for i, v in enumerate(col.is_null().to_pylist()) if v][: _SHOWN - len(null_rows)]
                    if request.null_text == "empty":
                        import pyarrow.compute as pc

                        out_columns[canonical] = pc.fill_null(col, "")
            order = ["row_index", "id", "text", "text_pair", "label"] + [f"slice_{i}" for i in range(len(request.slice_columns))]
            out.write(pa.table({k: out_columns[k] for k in order if k in out_columns}))
            offset += n
    out.close()
    if offset == 0:
        raise InputError(f"no rows in the input {request.input_uri}")
    if null_count and request.null_text == "error":
        raise InputError(
            f"column '{request.text_column if not request.text_pair_column else request.text_column + '/' + request.text_pair_column}'"
            f" is null in {null_count} row(s); first row_index: {', '.join(map(str, null_rows))}. "
            "Pass null_text='empty' (--null-text empty) to score them as empty strings"
        )
    return StagedInput(
        files=files,
        total_rows=offset,
        local_path=target,
        has_label=has_label,
        label_type=str(types["label"][0]) if "label" in types else None,
        id_type=str(types["id"][0]),
        has_text_pair=request.text_pair_column is not None,
        null_text_rows=null_count,
        slice_columns=list(request.slice_columns),
    )


def stage_ground_truth(request: ScoreRequest, files: list[InputFile], workdir: str) -> tuple[str, str]:
    """Stage ground-truth files (id, label) for the join; returns the local path and the id type."""
    target = os.path.join(workdir, "ground_truth.parquet")
    writer = None
    types: dict[str, tuple[pa.DataType, str]] = {}
    rows = 0
    try:
        for f in files:
            schema, batches = _read_or_explain(f, [request.id_column], [request.id_column, request.label_column])
            missing = [c for c in (request.id_column, request.label_column) if c not in schema.names]
            if missing:
                raise InputError(
                    f"column {', '.join(repr(c) for c in missing)} not found in ground truth {f.uri}; "
                    f"its columns are: {', '.join(schema.names)}"
                )
            for batch in _batches_or_explain(f, batches):
                ids, labels = batch.column(request.id_column), batch.column(request.label_column)
                if f.format == "csv":
                    ids, labels = _empty_cells_null(ids), _empty_cells_null(labels)
                ids = _normalise("id", ids, f.uri, request.id_column)
                labels = _normalise("label", labels, f.uri, request.label_column)
                _check_type(types, "id", ids.type, f.uri, request.id_column)
                _check_type(types, "label", labels.type, f.uri, request.label_column)
                if ids.null_count:
                    raise InputError(f"id column '{request.id_column}' has null values in ground truth {f.uri}")
                table = pa.table({"id": ids, "label": labels})
                if writer is None:
                    writer = pq.ParquetWriter(target, table.schema, compression="zstd")
                writer.write_table(table)
                rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if rows == 0:
        raise InputError(f"no rows in the ground truth {request.ground_truth_uri}")
    return target, str(types["id"][0])


def _check_type(types: dict, canonical: str, t: pa.DataType, where: str, user: str) -> None:
    seen = types.setdefault(canonical, (t, where))
    if seen[0] != t:
        raise InputError(f"schemas differ across files: column '{user}' is {_family(seen[0])} in {seen[1]} but {_family(t)} in {where}")


def _family(t: pa.DataType) -> str:
    return "integer" if pa.types.is_integer(t) else "text" if pa.types.is_string(t) else str(t)


def _read_or_explain(
    f: InputFile, string_columns: list[str], columns: list[str] | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    try:
        return _open_batches(f, string_columns, columns)
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read {f.uri}: {_short(exc)}") from None


def _batches_or_explain(f: InputFile, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read {f.uri}: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def new_workdir() -> str:
    return tempfile.mkdtemp(prefix="scorekeeper-stage-")


def first_duplicate_ids(parquet_path: str, limit: int = _SHOWN) -> list[tuple]:
    """(id, count, first position) of duplicated ids, first by position; DuckDB, out of core.
    In the staged input a row's position in the file is its row_index."""
    from scorekeeper.tasks import duck

    with duck.connect() as con:
        return con.execute(
            "SELECT id, count(*) AS n, min(file_row_number) AS first FROM read_parquet(?, file_row_number = true) "
            "GROUP BY id HAVING count(*) > 1 ORDER BY first LIMIT ?",
            [parquet_path, limit],
        ).fetchall()


def staging_key(request: ScoreRequest, files: list[InputFile], truth_files: list[InputFile] = ()) -> str:
    """What the staged input depends on: the input (and ground-truth) files' fingerprints and every
    parameter that declares it affects staging (params.STAGING_PARAMETERS)."""
    return digest_of(
        [
            [f.redacted().model_dump() for f in files],
            {k: v for k, v in request.public_dict().items() if k in STAGING_PARAMETERS},
            [f.redacted().model_dump() for f in truth_files],
        ]
    )


def read_inputs(request: ScoreRequest, run: RunFolder) -> StagedManifest:
    """List, fingerprint, validate and stage the input (and ground truth); reuse an earlier staging
    of the same files with the same staging parameters. Returns the staged manifest.

    The ground truth is fingerprinted like the input: when it changed since an earlier attempt it
    is staged again and the run is evaluated against it (the predictions do not depend on it)."""
    import shutil

    from scorekeeper.tasks.open_run import has_commits

    files = list_input_files(request.input_uri, exclude=run)
    truth_files = list_input_files(request.ground_truth_uri, "ground truth", exclude=run) if request.ground_truth_uri else []
    key = staging_key(request, files, truth_files)
    earlier = run.read_manifest()
    if earlier is not None:
        if earlier.staging_key == key and run.exists(RunFolder.STAGED_INPUT):
            log.info("input already staged for this run (%d rows); reusing it", earlier.total_rows)
            return earlier
        changed = _changed(earlier.files, files)
        if changed and has_commits(run):
            raise RunConflict(
                f"the input changed since run '{posixpath.basename(run.path)}' started "
                f"({', '.join(changed[:_SHOWN])}); choose another run_name to score it"
            )
        truth_changed = _changed(earlier.ground_truth.files if earlier.ground_truth else [], truth_files)
        if truth_changed and not changed and earlier.ground_truth and truth_files:
            run_logger(__name__).warning(
                "the ground truth changed since the last attempt of run '%s' (%s): evaluating against it as it is now; "
                "the committed predictions are reused (they do not depend on it)",
                posixpath.basename(run.path),
                ", ".join(truth_changed[:_SHOWN]),
            )
        # Same files, other evaluation settings (labels, ground truth, slices): stage them again;
        # the rows and their order are the same, so committed shards stay valid. (Changed files
        # with nothing committed yet: the earlier attempt left nothing to protect.)
    workdir = new_workdir()
    try:
        staged = stage_input(request, files, workdir)
        if request.id_column:
            dupes = first_duplicate_ids(staged.local_path)
            if dupes:
                shown = "; ".join(f"{i!r} x{n} (first at row_index {first})" for i, n, first in dupes)
                raise InputError(f"id column '{request.id_column}' has duplicate values: {shown}")
        ground_truth = None
        if request.ground_truth_uri:
            gt_path, gt_id_type = stage_ground_truth(request, truth_files, workdir)
            dupes = first_duplicate_ids(gt_path)
            if dupes:
                shown = "; ".join(f"{i!r} x{n}" for i, n, _ in dupes)
                raise InputError(f"ground truth has duplicate ids in '{request.id_column}': {shown}")
            ground_truth = StagedGroundTruth(files=[f.redacted() for f in truth_files], id_type=gt_id_type)
            run.publish_local_file(gt_path, RunFolder.STAGED_GROUND_TRUTH)
        manifest = staged.manifest(key, ground_truth)
        run.publish_local_file(staged.local_path, RunFolder.STAGED_INPUT)
        run.publish_manifest(manifest)
        return manifest
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _changed(earlier: list[InputFile], now: list[InputFile]) -> list[str]:
    """URIs of files added, removed or changed in content since an earlier listing (as recorded: redacted)."""
    old = {f.uri: f.fingerprint for f in earlier}
    new = {r.uri: r.fingerprint for r in (f.redacted() for f in now)}
    return sorted(u for u in set(old) | set(new) if old.get(u) != new.get(u))


@task(name="read inputs", **IO_RETRIES)
def read_inputs_task(request: ScoreRequest, context) -> StagedManifest:
    """Validate, count, fingerprint and stage the input rows (and the ground truth)."""
    return read_inputs(request, context.run)

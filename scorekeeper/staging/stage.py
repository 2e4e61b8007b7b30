"""Staging itself: every input row validated and written once, with its row_index, as canonical columns.

`stage_input` writes work/input.parquet (row group k = range k), `stage_ground_truth` the
ground-truth files' (id, label) pairs; `staging_key` is what decides whether an earlier staging
can be reused.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from scorekeeper.errors import InputError, NoInput
from scorekeeper.head_kind import HeadKind
from scorekeeper.params import STAGING_PARAMETERS, ScoreRequest
from scorekeeper.run_folder import InputFile, StagedGroundTruth, StagedManifest
from scorekeeper.staging.columns import ColumnMap, check_type, check_utf8, empty_cell_is_missing, empty_cells_null, is_text, normalise
from scorekeeper.staging.listing import SHOWN, Partitions
from scorekeeper.staging.reader import batches_or_explain, open_or_explain
from scorekeeper.staging.truth_kinds import label_columns_truth, stage_truth, staged_head
from scorekeeper.staging.writer import RowGroupWriter
from scorekeeper.storage import digest_of


@dataclass
class LocalStaging:
    """What staging wrote into its local work folder, and the facts later steps need, before it
    is published into the run folder (as work/input.parquet and the manifest)."""

    files: list[InputFile]
    total_rows: int
    local_path: str
    has_label: bool
    label_type: str | None
    id_type: str
    has_text_pair: bool
    null_text_rows: int
    slice_columns: list[str] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)  # rows staged from each file, in order

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


def stage_input(request: ScoreRequest, files: list[InputFile], workdir: str, partitions: Partitions | None = None) -> LocalStaging:
    """Validate every input row and write the staged Parquet file into `workdir`. `partitions` are
    the listing's hive partition columns: a column named by the request may be one. The request's
    `head` (resolved from the model) decides the ground truth's staged form (truth_kinds.py)."""
    partitions = partitions or Partitions()
    head = staged_head(request)
    first_schema, _ = open_or_explain(files[0], [], [])
    has_label = _has_label(request, first_schema, partitions.of(files[0].uri))
    columns = ColumnMap.for_input(request.model_copy(update={"label_column": None}) if request.label_columns else request, has_label)
    columns.required += request.label_columns
    # Columns a CSV file gives as text, whatever they look like: ids keep their spelling (`007` is
    # not 7), and a multi-label cell its delimited names. JSON Lines and Parquet keep their own types.
    text_names = [
        c
        for k, c in columns.mapping.items()
        if k in ("text", "text_pair", "id") or k.startswith("slice_") or (k == "label" and head == HeadKind.MULTI_LABEL)
    ]
    target = os.path.join(workdir, "input.parquet")
    out = RowGroupWriter(target, request.rows_per_range)
    staged = _Staged()
    for f in files:
        staged.file_rows.append(0)
        schema, batches = open_or_explain(f, text_names, columns.required)
        available = _check_columns(f, schema, columns.required, partitions.of(f.uri))
        if not has_label and f is not files[0]:
            _check_no_label_beyond_the_first(request, files[0], f, schema, partitions.of(f.uri))
        for batch in batches_or_explain(f, batches):
            if batch.num_rows:
                out.write(_stage_batch(request, head, columns, f, batch, available, partitions, staged))
    out.close()
    if staged.rows == 0:
        raise NoInput(f"no rows in the input {request.input_uri}")
    if staged.null_count and request.null_text == "error":
        raise InputError(
            f"column '{request.text_column if not request.text_pair_column else request.text_column + '/' + request.text_pair_column}'"
            f" is null in {staged.null_count} row(s); first row_index: {', '.join(map(str, staged.null_rows))}. "
            "Pass null_text='empty' (--null-text empty) to score them as empty strings"
        )
    return LocalStaging(
        files=files,
        total_rows=staged.rows,
        local_path=target,
        has_label=has_label,
        label_type=str(staged.types["label"][0]) if "label" in staged.types else None,
        id_type=str(staged.types["id"][0]),
        has_text_pair=request.text_pair_column is not None,
        null_text_rows=staged.null_count,
        slice_columns=list(request.slice_columns),
        file_rows=staged.file_rows,
    )


def _has_label(request: ScoreRequest, first_schema: pa.Schema, first_partition: dict) -> bool:
    """Whether the input holds the ground truth: label columns, or a label column while no
    ground_truth_uri is given, named by the request or found in the first file or its folder's partitions."""
    if request.label_columns:
        return True
    if request.label_column is None or request.ground_truth_uri is not None:
        return False
    return request.label_column in first_schema.names or request.label_column in first_partition or request.label_column != "label"


def _check_no_label_beyond_the_first(request: ScoreRequest, first: InputFile, f: InputFile, schema: pa.Schema, partition: dict) -> None:
    """A run whose first file has no `label` column is a scoring-only run (`_has_label`); a later
    file holding one is refused, as a later file lacking it is when the first has it: its labels
    were ignored and the run said the input had none (exit 0, "scoring only")."""
    label = request.label_column
    if label is None or request.ground_truth_uri is not None or request.label_columns:
        return
    if label in schema.names or label in partition:
        raise InputError(
            f"column '{label}' is in {f.uri} but not in {first.uri}: give the ground truth in every file or in none, "
            "or pass label_column=None (--label-column none) to score only"
        )


@dataclass
class _Staged:
    """What staging has seen so far: rows, rows per file, the null texts, the id and label types."""

    rows: int = 0
    file_rows: list[int] = field(default_factory=list)
    null_count: int = 0
    null_rows: list[int] = field(default_factory=list)  # the first SHOWN row indexes of null texts
    types: dict[str, tuple[pa.DataType, str]] = field(default_factory=dict)


def _refuse_a_repeated_header(f: InputFile, batch, names: list[str], first_row: int) -> None:
    """A CSV row whose every column read holds that column's own name is the header again (files
    joined with `cat`, each with its header), not data: it would be scored, and its `label` counted
    as an unknown label. Refused naming its row; a file of one column read cannot tell it from data."""
    if len(names) < 2 or not all(is_text(batch.schema.field(c).type) for c in names):
        return
    # the copy may keep its file's byte order mark before its first name (Excel writes one)
    same = functools.reduce(pc.and_, [pc.fill_null(pc.is_in(batch.column(c), pa.array([c, "\ufeff" + c])), False) for c in names])
    found = pc.index(same, True).as_py()
    if found >= 0:
        raise InputError(
            f"cannot read {f.uri}: its row {first_row + found} (from 1, the header not counted) repeats the header "
            f"({', '.join(names)}): files joined with their headers? Remove that line, or keep the files apart in a folder"
        )


def _stage_batch(
    request: ScoreRequest,
    head: str,
    columns: ColumnMap,
    f: InputFile,
    batch,
    available: dict[str, str],
    partitions: Partitions,
    staged: _Staged,
) -> pa.Table:
    """One batch of file `f` as staged rows (its canonical columns, validated), counted into `staged`."""
    n, offset = batch.num_rows, staged.rows
    if f.format == "csv":
        _refuse_a_repeated_header(f, batch, [c for c in columns.required if available.get(c) == "file"], staged.file_rows[-1] + 1)
    out_columns = {"row_index": pa.array(range(offset, offset + n), type=pa.int64())}
    for canonical, user in columns.mapping.items():
        column = batch.column(user) if available[user] == "file" else partitions.column(f.uri, user, n)
        check_utf8(column, f.uri, user, offset, staged.file_rows[-1] + 1)
        if canonical == "label":
            out_columns[canonical] = stage_truth(head, request, column, f.uri, user, offset, f.format == "csv")
            continue
        if f.format == "csv" and empty_cell_is_missing(canonical):
            column = empty_cells_null(column)
        out_columns[canonical] = normalise(canonical, column, f.uri, user, offset)
    if request.label_columns:
        out_columns["label"] = label_columns_truth(
            [batch.column(c) if available[c] == "file" else partitions.column(f.uri, c, n) for c in request.label_columns],
            request.label_columns,
            f.uri,
            offset,
        )
    if "id" not in out_columns:
        out_columns["id"] = out_columns["row_index"]
    for canonical in ("id", "label"):
        if canonical in out_columns:
            check_type(staged.types, canonical, out_columns[canonical].type, f.uri, columns.mapping.get(canonical, "row index"))
    if out_columns["id"].null_count and "id" in columns.mapping:
        bad = [offset + i for i, v in enumerate(out_columns["id"].is_null().to_pylist()) if v][:SHOWN]
        raise InputError(f"id column '{request.id_column}' is null at row_index {', '.join(map(str, bad))} ({f.uri})")
    texts = [out_columns[c] for c in ("text", "text_pair") if c in out_columns]
    null = texts[0].is_null() if len(texts) == 1 else pc.or_(texts[0].is_null(), texts[1].is_null())
    nulls = pc.sum(null).as_py() or 0
    if nulls:  # rows, each once, whichever of its texts is null
        staged.null_count += nulls
        if len(staged.null_rows) < SHOWN:
            staged.null_rows += [offset + i for i, v in enumerate(null.to_pylist()) if v][: SHOWN - len(staged.null_rows)]
        if request.null_text == "empty":
            for canonical in ("text", "text_pair"):
                if canonical in out_columns:
                    out_columns[canonical] = pc.fill_null(out_columns[canonical], "")
    order = ["row_index", "id", "text", "text_pair", "label"] + [f"slice_{i}" for i in range(len(request.slice_columns))]
    staged.rows += n
    staged.file_rows[-1] += n
    return pa.table({k: out_columns[k] for k in order if k in out_columns})


def _check_columns(f: InputFile, schema: pa.Schema, required: list[str], partition: dict, what: str = "") -> dict[str, str]:
    """Where each required column comes from, "file" or "folder" (a hive partition); InputError for
    a column found nowhere, twice in the file's header, or both in the file and in its folder names."""
    repeated = sorted({c for c in required if schema.names.count(c) > 1})
    if repeated:
        at = "; ".join(f"'{c}' is columns {', '.join(str(i + 1) for i, n in enumerate(schema.names) if n == c)}" for c in repeated)
        raise InputError(f"column names repeat in {f.uri}: {at}; give each column a name of its own")
    both = [c for c in required if c in schema.names and c in partition]
    if both:
        raise InputError(
            f"column '{both[0]}' is both a column of {f.uri} and a folder name above it ({both[0]}={partition[both[0]]}): "
            "rename one of them"
        )
    missing = [c for c in required if c not in schema.names and c not in partition]
    if missing:
        found = ", ".join(schema.names) + (f" (and from its folders: {', '.join(partition)})" if partition else "")
        raise InputError(f"column {', '.join(repr(c) for c in missing)} not found in {what}{f.uri}; its columns are: {found}")
    return {c: "file" if c in schema.names else "folder" for c in required}


def stage_ground_truth(
    request: ScoreRequest, files: list[InputFile], workdir: str, partitions: Partitions | None = None
) -> tuple[str, str, list[int]]:
    """Stage ground-truth files (id, label) for the join; returns the local path, the id type and
    each file's rows (a staged row's position is its place over the files, in their order)."""
    partitions = partitions or Partitions()
    head = staged_head(request)
    id_column, label_column = request.id_column, request.label_column
    assert id_column is not None and label_column is not None, "ScoreRequest requires both with a ground_truth_uri"
    target = os.path.join(workdir, "ground_truth.parquet")
    writer = None
    types: dict[str, tuple[pa.DataType, str]] = {}
    rows = 0
    rows_per_file: list[int] = []
    try:
        for f in files:
            wanted = [id_column, label_column]
            as_text = [id_column] + ([label_column] if head == HeadKind.MULTI_LABEL else [])
            schema, batches = open_or_explain(f, as_text, wanted)
            available = _check_columns(f, schema, wanted, partitions.of(f.uri), "ground truth ")
            file_rows = 0
            for batch in batches_or_explain(f, batches):
                ids, labels = (batch.column(c) if available[c] == "file" else partitions.column(f.uri, c, batch.num_rows) for c in wanted)
                for user, column in ((id_column, ids), (label_column, labels)):
                    check_utf8(column, f.uri, user, None, file_rows + 1)
                file_rows += batch.num_rows
                if f.format == "csv":
                    ids = empty_cells_null(ids)
                ids = normalise("id", ids, f.uri, id_column)
                labels = stage_truth(head, request, labels, f.uri, label_column, None, f.format == "csv")
                check_type(types, "id", ids.type, f.uri, id_column)
                check_type(types, "label", labels.type, f.uri, label_column)
                if ids.null_count:
                    raise InputError(f"id column '{id_column}' has null values in ground truth {f.uri}")
                table = pa.table({"id": ids, "label": labels})
                if writer is None:
                    writer = pq.ParquetWriter(target, table.schema, compression="zstd")
                writer.write_table(table)
                rows += table.num_rows
            rows_per_file.append(file_rows)
    finally:
        if writer is not None:
            writer.close()
    if rows == 0:
        raise InputError(f"no rows in the ground truth {request.ground_truth_uri}")
    return target, str(types["id"][0]), rows_per_file


def new_workdir() -> str:
    return tempfile.mkdtemp(prefix="scorekeeper-stage-")


def staging_key(request: ScoreRequest, files: list[InputFile], truth_files: Sequence[InputFile] = ()) -> str:
    """What the staged input depends on: the input (and ground-truth) files' fingerprints and every
    parameter that declares it affects staging (params.STAGING_PARAMETERS)."""
    return digest_of(
        [
            [f.redacted().model_dump() for f in files],
            {k: v for k, v in request.public_dict().items() if k in STAGING_PARAMETERS},
            [f.redacted().model_dump() for f in truth_files],
        ]
    )


def changed_files(earlier: list[InputFile], now: list[InputFile]) -> list[str]:
    """URIs of files added, removed or changed in content since an earlier listing (as recorded: redacted)."""
    old = {f.uri: f.fingerprint for f in earlier}
    new = {r.uri: r.fingerprint for r in (f.redacted() for f in now)}
    return sorted(u for u in set(old) | set(new) if old.get(u) != new.get(u))

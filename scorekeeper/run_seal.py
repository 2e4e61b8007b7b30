"""What a completed run vouches for, and the check a later run makes before it reads any of it.

A run's completion record (complete.json, run_folder.CompletionRecord) is written last. Besides the
sha256 of each report file (`files`), it holds the seal of every output a later run reads
(`outputs`): predictions.parquet, embeddings.parquet, plan.json and request.json, each as its sha256, its size and, for
Parquet, its row count. Whoever reads another run's files (`compare_to` and `previous`, the
history, the drift reference) asks this module first:

    reason = unverified_reason(run, files)         # None: the run vouches for each of `files`
    refuse_unverified(run, "compare_to")           # raises InputError naming the file and what differs

A run is refused when it has no completion record, when its record vouches for no seal of a file
asked for (a record written before seals were kept), when a file is missing, or when its row
count, size or sha256 is not what the record says ("predictions.parquet has 1500 rows,
complete.json says 3000"). Nothing here imports more than pyarrow and the run folder.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from scorekeeper.errors import InputError
from scorekeeper.run_folder import CompletionRecord, FileSeal, RunFolder
from scorekeeper.storage import Location

# The outputs a completion record seals, besides the report files (`files`).
SEALED = (RunFolder.PREDICTIONS, RunFolder.EMBEDDINGS, RunFolder.PLAN, RunFolder.REQUEST)
# What a comparison reads of another run: all of it.
COMPARED = (RunFolder.METRICS, RunFolder.PREDICTIONS, RunFolder.PLAN, RunFolder.REQUEST)
# May be absent when the record vouches for none (request.json: only its id_column is read, when there).
OPTIONAL = (RunFolder.REQUEST,)
# What the history reads of another run.
HISTORY = (RunFolder.METRICS, RunFolder.PLAN)
_REPORT_PREFIX = RunFolder.REPORT_DIR + "/"


def seal_file(run: Location, name: str) -> FileSeal:
    """The seal of a file of the run as it is now (streamed: the file is never held whole)."""
    fs, path = run.fs, run.join(name)
    digest, size = hashlib.sha256(), 0
    with fs.open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            size += len(chunk)
    return FileSeal(sha256=digest.hexdigest(), bytes=size, rows=_parquet_rows(run, name) if name.endswith(".parquet") else None)


def seal_outputs(run: Location) -> dict[str, FileSeal]:
    """The seals of the run's outputs that exist (SEALED), for its completion record."""
    return {name: seal_file(run, name) for name in SEALED if run.exists(name)}


def _parquet_rows(run: Location, name: str) -> int | None:
    try:
        with run.fs.open(run.join(name), "rb") as f:
            return int(pq.ParquetFile(f).metadata.num_rows)
    except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError: not a Parquet file
        return None


def recorded_seal(record: CompletionRecord, name: str) -> FileSeal | None:
    """What the record vouches for `name` (a report file's sha256 alone, or an output's seal)."""
    if name.startswith(_REPORT_PREFIX):
        sha = record.files.get(name[len(_REPORT_PREFIX) :])
        return None if sha is None else FileSeal(sha256=sha)
    return (record.outputs or {}).get(name)


def mismatch(name: str, recorded: FileSeal | None, now: FileSeal | None, existed: bool = True) -> str | None:
    """Why `now` (the file as it is) is not what the record vouches for; None when it is."""
    label = posixpath.basename(name)
    if recorded is None:
        if not existed:
            return f"has no {label}"
        return f"{RunFolder.COMPLETION} vouches for no {label} (the run completed before outputs were sealed, or {label} was added since): rerun it"
    if now is None:
        return f"{label} is missing ({RunFolder.COMPLETION} vouches for one)"
    if recorded.rows is not None and now.rows != recorded.rows:
        held = "is not a Parquet file" if now.rows is None else f"has {now.rows:,} rows"
        return f"{label} {held}, {RunFolder.COMPLETION} says {recorded.rows:,}: it changed after the run completed"
    if recorded.bytes is not None and now.bytes != recorded.bytes:
        return f"{label} has {now.bytes:,} bytes, {RunFolder.COMPLETION} says {recorded.bytes:,}: it changed after the run completed"
    if now.sha256 != recorded.sha256:
        return f"{label} is not the file {RunFolder.COMPLETION} vouches for (its sha256 differs): it changed after the run completed"
    return None


def read_record(run: RunFolder) -> tuple[CompletionRecord | None, str | None]:
    """(the run's completion record, None), or (None, why there is none)."""
    try:
        data = run.read_bytes(RunFolder.COMPLETION)
    except FileNotFoundError:
        return None, f"has not completed (no {RunFolder.COMPLETION})" if run.exists() else "does not exist"
    try:
        return CompletionRecord.model_validate_json(data), None
    except ValidationError:
        return None, f"has a {RunFolder.COMPLETION} that is not a completion record"


def unverified_reason(run: RunFolder, files: Iterable[str] = COMPARED, optional: Iterable[str] = OPTIONAL) -> str | None:
    """Why the run does not vouch for each of `files` as they are now (the first problem found);
    None when it does. `files` are names in the run folder (RunFolder's constants); one in
    `optional` may be absent when the record vouches for none."""
    record, reason = read_record(run)
    if record is None:
        return reason
    for name in files:
        recorded = recorded_seal(record, name)
        existed = run.exists(name)
        if recorded is None and not existed and name in optional:
            continue
        if recorded is None:
            return mismatch(name, None, None, existed)
        if not existed:
            return mismatch(name, recorded, None)
        problem = mismatch(name, recorded, seal_file(run, name))
        if problem is not None:
            return problem
    return None


def bytes_reason(record: CompletionRecord, files: dict[str, bytes | None], optional: Iterable[str] = ()) -> str | None:
    """`unverified_reason` for files already fetched (None: absent), as the history reads them in
    one batch; a file in `optional` may be absent when the record vouches for none."""
    for name, data in files.items():
        recorded = recorded_seal(record, name)
        if data is None and recorded is None and name in optional:
            continue
        if recorded is None:
            return mismatch(name, None, None, data is not None)
        problem = mismatch(name, recorded, None if data is None else _seal_of_bytes(name, data))
        if problem is not None:
            return problem
    return None


def _seal_of_bytes(name: str, data: bytes) -> FileSeal:
    seal = FileSeal(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    if name.endswith(".parquet"):
        try:
            seal.rows = int(pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows)
        except (OSError, ValueError):
            pass
    return seal


def refuse_unverified(run: RunFolder, subject: str, files: Iterable[str] = COMPARED, optional: Iterable[str] = OPTIONAL) -> None:
    """Raise InputError unless the run vouches for each of `files`: one line, naming the run, the
    file and what differs (`subject` opens it: "compare_to", "drift_reference", ...)."""
    reason = unverified_reason(run, files, optional)
    if reason is not None:
        parent = posixpath.dirname(run.uri.rstrip("/"))
        joint = " " if reason.startswith(("has ", "does ")) else ": "
        raise InputError(f"{subject}: run {posixpath.basename(run.path)!r} under {parent}{joint}{reason}")

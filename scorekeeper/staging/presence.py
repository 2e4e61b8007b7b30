"""Whether the input holds any data at all: the check behind `if_empty` (fail or skip a night without data).

A dated input (`incoming/{date}/`) may be missing, empty or hold only files without rows on a
night nothing arrived. This says so before anything is started or written, from the listing and,
at most, the first batch of each file until one holds a row (a Parquet file's footer says its rows).
"""

from __future__ import annotations

import pyarrow.parquet as pq

from scorekeeper.errors import InputError, NoInput
from scorekeeper.run_folder import InputFile
from scorekeeper.staging.listing import list_input
from scorekeeper.staging.reader import open_or_explain
from scorekeeper.storage import Location, fs_and_path


def no_data(uri: str, exclude: Location | None = None) -> NoInput | None:
    """Why `uri` holds no data (the error a run refusing it raises), or None when a file holds a row.
    A file that cannot be read is not "no data": its own error is raised."""
    try:
        files = list_input(uri, exclude=exclude).files
    except NoInput as missing:
        return missing
    if any(_has_rows(f) for f in files):
        return None
    return NoInput(f"no rows in the input {uri} ({len(files)} file(s), none holds a row)")


def _has_rows(f: InputFile) -> bool:
    if f.size == 0:
        return False
    if f.format == "parquet":
        fs, path = fs_and_path(f.uri)
        try:
            with fs.open(path, "rb") as handle:
                return pq.ParquetFile(handle).metadata.num_rows > 0
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {f.uri} as Parquet: {exc}") from None
    _, batches = open_or_explain(f, string_columns=[])
    return any(batch.num_rows for batch in batches)


def no_data_tonight(input_uri: str, if_empty: str, dated: bool, exclude: Location | None = None) -> str | None:
    """The `if_empty` rule: None when the input holds data; the line a skipped run ends with when it
    does not and `if_empty` is skip; with fail, the NoInput naming the (filled) URI is raised, saying
    how to skip such a night when the input is dated."""
    missing = no_data(input_uri, exclude)
    if missing is None:
        return None
    if if_empty == "skip":
        return f"no data tonight: {missing}; nothing was scored or written (if_empty skip)"
    if dated:
        raise NoInput(f"{missing} (if_empty skip ends a night without data without failing)")
    raise missing

"""Duplicate ids in a staged table (work/input.parquet or the staged ground truth), out of core in
DuckDB: the read step's and the precheck's refusal, naming both rows of each duplicate and the
files they came from."""

from __future__ import annotations

import posixpath

SHOWN = 5  # duplicated ids named in the message


def first_duplicate_ids(parquet_path: str, limit: int = SHOWN) -> list[tuple]:
    """(id, count, [first row_index, second row_index]) of duplicated ids, first by position. In a
    staged table a row's position in the file is its row_index."""
    from scorekeeper.evaluation import duck

    with duck.connect() as con:
        return con.execute(
            "SELECT id, count(*) AS n, list(file_row_number ORDER BY file_row_number)[1:2] AS at "
            "FROM read_parquet(?, file_row_number = true) GROUP BY id HAVING count(*) > 1 ORDER BY min(file_row_number) LIMIT ?",
            [parquet_path, limit],
        ).fetchall()


def where(row_index: int, files: list[str], file_rows: list[int], indexed: bool = True) -> str:
    """'row_index R (FILE, its row K)': the file a staged row came from and its row there (from 1,
    a CSV header not counted); the row_index alone when the files' row counts are not known.
    `indexed` False (the staged ground truth, whose rows have no row_index): 'FILE, its row K'."""
    start = 0
    for uri, rows in zip(files, file_rows, strict=False):
        if row_index < start + rows:
            found = f"{posixpath.basename(uri)}, its row {row_index - start + 1}"
            return f"row_index {row_index} ({found})" if indexed else found
        start += rows
    return f"row_index {row_index}" if indexed else f"its row {row_index + 1}"


def duplicate_ids_message(
    parquet_path: str, id_column: str, files: list[str], file_rows: list[int], what: str = "id column", indexed: bool = True
) -> str | None:
    """The refusal of a staged table with duplicate ids, or None: each duplicated id with its count
    and its first two rows, each row with its file (`indexed`: with its row_index, as `where`)."""
    dupes = first_duplicate_ids(parquet_path)
    if not dupes:
        return None
    shown = "; ".join(
        f"{i!r} x{n} at {where(at[0], files, file_rows, indexed)} and {where(at[1], files, file_rows, indexed)}" for i, n, at in dupes
    )
    return f"{what} '{id_column}' has duplicate values: {shown}"

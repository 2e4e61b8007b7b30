"""DuckDB for the evaluation: connections with bounded memory, the SQL files, the one helper that
puts a name into SQL, and what the evaluation and the comparison share (a run's files as DuckDB
reads them, the slices' null group).

SQL lives in files under sql/ (one folder per kind of head, and shared ones), loaded by name with
`sql`. A name that must vary (a table, a staged column) reaches the SQL only through `statement`,
which quotes it with `identifier` after checking it is a plain name; SQL text written in this package
(another file, a constant expression) is passed as a `Fragment`. Nothing else is ever formatted
into SQL: values travel as parameters.

The flow process must stay small however many rows it evaluates: every connection gets a memory
limit and a folder to spill to, so a large join or aggregate pages out instead of growing the
process (DuckDB's own default is 80% of the machine's memory). Both are settings:

    SCOREKEEPER_DUCKDB_MEMORY_LIMIT   default 192MB (any DuckDB size: 2GB, 800MiB, ...)
    SCOREKEEPER_DUCKDB_TEMP_DIR       default: <temp dir>/scorekeeper-duckdb
    SCOREKEEPER_DUCKDB_THREADS        default: DuckDB's (the machine's cores)
"""

from __future__ import annotations

import os
import re
import tempfile
from enum import StrEnum
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

from scorekeeper.storage import Location, is_local

if TYPE_CHECKING:  # duckdb is imported where a connection is made, not by every module naming the type
    from duckdb import DuckDBPyConnection as Connection

# 192MB, not 256MB: a connection's RSS runs 30-100 MB past its limit, and at 256MB the duplicate-id
# check and the evaluation reached it only beyond about 3M rows, so the flow process still grew
# from 3M to 10M rows (531 -> 597 MB, bench/scale.py); at 192MB both sit at their limit from 3M rows
# on (standalone evaluation peak 415 MB at 3M, 421 MB at 10M) and were no slower.
DEFAULT_MEMORY_LIMIT = "192MB"
SLICE_GROUPS = 50  # the largest groups of a slice column kept in metrics.json
NULL_GROUP = "∅ (null)"  # the key of a slice's null group (suffixed if a real value is spelled so)


def settings() -> dict[str, str | bool | int | float | list[str]]:
    """The connection settings the environment asks for, defaults filled in."""
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": os.environ.get("SCOREKEEPER_DUCKDB_MEMORY_LIMIT") or DEFAULT_MEMORY_LIMIT,
        "temp_directory": os.environ.get("SCOREKEEPER_DUCKDB_TEMP_DIR") or os.path.join(tempfile.gettempdir(), "scorekeeper-duckdb"),
    }
    threads = os.environ.get("SCOREKEEPER_DUCKDB_THREADS")
    if threads:
        config["threads"] = int(threads)
    return config


def connect(fs=None) -> Connection:
    """A DuckDB connection with bounded memory; `fs` (an fsspec filesystem) is registered so that
    read_parquet('s3://...') goes through the same filesystem and credentials as the flow."""
    import duckdb

    config = settings()
    os.makedirs(str(config["temp_directory"]), exist_ok=True)
    # No progress bars of DuckDB's own on the flow's output (it draws them for queries over 2 s).
    con = duckdb.connect(config=config)
    con.execute("SET enable_progress_bar = false")
    if fs is not None:
        con.register_filesystem(fs)
    return con


def one_row(cursor) -> tuple:
    """The one row an aggregate query returns (DuckDB's fetchone() is typed as maybe none)."""
    row = cursor.fetchone()
    assert row is not None, "an aggregate query returns one row"
    return row


def transient_errors() -> tuple[type[BaseException], ...]:
    """DuckDB's errors of reading a file that a retry may cure (tasks/retries.py)."""
    import duckdb

    return (duckdb.IOException, duckdb.HTTPException)


def connect_run(run: Location) -> Connection:
    """A connection that reads `run`'s files: through its filesystem on object storage, directly on disk."""
    return connect(None if is_local(run.fs) else run.fs)


def parquet_uri(run: Location, rel: str) -> str:
    """A file of a run folder as read_parquet names it: the URI on object storage, the path on disk."""
    return run.uri + "/" + rel if not is_local(run.fs) else run.join(rel)


def parquet_view(con: Connection, view: str, run: Location, rel: str) -> None:
    """The temp view `view` of the file `rel` of `run` (its URI a value, in the connection's variable
    `parquet_<view>`, never SQL text). Made by execute(), as every statement of the evaluation is:
    the relation API of DuckDB (its read_parquet, then create_view) refuses to run while the last
    execute()'s result is not read to its end (a fetchone() of any query leaves it so), which made
    a view opened after such a step a crash depending on which steps ran before it."""
    variable = "parquet_" + view
    identifier(variable)
    con.execute(statement("SET VARIABLE {variable} = $uri", variable=variable), {"uri": parquet_uri(run, rel)})
    con.execute(sql("parquet_view.sql", view=view, variable=Fragment("'" + variable + "'")))


class Fragment(str):
    """SQL text written in this package (a file's, a constant expression), never a user's text."""


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifier(name: str) -> Fragment:
    """`name` quoted as a DuckDB identifier, once it is checked to be a plain name (letters, digits, _)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"not a plain SQL name: {name!r}")
    return Fragment('"' + name + '"')


def literal(value: StrEnum) -> Fragment:
    """An enum member's value as a SQL string literal (plain names only, as `identifier` checks)."""
    identifier(value.value)
    return Fragment("'" + value.value + "'")


def number(value: int) -> Fragment:
    """An integer as SQL text."""
    return Fragment(str(int(value)))


def statement(template: str, **macros: str) -> Fragment:
    """`template` with its `{macro}`s filled in: a Fragment as it is, any other text as an identifier."""
    if not macros:
        return Fragment(template)
    return Fragment(template.format(**{k: v if isinstance(v, Fragment) else identifier(v) for k, v in macros.items()}))


@cache
def sql_files() -> dict[str, Traversable]:
    """Every SQL file under sql/ by its name (names are unique across the folders)."""
    files: dict[str, Traversable] = {}
    for folder in sorted(resources.files("scorekeeper.evaluation").joinpath("sql").iterdir(), key=lambda f: f.name):
        if folder.is_dir():
            for file in sorted(folder.iterdir(), key=lambda f: f.name):
                if file.name.endswith(".sql"):
                    if file.name in files:
                        raise RuntimeError(f"two SQL files named {file.name}")
                    files[file.name] = file
    return files


class SqlFile(Fragment):
    """A SQL file's text as `sql` fills it in, with the file's name and the macros it was given."""

    name: str
    macros: dict[str, str]


def sql(name: str, **macros: str) -> SqlFile:
    """The SQL file `name` (sql/<folder>/<name>), its `{macro}`s filled in by `statement`. Every file
    opens with `-- reads: ...` and `-- creates: ...`: the tables (views, macros) it expects and
    those it makes, `<macro>` for one a macro names (tests/test_sql_files.py holds them to the SQL
    and to the order the driver runs the files in)."""
    text = SqlFile(statement(sql_files()[name].read_text(), **macros))
    text.name, text.macros = name, macros
    return text


def ovr_table(table: str, grouped: Fragment) -> Fragment:
    """The statement that makes the one-vs-rest table `table` (ovr.sql's shape) of a grouping query."""
    return sql("ovr_running.sql", table=table, grouped=grouped)


# ranking.sql's `labels` for the micro average: every label's cells as one label
MICRO_LABEL = Fragment("(SELECT -1::BIGINT AS label_id, 'micro' AS label_name)")


def records(cursor) -> list[dict]:
    """A query's rows as dicts keyed by the SQL's column names."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def null_group_key(values: set[str]) -> str:
    """The key of a slice column's null group: NULL_GROUP, made distinct from every real value."""
    key = NULL_GROUP
    while key in values:
        key += " [null]"
    return key

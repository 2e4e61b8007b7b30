"""DuckDB for the flow's steps: connections with bounded memory, the SQL files, and the helpers the
evaluation and the comparison share (a run's files as DuckDB reads them, the slices' null group).

The flow process must stay small however many rows it evaluates: every connection gets a memory
limit and a folder to spill to, so a large join or aggregate pages out instead of growing the
process (DuckDB's own default is 80% of the machine's memory). Both are settings:

    SCOREKEEPER_DUCKDB_MEMORY_LIMIT   default 256MB (any DuckDB size: 2GB, 800MiB, ...)
    SCOREKEEPER_DUCKDB_TEMP_DIR       default: <temp dir>/scorekeeper-duckdb
    SCOREKEEPER_DUCKDB_THREADS        default: DuckDB's (the machine's cores)
"""

from __future__ import annotations

import os
import tempfile
from importlib import resources

from scorekeeper.storage import Location, is_local

DEFAULT_MEMORY_LIMIT = "256MB"
SLICE_GROUPS = 50  # the largest groups of a slice column kept in metrics.json
NULL_GROUP = "∅ (null)"  # the key of a slice's null group (suffixed if a real value is spelled so)


def settings() -> dict[str, str | int]:
    """The connection settings the environment asks for, defaults filled in."""
    config: dict[str, str | int] = {
        "memory_limit": os.environ.get("SCOREKEEPER_DUCKDB_MEMORY_LIMIT") or DEFAULT_MEMORY_LIMIT,
        "temp_directory": os.environ.get("SCOREKEEPER_DUCKDB_TEMP_DIR") or os.path.join(tempfile.gettempdir(), "scorekeeper-duckdb"),
    }
    threads = os.environ.get("SCOREKEEPER_DUCKDB_THREADS")
    if threads:
        config["threads"] = int(threads)
    return config


def connect(fs=None):
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


def connect_run(run: Location):
    """A connection that reads `run`'s files: through its filesystem on object storage, directly on disk."""
    return connect(None if is_local(run.fs) else run.fs)


def parquet_uri(run: Location, rel: str) -> str:
    """A file of a run folder as read_parquet names it: the URI on object storage, the path on disk."""
    return run.uri + "/" + rel if not is_local(run.fs) else run.join(rel)


def sql(name: str, **macros: str) -> str:
    """tasks/sql/<name>, with `{macro}`s filled in (canonical column names only, never user text)."""
    text = resources.files("scorekeeper.tasks").joinpath("sql", name).read_text()
    return text.format(**macros) if macros else text


def ovr_table(table: str, grouped: str) -> str:
    """The statement that makes the one-vs-rest table `table` (ovr.sql's shape) of a grouping query."""
    return sql("ovr_running.sql", table=table, grouped=grouped)


def null_group_key(values: set[str]) -> str:
    """The key of a slice column's null group: NULL_GROUP, made distinct from every real value."""
    key = NULL_GROUP
    while key in values:
        key += " [null]"
    return key

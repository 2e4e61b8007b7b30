"""The flow's DuckDB connections keep to their memory limit: big aggregates spill to disk."""

from __future__ import annotations

import json
import subprocess
import sys

from scorekeeper.evaluation import duck

_AGGREGATE = """
import json, os, re
from scorekeeper.evaluation import duck
con = duck.connect()
groups = con.execute("SELECT count(*) FROM (SELECT i % 6000000 AS g, count(*) FROM range(12000000) t(i) GROUP BY g)").fetchone()[0]
limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
spilled = sum(len(files) for _, _, files in os.walk(os.environ["SCOREKEEPER_DUCKDB_TEMP_DIR"]))
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so it would start at pytest's own size.
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"groups": groups, "limit": limit, "peak_mb": peak_kb / 1024}))
"""


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SCOREKEEPER_DUCKDB_MEMORY_LIMIT", raising=False)
    assert duck.settings()["memory_limit"] == duck.DEFAULT_MEMORY_LIMIT
    monkeypatch.setenv("SCOREKEEPER_DUCKDB_MEMORY_LIMIT", "300MB")
    monkeypatch.setenv("SCOREKEEPER_DUCKDB_TEMP_DIR", str(tmp_path / "spill"))
    monkeypatch.setenv("SCOREKEEPER_DUCKDB_THREADS", "1")
    with duck.connect() as con:
        limit, temp, threads = con.execute(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory'), current_setting('threads')"
        ).fetchone()
    assert limit == "286.1 MiB" and temp == str(tmp_path / "spill") and int(threads) == 1


def test_a_large_aggregate_stays_under_the_limit(tmp_path):
    """6M groups need several hundred MB in memory; with a 128MB limit DuckDB pages out instead."""
    env = {"SCOREKEEPER_DUCKDB_MEMORY_LIMIT": "128MB", "SCOREKEEPER_DUCKDB_TEMP_DIR": str(tmp_path / "spill")}
    unbounded = {**env, "SCOREKEEPER_DUCKDB_MEMORY_LIMIT": "8GB"}
    runs = {}
    for name, extra in (("bounded", env), ("unbounded", unbounded)):
        done = subprocess.run([sys.executable, "-c", _AGGREGATE], env=_env(extra), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "%" not in done.stdout, "DuckDB drew a progress bar on the flow's output"
    assert runs["bounded"]["groups"] == runs["unbounded"]["groups"] == 6_000_000
    assert runs["bounded"]["peak_mb"] < 0.75 * runs["unbounded"]["peak_mb"], runs


def _env(extra: dict) -> dict:
    import os

    return {**os.environ, **extra}


def test_a_file_view_opens_after_a_result_left_unread(tmp_path):
    """A step that reads one row of a result (fetchone) leaves it unfinished; the next step's view of
    a file must still open (DuckDB's relation API refused it: a multi-label or regression run with
    compare_to and drift_reference crashed when the comparison matched no row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scorekeeper.storage import Location

    pq.write_table(pa.table({"row_index": pa.array(range(3000), pa.int64())}), tmp_path / "p.parquet")
    run = Location.from_uri(str(tmp_path))
    with duck.connect() as con:
        con.execute("SELECT * FROM range(5000)").fetchone()
        duck.parquet_view(con, "first", run, "p.parquet")
        con.execute("SELECT 1").fetchone()
        duck.parquet_view(con, "second", run, "p.parquet")
        assert con.execute("SELECT count(*), sum(row_index) FROM first JOIN second USING (row_index)").fetchall() == [(3000, 2999 * 1500)]


def test_the_evaluation_opens_files_only_through_parquet_view():
    """No relation-API call (read_parquet(...).create_view, from_arrow, sql(...)) on an evaluation's
    connection: each refuses to run after a result left unread, so the order of steps would decide
    whether a run crashes."""
    import re
    from pathlib import Path

    root = Path(duck.__file__).parents[1]
    pattern = re.compile(r"\bcon\.(read_parquet|read_csv|read_json|from_arrow|from_parquet|sql|query|table|view)\(|\.create_view\(")
    found = [
        f"{path.relative_to(root)}:{i}"
        for path in sorted(root.rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []

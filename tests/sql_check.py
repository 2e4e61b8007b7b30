"""The SQL files' headers (`-- reads: ...`, `-- creates: ...`) and a DuckDB connection that checks
them as the files run: every table a file reads exists when it runs, every one it creates after it."""

from __future__ import annotations

from pathlib import Path

from scorekeeper.evaluation import duck


def header(path: Path) -> tuple[list[str], list[str]]:
    first, second = path.read_text().splitlines()[:2]
    assert first.startswith("-- reads: ") and second.startswith("-- creates: "), path
    names = [[n.strip() for n in line.split(": ", 1)[1].split(",")] for line in (first, second)]
    reads, creates = ([] if n == ["nothing"] else n for n in names)
    return reads, creates


class Checked:
    """A DuckDB connection that checks each SQL file's header when the file runs."""

    def __init__(self, con, ran: list[str]):
        self._con, self._ran = con, ran
        self._made: duck.SqlFile | None = None  # checked at the next statement, once its result is read

    def _missing(self, names: set[str]) -> set[str]:
        """Those of `names` that are no table, view or macro of the connection. The functions are
        looked at only for names that no table or view has: duckdb_functions() lists DuckDB's
        3,000-odd built-in functions at each call (about 20 ms of CPU, against 1 ms for the tables
        and views), and most files read and create tables."""
        rows = self._con.execute("SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()").fetchall()
        missing = names - {name for (name,) in rows}
        if missing:
            rows = self._con.execute(
                "SELECT function_name FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro')"
            ).fetchall()
            missing -= {name for (name,) in rows}
        return missing

    def _resolve(self, names: list[str], text: duck.SqlFile) -> set[str]:
        out = set()
        for name in names:
            if name.startswith("<"):
                value = text.macros[name.strip("<>")]
                if isinstance(value, duck.Fragment):  # SQL text, not a name: a file of its own is checked when it runs
                    continue
                name = value
            out.add(name)
        return out

    def _check(self, text) -> None:
        if isinstance(text, duck.SqlFile):
            for value in text.macros.values():
                if isinstance(value, duck.SqlFile):  # a file run inside another (ovr_running.sql's query)
                    self._check(value)
                    self._ran.append(value.name)
            reads, _ = header(duck.sql_files()[text.name])
            missing = self._missing(self._resolve(reads, text))
            assert not missing, f"{text.name} reads {sorted(missing)} before anything created it"

    def _check_made(self) -> None:
        if self._made is not None:
            _, creates = header(duck.sql_files()[self._made.name])
            missing = self._missing(self._resolve(creates, self._made))
            assert not missing, f"{self._made.name} did not create {sorted(missing)}"
            self._made = None

    def execute(self, query, *args):
        self._check_made()
        self._check(query)
        result = self._con.execute(query, *args)
        if isinstance(query, duck.SqlFile):
            self._ran.append(query.name)
            self._made = query
        return result

    def executemany(self, query, *args):
        self._check_made()
        return self._con.executemany(query, *args)

    def close(self) -> None:
        self._check_made()
        self._con.close()

    def __getattr__(self, name):
        return getattr(self._con, name)

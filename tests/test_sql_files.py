"""The evaluation's SQL files (scorekeeper/evaluation/sql/<folder>/<name>.sql): each opens with
`-- reads: ...` and `-- creates: ...`, the headers say what the SQL reads and makes, and when the
driver runs them (every kind of head, with comparisons, slices and the label audit: the golden
evaluations of bench/golden.py) every table a file reads exists by then and every table it
creates exists after it. No SQL is built with an f-string: names reach it through duck.statement."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scorekeeper.evaluation import duck

ROOT = Path(__file__).resolve().parents[1]
SQL = ROOT / "scorekeeper" / "evaluation" / "sql"
FILES = sorted(SQL.rglob("*.sql"))

CREATE = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO)\s+(\{?[A-Za-z_][A-Za-z0-9_]*\}?)", re.IGNORECASE
)
READ = re.compile(r"\b(?:FROM|JOIN)\s+(\{?[A-Za-z_][A-Za-z0-9_]*\}?)", re.IGNORECASE)
CTE = re.compile(r"(?:\bWITH\s+(?:RECURSIVE\s+)?|,\s*)([A-Za-z_][A-Za-z0-9_]*)\s+AS\s*(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", re.IGNORECASE)
NOT_TABLES = {"select", "unnest", "range", "generate_series", "lateral"}


def header(path: Path) -> tuple[list[str], list[str]]:
    first, second = path.read_text().splitlines()[:2]
    assert first.startswith("-- reads: ") and second.startswith("-- creates: "), path
    names = [[n.strip() for n in line.split(": ", 1)[1].split(",")] for line in (first, second)]
    reads, creates = ([] if n == ["nothing"] else n for n in names)
    return reads, creates


def parsed(path: Path) -> tuple[set[str], set[str]]:
    """What the SQL itself reads and creates, comments left out; `{macro}` written `<macro>`."""
    body = "\n".join(line.split("--")[0] for line in path.read_text().splitlines())
    creates = {m.group(1) for m in CREATE.finditer(body)}
    ctes = {m.group(1).lower() for m in CTE.finditer(body)}
    reads = set()
    for m in READ.finditer(body):
        after = body[m.end() :].lstrip()
        if after.startswith("(") or body[m.end() : m.end() + 1] == "." or m.group(1).lower() in ctes | NOT_TABLES:
            continue
        reads.add(m.group(1))
    angle = {name: re.sub(r"\{(\w+)\}", r"<\1>", name) for name in reads | creates}
    return {angle[n] for n in reads - creates} | ({"<grouped>"} if "{grouped}" in body else set()), {angle[n] for n in creates}


# The folders the driver's files live in: one per kind of head and the shared ones. Other folders
# (a library module's own SQL) are checked by the header tests and by their module's tests.
DRIVER_FOLDERS = {"single_label", "multi_label", "regression", "shared", "truth", "label_audit"}


def test_the_files_have_unique_names_in_one_folder_per_kind_and_shared_ones():
    assert DRIVER_FOLDERS <= {p.parent.name for p in FILES}
    assert all(p.parent.parent == SQL for p in FILES)
    assert len({p.name for p in FILES}) == len(FILES) == len(duck.sql_files())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_files_header_says_what_it_reads_and_creates(path):
    reads, creates = header(path)
    assert (set(reads), set(creates)) == parsed(path)


def test_the_header_check_sees_a_table_the_header_leaves_out(tmp_path):
    wrong = tmp_path / "wrong.sql"
    wrong.write_text("-- reads: truth\n-- creates: nothing\nCREATE TEMP TABLE x AS SELECT * FROM truth JOIN labels AS l ON true;\n")
    assert parsed(wrong) == ({"truth", "labels"}, {"x"}) != tuple(set(n) for n in header(wrong))


class Checked:
    """A DuckDB connection that checks each SQL file's header when the file runs."""

    def __init__(self, con, ran: list[str]):
        self._con, self._ran = con, ran
        self._made: duck.SqlFile | None = None  # checked at the next statement, once its result is read

    def _names(self) -> set[str]:
        rows = self._con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() "
            "UNION ALL SELECT function_name FROM duckdb_functions() WHERE function_type = 'macro'"
        ).fetchall()
        return {name for (name,) in rows}

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
            missing = self._resolve(reads, text) - self._names()
            assert not missing, f"{text.name} reads {sorted(missing)} before anything created it"

    def _check_made(self) -> None:
        if self._made is not None:
            _, creates = header(duck.sql_files()[self._made.name])
            missing = self._resolve(creates, self._made) - self._names()
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


def test_every_file_reads_only_what_the_driver_made_before_it(tmp_path, monkeypatch):
    from bench.golden import build

    ran: list[str] = []
    connect = duck.connect
    monkeypatch.setattr(duck, "connect", lambda fs=None: Checked(connect(fs), ran))
    build(tmp_path / "golden")
    # the golden evaluations run every file of the driver's folders but the predicted-vs-true density
    # (past SCATTER_POINTS rows)
    driver_files = {p.name for p in FILES if p.parent.name in DRIVER_FOLDERS}
    assert driver_files - set(ran) == {"regression_density.sql"}


def test_no_sql_is_built_with_an_f_string():
    sources = [p for folder in ("scorekeeper/evaluation", "tasks") for p in (ROOT / folder).rglob("*.py")]
    pattern = re.compile(r"""(execute|executemany|statement|sql)\(\s*f["']|f["']{3}\s*\n\s*(CREATE|SELECT|WITH|INSERT)""")
    found = [str(p.relative_to(ROOT)) for p in sources if pattern.search(p.read_text())]
    assert not found


def test_a_name_reaches_sql_only_quoted_after_its_check():
    assert duck.identifier("slice_0") == '"slice_0"'
    assert (
        duck.statement("SELECT {c} FROM {t}", c="truth", t=duck.Fragment("(SELECT 1 AS truth)"))
        == 'SELECT "truth" FROM (SELECT 1 AS truth)'
    )
    for bad in ('x"; DROP TABLE truth; --', "a b", "", "1abc"):
        with pytest.raises(ValueError, match="not a plain SQL name"):
            duck.statement("SELECT {c}", c=bad)

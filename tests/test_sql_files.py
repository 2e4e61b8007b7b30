"""The evaluation's SQL files (scorekeeper/evaluation/sql/<folder>/<name>.sql): each opens with
`-- reads: ...` and `-- creates: ...`, the headers say what the SQL reads and makes, and when the
driver runs them (every kind of head, with comparisons, slices and the label audit: the golden
evaluations of bench/golden.py, with drift references, a window and labelling plans) every table a file reads exists by then and every table it
creates exists after it. No SQL is built with an f-string: names reach it through duck.statement."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scorekeeper.evaluation import duck
from tests.sql_check import Checked, header

ROOT = Path(__file__).resolve().parents[1]
SQL = ROOT / "scorekeeper" / "evaluation" / "sql"
FILES = sorted(SQL.rglob("*.sql"))

CREATE = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO)\s+(\{?[A-Za-z_][A-Za-z0-9_]*\}?)", re.IGNORECASE
)
READ = re.compile(r"\b(?:FROM|JOIN)\s+(\{?[A-Za-z_][A-Za-z0-9_]*\}?)", re.IGNORECASE)
CTE = re.compile(r"(?:\bWITH\s+(?:RECURSIVE\s+)?|,\s*)([A-Za-z_][A-Za-z0-9_]*)\s+AS\s*(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", re.IGNORECASE)
NOT_TABLES = {"select", "unnest", "range", "generate_series", "lateral"}


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
    for macro in creates:  # a table macro's table (query_table), named as text where it is called
        reads |= set(re.findall(r"\b" + macro + r"\('(\w+)'\)", body))
    angle = {name: re.sub(r"\{(\w+)\}", r"<\1>", name) for name in reads | creates}
    return {angle[n] for n in reads - creates} | ({"<grouped>"} if "{grouped}" in body else set()), {angle[n] for n in creates}


# The folders the driver's files live in: one per kind of head and the shared ones, drift, the
# estimate, the length split and the labelling plan's; every one is under the run-time check.
KIND_FOLDERS = {"single_label", "multi_label", "regression", "shared", "truth"}
ORDER_CHECKED = {p.parent.name for p in FILES}
# The files the golden evaluations do not run under the check, each for its reason.
NOT_RUN = {
    "regression_density.sql": "the predicted-vs-true density, past SCATTER_POINTS rows",
    "drift_ks_sorted.sql": "the KS statistic by one sort of every value, when the bucket bounds leave most values to sort",
    "other_labels.sql": "a compared run whose plan.json records no labels",
    "truth_empty.sql": "a run without ground truth",
    "drift_example_texts.sql": "the representation signal's examples: the golden runs write no embeddings.parquet "
    "(tests/test_representation_signal.py runs it)",
    "drift_token_counts.sql": "the moved tokens: the golden runs write no report/token_counts.parquet "
    "(tests/test_representation_signal.py runs it)",
    "plan_no_truth.sql": "a multi-label or regression run with a labelling plan and no ground truth "
    "(tests/test_labelling.py::test_a_rerun_draws_the_same_plan_and_a_plan_without_labels_has_no_estimates)",
    "plan_labels.sql": "the CLI's check of labels handed back to a run with a plan, before anything starts (tests/test_early_refusals.py)",
}


def test_the_files_have_unique_names_in_one_folder_per_kind_and_shared_ones():
    assert KIND_FOLDERS <= {p.parent.name for p in FILES}
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


def test_the_running_check_sees_a_read_before_its_table_and_a_macro_not_made():
    """tests/sql_check.py's connection, which golden_build runs the evaluations through, refuses a
    file run before what it reads exists and a file that did not make what it creates (a macro
    here: the functions are looked at only for names no table or view has)."""
    ran: list[str] = []
    con = Checked(duck.connect(), ran)
    with pytest.raises(AssertionError, match=r"label_audit_accuracy.sql reads \['audit_suspected', 'evaluated'\]"):
        con.execute(duck.sql("label_audit_accuracy.sql"))
    con.execute(duck.sql("wilson.sql"))
    con.execute("SELECT 1")  # wilson.sql made its macro: checked here
    con.execute(duck.sql("wilson.sql"))
    con._con.execute("DROP MACRO wilson")  # behind the check's back
    with pytest.raises(AssertionError, match=r"wilson.sql did not create \['wilson'\]"):
        con.close()
    assert ran == ["wilson.sql", "wilson.sql"]


def test_every_file_reads_only_what_the_driver_made_before_it(golden_build):
    """golden_build (tests/conftest.py) runs the golden evaluations through a connection that checks
    each file's header when the file runs (tests/sql_check.py)."""
    _, ran = golden_build
    # the golden evaluations (every kind, comparisons, slices, the label audit, drift references with
    # the estimate, a window some rows exceed, labelling plans) run every file of every folder but NOT_RUN's
    checked = {p.name for p in FILES if p.parent.name in ORDER_CHECKED}
    assert checked - set(ran) == set(NOT_RUN)


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

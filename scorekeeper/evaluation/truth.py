"""The ground truth in DuckDB: the `truth` table, its values against a label list, and the one rule
it is matched by (decided in scorekeeper/evaluation/matching.py). Evaluation, the comparison with another
run and the read step's early check use it, for every kind of head: a multi-label column's rule is
decided over its list elements (`truth_elements`); a regression column holds numbers and has none.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scorekeeper.errors import InputError
from scorekeeper.evaluation.duck import Fragment, parquet_view, sql, statement
from scorekeeper.evaluation.matching import TruthValues, column_kind, conflict_note, decide
from scorekeeper.metrics.document import GroundTruthSource
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching
from scorekeeper.run_folder import RunFolder, StagedManifest

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection


def label_table(con: Connection, name: str, labels: list[str]) -> None:
    """A temp table `name` (label_id, label_name) of a model's labels."""
    con.execute(sql("label_table.sql", table=name))
    if labels:
        con.executemany(statement("INSERT INTO {name} VALUES (?, ?)", name=name), list(enumerate(labels)))


# The truth's column as a kind reads it (its module passes one): a single-label head's text
# (`raw_label`), matched to the labels by the column's one rule; the others' value in its staged
# type (a list of label names or ids, or a number).
RAW_LABEL = Fragment("CAST(src.label AS VARCHAR) AS raw_label")
STAGED_VALUE = Fragment("src.label AS value")


def truth_table(
    con: Connection, run: RunFolder, manifest: StagedManifest, value: Fragment, empty: Fragment, elements: bool = False, rule: bool = True
) -> tuple[GroundTruthSource | None, ColumnKind | None]:
    """The temp table `truth` (row_index, id, `value`: RAW_LABEL or STAGED_VALUE) from the staged
    label column or the staged ground-truth files, or with the column `empty` and no row for a run
    without ground truth; with `elements` also `truth_elements` (row_index, id, raw_label as text:
    one row per list element), on which the rule is decided. Returns where the truth came from and
    the kind of the values its rule is decided on (None without `rule`, a truth of numbers, and for
    a run without ground truth). Expects the `staged` view."""
    ground_truth = manifest.ground_truth
    source: GroundTruthSource | None
    view: str | None
    if ground_truth:
        parquet_view(con, "ground_truth", run, RunFolder.STAGED_GROUND_TRUTH)
        id_cast = Fragment("" if ground_truth.id_type == manifest.id_type else "::VARCHAR")
        con.execute(sql("truth_from_files.sql", id_cast=id_cast, value=value))
        view, source = "ground_truth", "ground_truth_uri"
    elif manifest.has_label:
        con.execute(sql("truth_from_input.sql", value=value))
        view, source = "staged", "label_column"
    else:
        con.execute(sql("truth_empty.sql", column=empty))
        view, source = None, None
    if elements:
        con.execute(sql("truth_elements.sql"))
    if view is None or not rule:
        return source, None
    return source, label_kind(con, view)


def label_kind(con: Connection, view: str) -> ColumnKind:
    """The kind of the `label` column of `view` (staged or ground_truth)."""
    query = statement("SELECT column_type FROM (DESCRIBE {view}) WHERE column_name = 'label'", view=view)
    return column_kind(con.execute(query).fetchall()[0][0])


def truth_values(con: Connection, labels_table: str = "labels", truth: str = "truth") -> TruthValues:
    """The `truth` table's (or `truth_elements`') distinct values against a label table
    (sql/truth/truth_values.sql)."""
    distinct, names, ids, ids_not_names, conflicts = con.execute(sql("truth_values.sql", labels=labels_table, truth=truth)).fetchall()[0]
    return TruthValues(distinct=distinct, names=names, ids=ids, ids_not_names=ids_not_names, conflicts=list(conflicts))


def match_truth(
    con: Connection,
    kind: ColumnKind,
    labels: list[str],
    column: str,
    labels_table: str = "labels",
    quiet: bool = False,
    truth: str = "truth",
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> TruthMatching:
    """The ground-truth column's one rule against these labels, said in `log` (the run's; unless
    `quiet`); InputError for a column that would resolve differently by name and by id. `truth` is
    the table of its values: `truth`, or a multi-label column's `truth_elements`."""
    values = truth_values(con, labels_table, truth)
    matching = decide(kind, values, labels, column)
    if not quiet:
        logger = log or logging.getLogger(__name__)
        logger.info(
            "ground truth '%s' (%s) matched to the model's labels by %s: %d of its %d distinct values are labels",
            column,
            kind.value,
            matching.rule.value,
            matching.matched_values,
            matching.distinct_values,
        )
        note = conflict_note(matching, values, labels)
        if note:
            logger.warning(note)
    return matching


def check_regression_truth(con: Connection, outputs: list[str], column: str) -> None:
    """A regression truth's shape against the head's outputs, the one place it is checked: one
    number per row for one output, a list of as many numbers as there are outputs for several.
    Expects the `truth` table of truth_table. A scalar column for a head of several outputs
    (or lists for one) was a DuckDB binder error with a traceback, after every row was scored."""
    value_type = con.execute("SELECT column_type FROM (DESCRIBE truth) WHERE column_name = 'value'").fetchall()[0][0]
    if not con.execute("SELECT count(*) FROM truth WHERE row_index IS NOT NULL").fetchall()[0][0]:
        return
    listed = str(value_type).endswith("[]")
    names, n = ", ".join(outputs), len(outputs)
    if n > 1 and not listed:
        raise InputError(
            f"the regression head has {n} outputs ({names}): its ground truth is a list of {n} numbers per row "
            f"(in output order), but label column '{column}' holds one number per row"
        )
    if n == 1 and listed:
        raise InputError(
            f"the regression head has one output ({names}): its ground truth is one number per row, but label column '{column}' holds lists"
        )
    if listed:
        wrong = con.execute(
            "SELECT row_index, len(value) FROM truth WHERE row_index IS NOT NULL AND len(value) <> ? ORDER BY row_index LIMIT 5",
            [n],
        ).fetchall()
        if wrong:
            shown = ", ".join(f"{i} ({k} value{'' if k == 1 else 's'})" for i, k in wrong)
            raise InputError(
                f"the regression head has {n} outputs ({names}): its ground truth is a list of {n} numbers per row, "
                f"but not at row_index {shown}"
            )

"""Comparison with another completed run (`compare_to`), the same for every kind of head: the other
run must vouch for its files and be of this run's kind; rows are paired, the kind's comparison of
the paired rows (`HeadEvaluation.comparison`'s pairer: single_label.pair, multi_label.pair,
regression.pair) gives its fields and its paired tests, and this step adds what every kind shares:
the deltas of the compared metrics (the metric registry's compared_metrics) from the two metrics
documents, every compared metric's test (statistics/families.py) and the counts of tests.

Rows are matched on row_index when both runs read the same input files (the same content, as
plan.json's input fingerprint records), else on the id; both runs' predictions are judged against
this run's ground truth, so the tests are paired. The statistics are statistics/'s pure functions;
the helpers below are the SQL side every kind's pairer shares (per-row means, blocks, a row sample).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from scorekeeper.errors import InputError
from scorekeeper.evaluation.base import Evaluation
from scorekeeper.evaluation.duck import Fragment, number, one_row, parquet_view, sql, statement
from scorekeeper.evaluation.statistics import families
from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import Comparison, MetricsDocument, RecordedMetrics
from scorekeeper.metrics.registry import Metric, Pairing, compared_metrics, value_at
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

log = logging.getLogger(__name__)

Keys = tuple[Fragment, Fragment]  # (the other run's join column `o.…`, this run's staged join column `s.…`)


@dataclass
class Paired:
    """A kind's comparison of the paired rows: the rows paired, the kind's own fields of metrics.json
    `comparison`, its paired tests by metric name (statistics.paired_tests' shape) and its families
    of tests (`per_class_tests`, `slice_tests`: Holm-adjusted) where it has them."""

    rows: int
    fields: dict[str, Any]
    tests: dict[str, dict]
    families: dict[str, dict] = field(default_factory=dict)


# A kind's comparison of the paired rows (the view `other` open, rows matched by `keys`).
Pairer = Callable[[Evaluation, Keys, MetricsDocument, RecordedMetrics, Location], Paired]


def same_input(plan: dict, other_plan: dict) -> bool:
    """Whether two runs read the same rows in the same order: the same files' content, in order."""
    return [f.get("fingerprint") for f in plan.get("files", [])] == [f.get("fingerprint") for f in other_plan.get("files", [])]


def open_other(con: Connection, run: Location, other: Location) -> tuple[Literal["row_index", "id"], Keys]:
    """The other run's predictions as the view `other`, and how rows are matched: ("row_index" or
    "id", (other's join column, this run's staged join column)) for `o` = other, `s` = staged."""
    parquet_view(con, "other", other, RunFolder.PREDICTIONS)
    if same_input(run.read_json(RunFolder.PLAN), other.read_json(RunFolder.PLAN)):
        return "row_index", (Fragment("o.row_index"), Fragment("s.row_index"))
    types = {str(t) for t in one_row(con.execute("SELECT (SELECT typeof(id) FROM staged LIMIT 1), (SELECT typeof(id) FROM other LIMIT 1)"))}
    if len(types) > 1:
        return "id", (Fragment("o.id::VARCHAR"), Fragment("s.id::VARCHAR"))
    return "id", (Fragment("o.id"), Fragment("s.id"))


def compare(ev: Evaluation, other: Location, metrics: MetricsDocument, pair: Pairer) -> Comparison:
    """metrics.json's `comparison` of this run (its evaluation `ev`, its document `metrics`) with the
    completed run `other`, the paired rows compared by the kind's `pair`. The other run must vouch
    for every file read here (scorekeeper/run_seal.py), checked as they are now, and be of this
    run's kind."""
    refuse_unverified(RunFolder(other.fs, other.path), "compare_to")
    other_metrics = RecordedMetrics.parse(other.read_json(RunFolder.METRICS)) or RecordedMetrics()
    if other_metrics.head != metrics.head:
        name = posixpath.basename(other.path)
        raise InputError(f"compare_to: run {name!r} scored a {other_metrics.head} head, this run a {metrics.head} head")
    matched_on, keys = open_other(ev.con, ev.run, other)
    paired = pair(ev, keys, metrics, other_metrics, other)
    if not paired.rows:
        log.warning("no row of this run matches a row of %s on %s: nothing to compare", other.uri, matched_on)
    compared = compared_metrics(metrics.head)
    tests = paired.tests
    counted = families.counted(
        [tests[m.name] for m in compared if m.name in tests],
        paired.families.get("per_class_tests", {}),
        paired.families.get("slice_tests", {}),
    )
    return Comparison.model_validate(
        {"run": posixpath.basename(other.path), "rows_compared": paired.rows, "matched_on": matched_on}
        | paired.fields
        | {"deltas": {m.name: delta(metrics, other_metrics, m) for m in compared}}
        | {"metric_tests": families.metric_tests(compared, tests), **paired.families, "tests_counted": counted}
    )


def delta(metrics: MetricsDocument, other_metrics: RecordedMetrics, metric: Metric) -> float | None:
    """this - other of a metric as each run reported it; None when either has no value."""
    this, other = metric.value(metrics), metric.value(other_metrics)
    return None if this is None or other is None else this - other


def label_positions(labels: list[str], other_labels: list[str] | None) -> list[int] | None:
    """For each of this run's labels its 1-based position among the other run's labels; None when
    the other run's labels are unknown or lack one of ours (its probabilities cannot be compared)."""
    if not other_labels or not set(labels) <= set(other_labels):
        return None
    return [other_labels.index(name) + 1 for name in labels]


def other_labels(other_metrics: RecordedMetrics) -> list[str] | None:
    """The labels the other run recorded in its metrics.json (None: none recorded)."""
    return value_at(other_metrics, ("labels",))


# -- the SQL side of the kinds' paired tests ------------------------------------------------------------


def row_mean_tests(con: Connection, table: str, head: HeadKind) -> dict[str, dict]:
    """The paired normal test of each metric of `head` that is a mean over rows (the registry's
    Pairing.ROW_MEAN), from its column of per-row differences (this - other) in `table`; a column
    that is null in every row (a metric the other run's outputs cannot give) is untested."""
    tests = {}
    for name in (m.name for m in compared_metrics(head) if m.compared is Pairing.ROW_MEAN):
        n, mean, variance = one_row(con.execute(statement("SELECT count({c}), avg({c}), var_samp({c}) FROM {t}", c=name, t=table)))
        tests[name] = pt.paired_normal(int(n), mean, variance)
    return tests


def block_key(rows: int, blocks: int) -> Fragment:
    """The SQL of a row's block: the row itself while there are no more rows than blocks."""
    return Fragment("row_index") if rows <= blocks else statement("hash(row_index) % {blocks}", blocks=number(blocks))


def dense(keys: np.ndarray, codes: dict, index: tuple[np.ndarray, ...], values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Rows of (block key, index..., values) as a dense array, blocks numbered by `codes`."""
    out = np.zeros((len(codes), *shape))
    out[(np.array([codes[k] for k in keys.tolist()], dtype=np.int64), *index)] = values
    return out


def block_codes(con: Connection, table: str, key: Fragment) -> dict:
    """Each block key of `table` numbered, in order."""
    return {
        k: i
        for i, (k,) in enumerate(con.execute(statement("SELECT DISTINCT {key} FROM {table} ORDER BY 1", key=key, table=table)).fetchall())
    }


def paired_sample(con: Connection, table: str, key: Fragment | str, columns: tuple[str, str, str], positions: list[int]) -> list[tuple]:
    """The rows of `table` at `positions` (paired_sample.sql): the row-sample bootstrap's sample."""
    first, second, third = columns
    query = sql("paired_sample.sql", table=table, key=key, first=first, second=second, third=third)
    return con.execute(query, {"positions": positions}).fetchall()

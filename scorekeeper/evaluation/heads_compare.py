"""Comparison of a multi-label or regression run with another run of the same kind (`compare_to`):
what both kinds share (compare_head, the block and row-sample helpers); each kind's own paired rows
and tests are in multi_label.py and regression.py.

Rows are paired as for single-label runs (tasks/compare.py: row_index on the same input, else the
id) and both runs' predictions are judged against this run's ground truth:

* multi_label: a row is right when its predicted label set equals the truth exactly; the flips of
  that verdict get McNemar's exact test, and each label's own right/wrong cells get theirs;
* regression: the paired change of MAE and RMSE (this - other) with a paired bootstrap 95%
  interval. Rows are resampled through blocks of their sums (|e|, e^2 of both runs): one row per
  block up to BOOTSTRAP_BLOCKS rows (the plain paired bootstrap), past that rows hashed into that
  many blocks, so its cost does not grow with the row count.

`deltas` holds this - other for every compared metric of the kind (the metric registry's
compared_metrics), from the two metrics documents, and `metric_tests` a paired test of each over the
paired rows (both runs judged against this run's truth):

* means over rows (the registry's Pairing.ROW_MEAN: samples_f1, hamming_loss, lrap,
  coverage_error, ranking_loss, log_loss; mae, mse, mape) by the paired normal test of their
  per-row differences (scorekeeper/evaluation/sql/paired_*_rows.sql);
* subset_accuracy by McNemar's exact test with the paired bootstrap interval (as accuracy);
* micro/macro/weighted F1, micro precision and recall, ECE macro and micro; rmse, r2,
  explained_variance, pearson, wmape, max_error by the block bootstrap of per-block sums
  (scorekeeper/evaluation/paired_heads.py: per-label TP/FP/FN counts, per-bin calibration gaps, sums of y, e,
  p and their squares and products, and maxima), at a cost bounded by paired_heads.WORK;
* ROC-AUC macro and micro by DeLong's test with rows as the independent units (row influences);
* average precision macro and micro, spearman, kendall_tau_b, median_absolute_error by the
  bootstrap of a fixed-seed sample of at most a few thousand rows, scaled to the full row count.

The metrics that need the other run's probabilities (log loss, ranking metrics, ECE, AP) are
untested (p null) when its labels differ from this run's.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from typing import Any

import numpy as np

from scorekeeper.evaluation import paired_heads as ph
from scorekeeper.evaluation import paired_tests as pt
from scorekeeper.evaluation.compare import _delta, open_other
from scorekeeper.evaluation.compare_tests import METHODS, _counted, _paired
from scorekeeper.evaluation.duck import Fragment, number, sql, statement
from scorekeeper.head_kind import DEFAULT_HEAD, HeadKind
from scorekeeper.metrics.document import Comparison, MetricsDocument, RecordedMetrics
from scorekeeper.metrics.registry import Pairing, compared_metrics
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location

log = logging.getLogger(__name__)

BOOTSTRAP_BLOCKS = ph.BOOTSTRAP_BLOCKS
# A kind's comparison of the paired rows: (con, join keys, this run's document, the other's) -> fields
Pairer = Callable[[Any, tuple[Fragment, Fragment], MetricsDocument, RecordedMetrics], dict]


def row_mean_tests(con, table: str, head: str) -> dict[str, dict]:
    """The paired normal test of each metric of `head` that is a mean over rows (the registry's
    Pairing.ROW_MEAN), from its column of per-row differences (this - other) in `table`; a column
    that is null in every row (a metric the other run's outputs cannot give) is untested."""
    tests = {}
    for name in (m.name for m in compared_metrics(head) if m.compared is Pairing.ROW_MEAN):
        n, mean, variance = con.execute(statement("SELECT count({c}), avg({c}), var_samp({c}) FROM {t}", c=name, t=table)).fetchone()
        tests[name] = pt.paired_normal(int(n), mean, variance)
    return tests


def block_key(rows: int, blocks: int) -> Fragment:
    """The SQL of a row's block: the row itself while there are no more rows than blocks."""
    return Fragment("row_index") if rows <= blocks else statement("hash(row_index) % {blocks}", blocks=number(blocks))


def _dense(keys: np.ndarray, codes: dict, index: tuple[np.ndarray, ...], values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Rows of (block key, index..., values) as a dense array, blocks numbered by `codes`."""
    out = np.zeros((len(codes), *shape))
    out[(np.array([codes[k] for k in keys.tolist()], dtype=np.int64), *index)] = values
    return out


def _block_codes(con, table: str, key: Fragment) -> dict:
    return {
        k: i
        for i, (k,) in enumerate(con.execute(statement("SELECT DISTINCT {key} FROM {table} ORDER BY 1", key=key, table=table)).fetchall())
    }


def _sample(con, table: str, key: Fragment | str, columns: tuple[str, str, str], positions: list[int]) -> list[tuple]:
    first, second, third = columns
    query = sql("paired_sample.sql", table=table, key=key, first=first, second=second, third=third)
    return con.execute(query, {"positions": positions}).fetchall()


def compare_head(con, run: Location, other: Location, metrics: MetricsDocument, head: HeadKind, pair: Pairer) -> Comparison:
    """metrics.json's `comparison` for a multi_label or regression run; `pair` is the kind's
    comparison of the paired rows (multi_label._multi_label, regression._regression): its fields
    of the comparison and its paired tests (`tests`)."""
    recorded = other.read_json(RunFolder.METRICS)
    other_head = recorded.get("head", DEFAULT_HEAD)
    if other_head != head:
        from scorekeeper.errors import InputError

        raise InputError(f"compare_to: run {posixpath.basename(other.path)!r} scored a {other_head} head, this run a {head} head")
    other_metrics = RecordedMetrics.parse(recorded) or RecordedMetrics()
    matched_on, keys = open_other(con, run, other)
    found = pair(con, keys, metrics, other_metrics)
    if not found["rows_compared"]:
        log.warning("no row of this run matches a row of %s on %s: nothing to compare", other.uri, matched_on)
    compared = compared_metrics(head)
    deltas = {m.name: _delta(metrics, other_metrics, m) for m in compared}
    tests = found.pop("tests", {})
    untested = {m.name: pt.untested(METHODS[m.compared]) for m in compared if m.compared is not None}
    metric_tests = {m.name: _paired(tests.get(m.name) or untested[m.name]) for m in compared}
    return Comparison.model_validate(
        {"run": posixpath.basename(other.path), "matched_on": matched_on, **found, "deltas": deltas}
        | {"metric_tests": metric_tests, "tests_counted": _counted([tests[m.name] for m in compared if m.name in tests], {}, {})}
    )

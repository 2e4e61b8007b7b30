"""Comparison of a multi-label or regression run with another run of the same kind (`compare_to`).

Rows are paired as for single-label runs (tasks/compare.py: row_index on the same input, else the
id) and both runs' predictions are judged against this run's ground truth:

* multi_label: a row is right when its predicted label set equals the truth exactly; the flips of
  that verdict get McNemar's exact test, and each label's own right/wrong cells get theirs;
* regression: the paired change of MAE and RMSE (this - other) with a paired bootstrap 95%
  interval. Rows are resampled through blocks of their sums (|e|, e^2 of both runs): one row per
  block up to BOOTSTRAP_BLOCKS rows (the plain paired bootstrap), past that rows hashed into that
  many blocks, so its cost does not grow with the row count.

`deltas` holds this - other for every compared metric of the kind (the metric registry's
compared_metrics), from the two metrics documents, and `metric_tests` a paired test for each, by
the single-label comparison's statistics (scorekeeper/paired_tests.py): the metrics that are
means over rows (the registry's Pairing.ROW_MEAN: samples_f1, hamming_loss, lrap, log_loss, ...; mae, mse, mape) by
the paired normal test of their per-row differences (tasks/sql/paired_*_rows.sql),
subset_accuracy by McNemar's exact test with the paired bootstrap interval (as accuracy), rmse by
the paired bootstrap above. A metric no paired test here computes yet (micro and macro F1,
ROC-AUC, r2, correlations, ...) has an entry without p, its method the registry's pairing's.
"""

from __future__ import annotations

import logging
import posixpath

import numpy as np

from scorekeeper import paired_tests as pt
from scorekeeper.metrics.document import Comparison, MetricsDocument, RecordedMetrics
from scorekeeper.metrics.registry import Pairing, compared_metrics, value_at
from scorekeeper.paired_tests import RESAMPLES as BOOTSTRAP_RESAMPLES
from scorekeeper.paired_tests import SEED as BOOTSTRAP_SEED
from scorekeeper.paired_tests import mcnemar_exact
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from scorekeeper.tasks.compare import _delta, open_other
from scorekeeper.tasks.compare_tests import LOG_LOSS_EPS, METHODS, _counted, _paired, label_positions
from scorekeeper.tasks.duck import sql

log = logging.getLogger(__name__)

BOOTSTRAP_BLOCKS = 10_000


def row_mean_tests(con, table: str, head: str) -> dict[str, dict]:
    """The paired normal test of each metric of `head` that is a mean over rows (the registry's
    Pairing.ROW_MEAN), from its column of per-row differences (this - other) in `table`; a column
    that is null in every row (a metric the other run's outputs cannot give) is untested."""
    tests = {}
    for name in (m.name for m in compared_metrics(head) if m.compared is Pairing.ROW_MEAN):
        n, mean, variance = con.execute(f"SELECT count({name}), avg({name}), var_samp({name}) FROM {table}").fetchone()
        tests[name] = pt.paired_normal(int(n), mean, variance)
    return tests


def _multi_label(con, keys: tuple[str, str], positions: list[int] | None) -> dict:
    con.execute(
        f"""
        CREATE TEMP TABLE ml_paired AS
        SELECT r.row_index, r.truth, o.predicted_labels AS before, p.predicted_labels AS after,
               o.probabilities AS before_probabilities
        FROM ml_rows AS r
        JOIN predictions AS p ON p.row_index = r.row_index
        JOIN staged AS s ON s.row_index = r.row_index
        JOIN other AS o ON {keys[0]} = {keys[1]}
        WHERE r.truth IS NOT NULL
        """
    )
    # per (row, label): right before / after, against this run's truth
    con.execute(
        """
        CREATE TEMP TABLE ml_paired_cells AS
        SELECT p.row_index, l.label_name,
               (list_contains(p.before, l.label_name) = p.truth[l.label_id + 1]) AS right_before,
               (list_contains(p.after, l.label_name) = p.truth[l.label_id + 1]) AS right_after
        FROM ml_paired AS p CROSS JOIN labels AS l
        """
    )
    rows, r2w, w2r, other = con.execute(
        """
        WITH exact AS (
            SELECT row_index, bool_and(right_before) AS right_before, bool_and(right_after) AS right_after
            FROM ml_paired_cells GROUP BY row_index
        )
        SELECT count(*),
               count(*) FILTER (WHERE right_before AND NOT right_after),
               count(*) FILTER (WHERE NOT right_before AND right_after),
               count(*) FILTER (WHERE NOT right_before AND NOT right_after AND list_sort(p.before) <> list_sort(p.after))
        FROM exact JOIN ml_paired AS p ON p.row_index = exact.row_index
        """
    ).fetchone()
    per_label = {}
    for name, b, c in con.execute(
        """
        SELECT label_name, count(*) FILTER (WHERE right_before AND NOT right_after),
               count(*) FILTER (WHERE NOT right_before AND right_after)
        FROM ml_paired_cells GROUP BY label_name
        """
    ).fetchall():
        per_label[name] = {"right_to_wrong": int(b), "wrong_to_right": int(c), "mcnemar_p": mcnemar_exact(int(b), int(c))}
    con.execute(sql("paired_multilabel_rows.sql"), {"positions": positions or [], "eps": LOG_LOSS_EPS})
    tests = row_mean_tests(con, "ml_paired_rows", "multi_label")
    tests["subset_accuracy"] = pt.accuracy_test(int(r2w), int(w2r), int(rows)) if rows else pt.untested(pt.MCNEMAR)
    return {
        "tests": tests,
        "rows_compared": int(rows),
        "flipped": {"right_to_wrong": int(r2w), "wrong_to_right": int(w2r), "other": int(other)},
        "mcnemar_p": mcnemar_exact(int(r2w), int(w2r)),
        "per_label": per_label,
    }


def paired_error_changes(sums: np.ndarray) -> dict:
    """MAE and RMSE of both runs, their change (this - other) and its paired bootstrap 95% interval,
    from per-block sums: columns (rows, |e| this, |e| other, e^2 this, e^2 other)."""
    totals = sums.sum(axis=0)
    n = totals[0]

    def changes(t):
        mae = (t[..., 1] - t[..., 2]) / t[..., 0]
        rmse = np.sqrt(t[..., 3] / t[..., 0]) - np.sqrt(t[..., 4] / t[..., 0])
        return mae, rmse

    mae, rmse = changes(totals)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(sums), size=(BOOTSTRAP_RESAMPLES, len(sums)))
    boot_mae, boot_rmse = changes(sums[picks].sum(axis=1))
    interval = lambda v: [float(x) for x in np.percentile(v, [2.5, 97.5])]  # noqa: E731
    return {
        "rmse_test": pt.bootstrap_summary(float(rmse), boot_rmse),
        "rows_compared": int(n),
        "mae": {"this": float(totals[1] / n), "other": float(totals[2] / n), "delta": float(mae), "ci": interval(boot_mae)},
        "rmse": {
            "this": float(np.sqrt(totals[3] / n)),
            "other": float(np.sqrt(totals[4] / n)),
            "delta": float(rmse),
            "ci": interval(boot_rmse),
        },
        "method": "paired_bootstrap",
        "resamples": BOOTSTRAP_RESAMPLES,
    }


def _regression(con, keys: tuple[str, str], outputs: int) -> dict:
    at = "[l.label_id + 1]" if outputs > 1 else ""
    con.execute(
        f"""
        CREATE TEMP TABLE reg_paired AS
        SELECT * FROM (
            SELECT r.row_index, l.label_name AS output, r.truth{at} AS y, r.prediction{at} AS after, o.prediction{at} AS before
            FROM reg_rows AS r
            CROSS JOIN labels AS l
            JOIN staged AS s ON s.row_index = r.row_index
            JOIN other AS o ON {keys[0]} = {keys[1]}
        ) WHERE isfinite(y)
        """
    )
    rows = con.execute("SELECT count(DISTINCT row_index) FROM reg_paired").fetchone()[0]
    result: dict = {"rows_compared": int(rows)}
    if not rows:
        return result
    blocks = "row_index" if rows <= BOOTSTRAP_BLOCKS else f"hash(row_index) % {BOOTSTRAP_BLOCKS}"
    per_output = {}
    for (output,) in con.execute("SELECT DISTINCT output FROM reg_paired ORDER BY output").fetchall():
        sums = con.execute(
            f"""
            SELECT count(*), sum(abs(after - y)), sum(abs(before - y)), sum((after - y) ^ 2), sum((before - y) ^ 2)
            FROM reg_paired WHERE output = ? GROUP BY {blocks}
            """,
            [output],
        ).fetchnumpy()
        per_output[output] = paired_error_changes(np.column_stack([np.asarray(v, dtype=np.float64) for v in sums.values()]))
    tests_of = {k: v.pop("rmse_test") for k, v in per_output.items()}
    con.execute(sql("paired_regression_rows.sql"), {"outputs": outputs})
    tests = row_mean_tests(con, "reg_paired_rows", "regression")
    if outputs == 1:
        tests["rmse"] = next(iter(tests_of.values()))
        return result | next(iter(per_output.values())) | {"rows_compared": int(rows), "tests": tests}
    return result | {"per_output": per_output, "tests": tests}


def compare_head(con, run: Location, other: Location, metrics: MetricsDocument, head: str) -> Comparison:
    """metrics.json's `comparison` for a multi_label or regression run."""
    recorded = other.read_json(RunFolder.METRICS)
    other_head = recorded.get("head", "single_label")
    if other_head != head:
        from scorekeeper.errors import InputError

        raise InputError(f"compare_to: run {posixpath.basename(other.path)!r} scored a {other_head} head, this run a {head} head")
    other_metrics = RecordedMetrics.parse(recorded) or RecordedMetrics()
    matched_on, keys = open_other(con, run, other)
    if head == "multi_label":
        found = _multi_label(con, keys, label_positions(metrics.labels or [], value_at(other_metrics, ("labels",))))
    else:
        found = _regression(con, keys, len(metrics.labels or []))
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

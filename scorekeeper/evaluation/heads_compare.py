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

import numpy as np

from scorekeeper.evaluation import paired_heads as ph
from scorekeeper.evaluation import paired_tests as pt
from scorekeeper.evaluation.compare import _delta, open_other
from scorekeeper.evaluation.compare_tests import LOG_LOSS_EPS, METHODS, _counted, _paired, label_positions
from scorekeeper.evaluation.duck import MICRO_LABEL, Fragment, number, ovr_table, sql, statement
from scorekeeper.evaluation.paired_tests import RESAMPLES as BOOTSTRAP_RESAMPLES
from scorekeeper.evaluation.paired_tests import SEED as BOOTSTRAP_SEED
from scorekeeper.evaluation.paired_tests import mcnemar_exact
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import Comparison, MetricsDocument, RecordedMetrics
from scorekeeper.metrics.registry import Pairing, compared_metrics, value_at
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location

log = logging.getLogger(__name__)

BOOTSTRAP_BLOCKS = ph.BOOTSTRAP_BLOCKS


def row_mean_tests(con, table: str, head: str) -> dict[str, dict]:
    """The paired normal test of each metric of `head` that is a mean over rows (the registry's
    Pairing.ROW_MEAN), from its column of per-row differences (this - other) in `table`; a column
    that is null in every row (a metric the other run's outputs cannot give) is untested."""
    tests = {}
    for name in (m.name for m in compared_metrics(head) if m.compared is Pairing.ROW_MEAN):
        n, mean, variance = con.execute(statement("SELECT count({c}), avg({c}), var_samp({c}) FROM {t}", c=name, t=table)).fetchone()
        tests[name] = pt.paired_normal(int(n), mean, variance)
    return tests


def _multi_label(con, keys: tuple[Fragment, Fragment], positions: list[int] | None) -> dict:
    con.execute(
        statement(
            """
        CREATE TEMP TABLE ml_paired AS
        SELECT r.row_index, r.truth, o.predicted_labels AS before, p.predicted_labels AS after,
               o.probabilities AS before_probabilities, r.probabilities AS after_probabilities
        FROM ml_rows AS r
        JOIN predictions AS p ON p.row_index = r.row_index
        JOIN staged AS s ON s.row_index = r.row_index
        JOIN other AS o ON {other_key} = {this_key}
        WHERE r.truth IS NOT NULL
        """,
            other_key=keys[0],
            this_key=keys[1],
        )
    )
    # per (row, label): right before / after, against this run's truth
    con.execute(
        """
        CREATE TEMP TABLE ml_paired_cells AS
        SELECT *, before = truth AS right_before, after = truth AS right_after
        FROM (
            SELECT p.row_index, l.label_id, l.label_name, p.truth[l.label_id + 1] AS truth,
                   list_contains(p.before, l.label_name) AS before, list_contains(p.after, l.label_name) AS after,
                   p.after_probabilities[l.label_id + 1] AS prob_after,
                   p.before_probabilities[$positions[l.label_id + 1]] AS prob_before
            FROM ml_paired AS p CROSS JOIN labels AS l
        )
        """,
        {"positions": positions or []},
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
    tests = row_mean_tests(con, "ml_paired_rows", HeadKind.MULTI_LABEL)
    tests["subset_accuracy"] = pt.accuracy_test(int(r2w), int(w2r), int(rows)) if rows else pt.untested(pt.MCNEMAR)
    if rows:
        tests |= multilabel_resampled_tests(con, int(rows), positions is not None)
    return {
        "tests": tests,
        "rows_compared": int(rows),
        "flipped": {"right_to_wrong": int(r2w), "wrong_to_right": int(w2r), "other": int(other)},
        "mcnemar_p": mcnemar_exact(int(r2w), int(w2r)),
        "per_label": per_label,
    }


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


def multilabel_resampled_tests(con, rows: int, with_scores: bool) -> dict[str, dict]:
    """The multi-label tests that are not per-row means, over ml_paired_cells: F1, precision and
    recall averages and (with both runs' probabilities) ECE by the block bootstrap, ROC-AUC by
    DeLong, average precision by the row-sample bootstrap (scorekeeper/evaluation/paired_heads.py)."""
    from scorekeeper.evaluation.single_label import ECE_BINS

    labels = con.execute("SELECT count(*) FROM labels").fetchone()[0]
    width = labels * len(ph.COUNT_FIELDS)
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = _block_codes(con, "ml_paired_cells", key)
    got = con.execute(sql("paired_multilabel_blocks.sql", block=key)).fetchnumpy()
    counts = _dense(got["block"], codes, (got["label_id"],), np.column_stack([got[f] for f in ph.COUNT_FIELDS]), (labels, 5))
    tests = ph.block_bootstrap(
        counts.reshape(len(codes), width), np.zeros((len(codes), 0)), lambda t, h: ph.multilabel_count_deltas(t, h, labels), resamples
    )
    if not with_scores:
        return tests
    width = 1 + 2 * labels * ECE_BINS
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = _block_codes(con, "ml_paired_cells", key)
    got = con.execute(sql("paired_multilabel_ece.sql", block=key), {"bins": ECE_BINS}).fetchnumpy()
    gaps = _dense(got["block"], codes, (got["side"], got["label_id"], got["bin"]), got["gap"], (2, labels, ECE_BINS))
    block_rows = dict(con.execute(statement("SELECT {key}, count(DISTINCT row_index) FROM ml_paired_cells GROUP BY 1", key=key)).fetchall())
    sums = np.column_stack([[block_rows[k] for k in codes], gaps.reshape(len(codes), -1)])
    tests |= ph.block_bootstrap(sums, np.zeros((len(codes), 0)), lambda t, h: ph.multilabel_ece_deltas(t, h, labels, ECE_BINS), resamples)

    ranking = {}
    for side in ("after", "before"):
        cells = statement("(SELECT label_id, {prob} AS score, truth FROM ml_paired_cells)", prob=f"prob_{side}")
        con.execute(ovr_table(f"ml_paired_ovr_{side}", sql("multilabel_ovr.sql", cells=cells)))
        per_label = con.execute(sql("ranking.sql", ovr=f"ml_paired_ovr_{side}", labels="ml_labels")).fetchall()
        micro = con.execute(sql("ranking.sql", ovr=f"ml_paired_ovr_{side}", labels=MICRO_LABEL)).fetchone()
        ranking[side] = [(auc, ap) for _, auc, ap in [*per_label, micro]]
    macro_delta, macro_squares, micro_delta, micro_squares = con.execute(sql("paired_multilabel_delong.sql")).fetchone()
    tests["roc_auc_macro"] = ph.delong_influence(macro_delta, macro_squares)
    tests["roc_auc_micro"] = ph.delong_influence(micro_delta, micro_squares)
    # average precision: defined where the ROC-AUC is (a label with positives and negatives)
    differences = [a[1] - b[1] for a, b in zip(ranking["after"], ranking["before"], strict=True) if a[0] is not None]
    per_label_differences = differences[:-1] if ranking["after"][-1][0] is not None else differences
    ap_deltas = {
        "average_precision_macro": float(np.mean(per_label_differences)) if per_label_differences else None,
        "average_precision_micro": differences[-1] if ranking["after"][-1][0] is not None else None,
    }
    positions = pt.subset_positions(rows, pt.ap_rows(labels)).tolist()
    sample = _sample(con, "ml_paired_cells", "label_id", ("truth", "prob_after", "prob_before"), positions)
    truth, after, before = (np.array([r[i] for r in sample], dtype=dtype) for i, dtype in ((0, bool), (1, float), (2, float)))

    def ap_change(weights: np.ndarray) -> dict[str, np.ndarray]:
        this, other = ph.multilabel_ap(truth, after, weights), ph.multilabel_ap(truth, before, weights)
        return {k: this[k] - other[k] for k in this}

    return tests | ph.sample_bootstrap(ap_deltas, ap_change, len(sample), rows, pt.AP_RESAMPLES)


def regression_resampled_tests(con, outputs: int, own: list[dict] | None = None) -> dict[str, dict]:
    """The regression tests that are not per-row means, over reg_paired_complete: the block
    bootstrap of sums and maxima, the row-sample bootstrap of the rank statistics; each delta is
    the metric's own SQL (heads_metrics.regression_values) over the paired rows, this - other.
    `own`: this run's per-output values, given when the paired rows are every row it evaluated
    (then they are its values over the paired rows, and its Kendall SQL need not run again)."""
    from scorekeeper.evaluation.heads_metrics import regression_values

    rows = con.execute("SELECT count(DISTINCT row_index) FROM reg_paired_complete").fetchone()[0]
    if not rows:
        return {}
    values = {}
    for side in ("after", "before"):
        if side == "after" and own is not None:
            values[side] = dict(enumerate(own))
            continue
        con.execute(
            statement(
                "CREATE OR REPLACE TEMP TABLE {table} AS SELECT row_index, output_id, y AS truth, {side} AS prediction FROM reg_paired_complete",
                table=f"reg_side_{side}",
                side=side,
            )
        )
        values[side] = regression_values(con, f"reg_side_{side}", outputs)

    def delta(name: str) -> float | None:
        pairs = [(values["after"][o][name], values["before"][o][name]) for o in range(outputs)]
        return None if any(a is None or b is None for a, b in pairs) else float(np.mean([a - b for a, b in pairs]))

    width = outputs * len(ph.SUM_FIELDS)
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = _block_codes(con, "reg_paired_complete", key)
    got = con.execute(sql("paired_regression_blocks.sql", block=key)).fetchall()
    keys = np.array([r[0] for r in got], dtype=object)
    index = (np.array([r[1] for r in got], dtype=np.int64),)
    width_high = outputs * len(ph.HIGH_FIELDS)
    sums = _dense(
        keys, codes, index, np.array([r[2 : 2 + len(ph.SUM_FIELDS)] for r in got], dtype=np.float64), (outputs, len(ph.SUM_FIELDS))
    )
    highs = _dense(
        keys, codes, index, np.array([r[2 + len(ph.SUM_FIELDS) :] for r in got], dtype=np.float64), (outputs, len(ph.HIGH_FIELDS))
    )
    tests = ph.block_bootstrap(
        sums.reshape(len(codes), width),
        highs.reshape(len(codes), width_high),
        lambda t, h: ph.regression_sum_deltas(t, h, outputs),
        resamples,
        deltas={name: delta(name) for name in ph.SUMMED},
    )
    positions = pt.subset_positions(rows, ph.RANK_ROWS).tolist()
    sample = _sample(con, "reg_paired_complete", "output_id", ("y", "after", "before"), positions)
    y, after, before = (np.array([r[i] for r in sample], dtype=np.float64) for i in range(3))
    rank_deltas = {m.name: delta(m.name) for m in compared_metrics(HeadKind.REGRESSION) if m.compared is Pairing.SAMPLED}
    return tests | ph.sample_bootstrap(
        rank_deltas, lambda w: ph.regression_rank_deltas(y, after, before, w), len(sample), int(rows), ph.RANK_RESAMPLES
    )


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
    rng = np.random.default_rng(BOOTSTRAP_SEED)  # multinomial counts per block, CHUNK resamples at a time
    boot = [changes(weights @ sums) for weights in pt._draws(rng, len(sums), np.ones(len(sums)), BOOTSTRAP_RESAMPLES)]
    boot_mae, boot_rmse = (np.concatenate([b[i] for b in boot]) for i in (0, 1))
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


def _regression(con, keys: tuple[Fragment, Fragment], outputs: int, metrics: MetricsDocument) -> dict:
    at = Fragment("[l.label_id + 1]" if outputs > 1 else "")
    con.execute(
        statement(
            """
        CREATE TEMP TABLE reg_paired AS
        SELECT * FROM (
            SELECT r.row_index, l.label_name AS output, r.truth{at} AS y, r.prediction{at} AS after, o.prediction{at} AS before
            FROM reg_rows AS r
            CROSS JOIN labels AS l
            JOIN staged AS s ON s.row_index = r.row_index
            JOIN other AS o ON {other_key} = {this_key}
        ) WHERE isfinite(y)
        """,
            at=at,
            other_key=keys[0],
            this_key=keys[1],
        )
    )
    rows = con.execute("SELECT count(DISTINCT row_index) FROM reg_paired").fetchone()[0]
    result: dict = {"rows_compared": int(rows)}
    if not rows:
        return result
    blocks = block_key(rows, BOOTSTRAP_BLOCKS)
    per_output = {}
    for (output,) in con.execute("SELECT DISTINCT output FROM reg_paired ORDER BY output").fetchall():
        sums = con.execute(
            statement(
                """
            SELECT count(*), sum(abs(after - y)), sum(abs(before - y)), sum((after - y) ^ 2), sum((before - y) ^ 2)
            FROM reg_paired WHERE output = ? GROUP BY {blocks}
            """,
                blocks=blocks,
            ),
            [output],
        ).fetchnumpy()
        per_output[output] = paired_error_changes(np.column_stack([np.asarray(v, dtype=np.float64) for v in sums.values()]))
    for v in per_output.values():
        v.pop("rmse_test")
    con.execute(sql("paired_regression_rows.sql"), {"outputs": outputs})
    tests = row_mean_tests(con, "reg_paired_rows", HeadKind.REGRESSION)
    con.execute(
        """
        CREATE TEMP TABLE reg_paired_complete AS
        SELECT p.row_index, l.label_id AS output_id, p.y, p.after, p.before
        FROM reg_paired AS p JOIN labels AS l ON l.label_name = p.output
        WHERE p.row_index IN (
            SELECT row_index FROM reg_paired WHERE isfinite(after) AND isfinite(before) GROUP BY row_index HAVING count(*) = $outputs
        )
        """,
        {"outputs": outputs},
    )
    complete = con.execute("SELECT count(DISTINCT row_index) FROM reg_paired_complete").fetchone()[0]
    own = [dict(v) for v in (metrics.per_output or {}).values()] if complete == metrics.evaluated and metrics.per_output else None
    tests |= regression_resampled_tests(con, outputs, own)
    if outputs == 1:
        return result | next(iter(per_output.values())) | {"rows_compared": int(rows), "tests": tests}
    return result | {"per_output": per_output, "tests": tests}


def compare_head(con, run: Location, other: Location, metrics: MetricsDocument, head: str) -> Comparison:
    """metrics.json's `comparison` for a multi_label or regression run."""
    recorded = other.read_json(RunFolder.METRICS)
    other_head = recorded.get("head", HeadKind.SINGLE_LABEL)
    if other_head != head:
        from scorekeeper.errors import InputError

        raise InputError(f"compare_to: run {posixpath.basename(other.path)!r} scored a {other_head} head, this run a {head} head")
    other_metrics = RecordedMetrics.parse(recorded) or RecordedMetrics()
    matched_on, keys = open_other(con, run, other)
    if head == HeadKind.MULTI_LABEL:
        found = _multi_label(con, keys, label_positions(metrics.labels or [], value_at(other_metrics, ("labels",))))
    else:
        found = _regression(con, keys, len(metrics.labels or []), metrics)
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

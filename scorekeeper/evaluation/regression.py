"""The evaluation of a regression head: the raw values, one per output (docs/contracts.md, sections 7 and 9).

The truth is a number per row (a list of numbers, in output order, for several outputs), checked
against the head's outputs here as before scoring. The metrics are computed in SQL
(sql/regression/) over one table:

    reg_rows(row_index BIGINT, id VARCHAR, prediction DOUBLE or DOUBLE[], truth DOUBLE or DOUBLE[] [, text VARCHAR])
        One row per scored row; a list per row when the head has several outputs (model label
        order). A null or NaN truth is a missing truth (regression_cells.sql says how rows
        missing some outputs, or with values that are not finite, are counted apart).

A metric that cannot be computed is null, never NaN: r2 and explained_variance are null for a
constant truth and pearson, spearman and kendall_tau_b for a constant side or one row (scikit-learn
answers 1.0 or 0.0 there by convention, scipy NaN). With several outputs each top-level metric is
the mean of the per-output values (scikit-learn's "uniform_average"), null where any output's is,
and `per_output` holds each output's. The comparison's paired rows and tests are here too
(pair, regression_resampled_tests); what every kind shares is compare.py's.
"""

from __future__ import annotations

import logging
import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from scorekeeper.evaluation import drift as d
from scorekeeper.evaluation.base import EXCERPT_CHARS, Coverage, Evaluation, KindReport, LengthSide, finite_number
from scorekeeper.evaluation.compare import Keys, Paired, block_codes, block_key, compare, dense, paired_sample, row_mean_tests
from scorekeeper.evaluation.duck import Fragment, identifier, number, one_row, records, sql, statement
from scorekeeper.evaluation.labelling import LabelFreeModel, PlanMetric, empty_targets, has_table, set_variables
from scorekeeper.evaluation.length_impact import ratio_sides
from scorekeeper.evaluation.signals import RunSide, SignalViews
from scorekeeper.evaluation.slices import as_parts, head_slices
from scorekeeper.evaluation.statistics import paired_blocks as ph
from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.evaluation.statistics.paired_tests import RESAMPLES as BOOTSTRAP_RESAMPLES
from scorekeeper.evaluation.statistics.paired_tests import SEED as BOOTSTRAP_SEED
from scorekeeper.evaluation.truth import STAGED_VALUE, check_regression_truth, truth_table
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import (
    Comparison,
    Drift,
    Estimated,
    GroundTruthSource,
    MetricsDocument,
    RecordedMetrics,
    ReferenceRecords,
    RegressionMetrics,
    RegressionSliceGroup,
    ResidualBin,
    ResidualBins,
    SliceGroups,
)
from scorekeeper.metrics.registry import BY_NAME, Pairing, SliceMetric, compared_metrics, run_metrics, scalar_metrics
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

SCATTER_POINTS = 3000  # past this many rows the predicted-vs-true plot is a 2-D histogram

DENSITY_BINS = 40

RESIDUAL_BINS = 30

LARGEST_ERRORS = 20

REGRESSION_SCALARS = tuple(m.name for m in scalar_metrics(HeadKind.REGRESSION))
# the compared metrics resampled through block sums (the registry's Pairing.RESAMPLED:
# paired_blocks.regression_sum_deltas); those of ranks and order (Pairing.SAMPLED) on a row sample
SUMMED = tuple(m.name for m in compared_metrics(HeadKind.REGRESSION) if m.compared is Pairing.RESAMPLED)

# The magnitudes (largest |truth or prediction|) between which the paired tests' sums of squares and
# products stay normal doubles (squares of 1e150 are 1e300; of 1e-140, 1e-280).
PAIRED_SAFE = (1e-140, 1e150)

# regression_metrics.sql's columns in the output's scale, and the power of the scale they carry
SCALED = {"mae": 1, "mse": 2, "rmse": 1, "max_error": 1, "median_absolute_error": 1, "mean_truth": 1, "mean_prediction": 1}


def unscale(value, scale: float, power: int = 1) -> float | None:
    """A value computed in units of `scale`, multiplied back (`power` times, one factor at a time so
    that no intermediate overflows before the result would); None when the result is not a
    representable double: it overflows, or underflows below the smallest normal double (a
    subnormal holds too few bits to be right to 1e-6)."""
    if value is None or math.isnan(float(value)):
        return None
    scaled = float(value)
    result = scaled
    for _ in range(power):
        result *= scale
    if not math.isfinite(result) or (scaled != 0.0 and abs(result) < sys.float_info.min):
        return None
    return result


def regression_metrics(con: Connection, outputs: list[str]) -> dict:
    """Every regression key of the contract over `reg_rows`: the mean over outputs at the top level,
    each output's values under `per_output`, and the report's data beside them."""
    _regression_input(con, len(outputs))
    con.execute(sql("regression_cells.sql"))
    status = dict(con.execute("SELECT status, count(*) FROM reg_status GROUP BY status").fetchall())
    evaluated = int(status.get("evaluated", 0))
    per_output = {outputs[i]: fields for i, fields in regression_values(con, "reg_cells", len(outputs)).items()}
    means = {}
    for key in REGRESSION_SCALARS:
        values = [fields[key] for fields in per_output.values()]
        known = [v for v in values if v is not None]
        means[key] = sum(known) / len(known) if len(known) == len(values) else None
    return {
        "evaluated": evaluated,
        "outputs": list(outputs),
        **means,
        "mape_rows": sum(fields["mape_rows"] for fields in per_output.values()),
        "no_truth_rows": int(status.get("no_truth", 0)),
        "partial_truth_rows": int(status.get("partial_truth", 0)),
        "not_finite_rows": int(status.get("not_finite", 0)),
        "per_output": per_output,
        **_regression_plots(con, outputs, evaluated),
    }


def regression_values(con: Connection, cells: str, outputs: int) -> dict[int, dict]:
    """Every regression scalar (and mape_rows) per output id over `cells`, a table in reg_cells'
    shape (row_index, output_id, truth, prediction): the run's own rows, or a comparison's paired rows."""
    per_output = {i: dict.fromkeys(REGRESSION_SCALARS) | {"mape_rows": 0} for i in range(outputs)}
    for fields in records(con.execute(sql("regression_metrics.sql", cells=cells))):
        # every scalar but the correlations, which the queries below fill in; the `_s` columns are in
        # the output's scale (regression_metrics.sql) and are multiplied back here
        scale = float(fields["scale"])
        unscaled = {k: unscale(fields[f"{k}_s"], scale, power) for k, power in SCALED.items()}
        per_output[fields["output_id"]] |= (
            {k: finite_number(fields[k]) for k in REGRESSION_SCALARS if k in fields} | unscaled | {"mape_rows": int(fields["mape_rows"])}
        )
    for output_id, r in con.execute(sql("regression_correlation.sql", x="truth", y="prediction", source=cells)).fetchall():
        per_output[output_id]["pearson"] = finite_number(r)
    ranks = f"{cells}_ranks"
    con.execute(sql("regression_ranks.sql", cells=cells, ranks=ranks))
    for output_id, r in con.execute(sql("regression_correlation.sql", x="truth_rank", y="prediction_rank", source=ranks)).fetchall():
        per_output[output_id]["spearman"] = finite_number(r)
    for output_id in range(outputs):
        per_output[output_id]["kendall_tau_b"] = kendall_tau_b(con, ranks, output_id)
    return per_output


def kendall_tau_b(con: Connection, ranks: str, output_id: int) -> float | None:
    """Kendall's tau-b of one output from `ranks` (regression_ranks.sql's average ranks of truth and
    prediction: tau-b counts only order and ties, so the ranks give the values' tau), by
    scipy.stats.kendalltau (variant "b": (C - D) / sqrt(n0 - n1) / sqrt(n0 - n2), ties in truth n1,
    in prediction n2, of n0 = n(n-1)/2 pairs), O(n log n). Null for fewer than 2 rows or a constant
    side (scipy's NaN)."""
    from scipy.stats import kendalltau

    side = con.execute(sql("regression_kendall.sql", ranks=ranks), {"output_id": output_id}).fetchnumpy()
    if len(side["truth"]) < 2:
        return None
    # handed over, not kept here: scipy's sorted copies replace them
    with np.errstate(divide="ignore", invalid="ignore"):  # its p-value, not read here, divides by n - 2
        return finite_number(kendalltau(side.pop("truth"), side.pop("prediction")).statistic)


def _regression_input(con: Connection, outputs: int) -> None:
    """The view reg_input: reg_rows with prediction and truth as lists (a scalar column wrapped) and a text column."""
    types = {name: kind for name, kind, *_ in con.execute("DESCRIBE reg_rows").fetchall()}

    def as_list(column: str) -> Fragment:
        if types[column].endswith("[]"):
            return statement("{c}::DOUBLE[]", c=column)
        return statement("CASE WHEN {c} IS NULL THEN NULL ELSE [{c}::DOUBLE] END", c=column)

    text = identifier("text") if "text" in types else Fragment("NULL::VARCHAR")
    con.execute(sql("regression_input.sql", text=text, prediction=as_list("prediction"), truth=as_list("truth")))
    bad = con.execute(
        "SELECT row_index FROM reg_input WHERE len(prediction) <> ? OR len(truth) <> ? ORDER BY row_index LIMIT 5", [outputs, outputs]
    ).fetchall()
    if bad:
        raise ValueError(f"reg_rows: rows {[r for (r,) in bad]} do not hold one prediction and one truth per output ({outputs})")


def _regression_plots(con: Connection, outputs: list[str], evaluated: int) -> dict:
    """The data of the regression report's plots and tables, per output name."""
    residuals: dict[str, dict] = {}
    for output_id, lo, hi, b, n in con.execute(sql("regression_residuals.sql"), {"bins": RESIDUAL_BINS}).fetchall():
        half = (hi * 0.5 - lo * 0.5) / RESIDUAL_BINS if hi > lo else 0.0  # on halves: hi - lo may overflow
        hist = residuals.setdefault(
            outputs[output_id], {"edges": [(lo * 0.5 + k * half) * 2 for k in range(RESIDUAL_BINS)] + [hi], "counts": [0] * RESIDUAL_BINS}
        )
        hist["counts"][b] = int(n)
    scatter: dict[str, dict] = {}
    if evaluated <= SCATTER_POINTS:
        for output_id, truth, prediction in con.execute(
            "SELECT output_id, truth, prediction FROM reg_cells ORDER BY output_id, row_index"
        ).fetchall():
            points = scatter.setdefault(outputs[output_id], {"kind": "points", "truth": [], "prediction": []})
            points["truth"].append(truth)
            points["prediction"].append(prediction)
    else:
        for output_id, lo, hi, tb, pb, n in con.execute(sql("regression_density.sql"), {"bins": DENSITY_BINS}).fetchall():
            cells = scatter.setdefault(outputs[output_id], {"kind": "density", "lo": lo, "hi": hi, "bins": DENSITY_BINS, "cells": []})
            cells["cells"].append([int(tb), int(pb), int(n)])
    deciles: dict[str, list] = {}
    for output_id, decile, n, mean_p, mean_t, lo, hi in con.execute(sql("regression_deciles.sql")).fetchall():
        deciles.setdefault(outputs[output_id], []).append(
            {
                "decile": int(decile),
                "rows": int(n),
                "mean_prediction": mean_p,
                "mean_truth": mean_t,
                "min_prediction": lo,
                "max_prediction": hi,
            }
        )
    largest: dict[str, list] = {}
    for output_id, i, row_id, text, truth, prediction in con.execute(
        sql("regression_largest_errors.sql"), {"chars": EXCERPT_CHARS, "limit": LARGEST_ERRORS}
    ).fetchall():
        largest.setdefault(outputs[output_id], []).append(
            {"row_index": int(i), "id": row_id, "text": text, "truth": truth, "prediction": prediction, "error": prediction - truth}
        )
    return {"residual_histogram": residuals, "predicted_vs_true": scatter, "calibration_deciles": deciles, "largest_errors": largest}


def regression_resampled_tests(con: Connection, outputs: int, own: list[dict] | None = None) -> dict[str, dict]:
    """The regression tests that are not per-row means, over reg_paired_complete: the block
    bootstrap of sums and maxima, the row-sample bootstrap of the rank statistics; each delta is
    the metric's own SQL (regression_values) over the paired rows, this - other.
    `own`: this run's per-output values, given when the paired rows are every row it evaluated
    (then they are its values over the paired rows, and its Kendall SQL need not run again)."""

    rows = one_row(con.execute("SELECT count(DISTINCT row_index) FROM reg_paired_complete"))[0]
    if not rows:
        return {}
    values = {}
    for side in ("after", "before"):
        if side == "after" and own is not None:
            values[side] = dict(enumerate(own))
            continue
        con.execute(sql("paired_regression_side.sql", table=f"reg_side_{side}", side=side))
        values[side] = regression_values(con, f"reg_side_{side}", outputs)

    def delta(name: str) -> float | None:
        pairs = [(values["after"][o][name], values["before"][o][name]) for o in range(outputs)]
        return None if any(a is None or b is None for a, b in pairs) else float(np.mean([a - b for a, b in pairs]))

    width = outputs * len(ph.SUM_FIELDS)
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = block_codes(con, "reg_paired_complete", key)
    got = con.execute(sql("paired_regression_blocks.sql", block=key)).fetchall()
    keys = np.array([r[0] for r in got], dtype=object)
    index = (np.array([r[1] for r in got], dtype=np.int64),)
    width_high = outputs * len(ph.HIGH_FIELDS)
    sums = dense(
        keys, codes, index, np.array([r[2 : 2 + len(ph.SUM_FIELDS)] for r in got], dtype=np.float64), (outputs, len(ph.SUM_FIELDS))
    )
    highs = dense(
        keys, codes, index, np.array([r[2 + len(ph.SUM_FIELDS) :] for r in got], dtype=np.float64), (outputs, len(ph.HIGH_FIELDS))
    )
    tests = ph.block_bootstrap(
        sums.reshape(len(codes), width),
        highs.reshape(len(codes), width_high),
        lambda t, h: ph.regression_sum_deltas(t, h, outputs, SUMMED),
        resamples,
        deltas={name: delta(name) for name in SUMMED},
    )
    positions = pt.subset_positions(rows, ph.RANK_ROWS).tolist()
    sample = paired_sample(con, "reg_paired_complete", "output_id", ("y", "after", "before"), positions)
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
    boot = [changes(weights @ sums) for weights in pt.multinomial_draws(rng, len(sums), np.ones(len(sums)), BOOTSTRAP_RESAMPLES)]
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


def _regression(con: Connection, keys: tuple[Fragment, Fragment], outputs: int, metrics: MetricsDocument) -> dict:
    at = Fragment("[l.label_id + 1]" if outputs > 1 else "")
    con.execute(sql("paired_regression.sql", at=at, other_key=keys[0], this_key=keys[1]))
    rows, top = one_row(
        con.execute(
            "SELECT count(DISTINCT row_index), max(greatest(abs(y), coalesce(abs(after), 0), coalesce(abs(before), 0))) FROM reg_paired"
        )
    )
    result: dict = {"rows_compared": int(rows)}
    if not rows:
        return result
    if top is not None and not PAIRED_SAFE[0] <= top <= PAIRED_SAFE[1]:
        # The paired tests work on sums of squared errors and products of centred values, whose
        # terms overflow past about 1e154 and underflow below about 1e-154: rather than a finite
        # wrong interval, they are left out (the deltas of the metrics themselves are exact).
        logging.getLogger(__name__).warning(
            "compare_to: the paired tests of this regression comparison are left out: its values reach %.3e, where their sums "
            "of squares are not representable; the metrics' deltas are given",
            top,
        )
        return result
    blocks = block_key(rows, ph.BOOTSTRAP_BLOCKS)
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
    con.execute(sql("paired_regression_complete.sql"), {"outputs": outputs})
    complete = one_row(con.execute("SELECT count(DISTINCT row_index) FROM reg_paired_complete"))[0]
    own = [dict(v) for v in (metrics.per_output or {}).values()] if complete == metrics.evaluated and metrics.per_output else None
    tests |= regression_resampled_tests(con, outputs, own)
    if outputs == 1:
        return result | next(iter(per_output.values())) | {"rows_compared": int(rows), "tests": tests}
    return result | {"per_output": per_output, "tests": tests}


def pair(ev: Evaluation, keys: Keys, metrics: MetricsDocument, other_metrics: RecordedMetrics, other: Location) -> Paired:
    """The paired change of MAE and RMSE (per output with several) and the paired tests of every compared metric."""
    found = _regression(ev.con, keys, len(metrics.labels or []), metrics)
    rows, tests = found.pop("rows_compared"), found.pop("tests", {})
    return Paired(rows, found, tests)


# -- what a run with ground truth records for a later run's estimate, and that estimate (docs/drift.md) ----


def regression_signal(outputs: list[str], i: int) -> str:
    """The drift signal of output i: `prediction`, or `prediction:NAME` with several outputs."""
    return "prediction" if len(outputs) == 1 else f"prediction:{outputs[i]}"


def regression_records(con: Connection, outputs: list[str]) -> dict[str, Any]:
    """A regression run's residual_bins per output: the `prediction` signal's bins of its own
    predictions (its merged deciles, as a later run's drift step makes them) and the evaluated
    cells' MAE in each."""
    signals = [regression_signal(outputs, i) for i in range(len(outputs))]
    edges: dict[str, list[float]] = {}
    for i, signal in enumerate(signals):
        # the drift step's view of the signal, with this run on both sides: only the reference side is read
        if len(outputs) > 1:
            position = number(i + 1)
            con.execute(sql("drift_prediction_output.sql", view="residual_signal", reference="predictions", current="predictions",
                            reference_index=position, current_index=position))  # fmt: skip
        else:
            con.execute(sql("drift_prediction.sql", view="residual_signal", reference="predictions", current="predictions"))
        edges[signal] = d.reference_edges(con, "residual_signal")
    con.execute(sql("drift_edges.sql"), {"signals": signals, "edges": [edges[s] for s in signals]})
    con.execute(sql("drift_labels.sql"), {"ids": list(range(len(outputs))), "names": signals})
    out = {name: ResidualBins(edges=edges[s], bins=[ResidualBin(rows=0, mae=None) for _ in range(len(edges[s]) + 1)])
           for name, s in zip(outputs, signals, strict=True)}  # fmt: skip
    for output_id, b, n, mae in con.execute(sql("residual_bins.sql")).fetchall():
        out[outputs[output_id]].bins[b] = ResidualBin(rows=int(n), mae=mae)
    return {"residual_bins": out}


def residual_estimate(estimated: Estimated, reference: RecordedMetrics, outputs: list[str], drift: Drift | None) -> None:
    """MAE per output from the reference's residual_bins over this run's `prediction` signal's bins."""
    residuals = reference.residual_bins
    if not residuals:
        estimated.unavailable = "the reference run records no residual_bins (no ground truth, or written by an older version)"
        return
    if drift is None:
        estimated.unavailable = "no drift signals to bin this run's predictions"
        return
    per_output: dict[str, float | None] = {}
    for i, name in enumerate(outputs):
        signal = drift.binned().get(regression_signal(outputs, i))
        recorded = residuals.get(name)
        recorded_bins = recorded.bins if recorded is not None else []
        edges = recorded.edges if recorded is not None else None
        bins = [b for b in signal.bins if not b.null] if signal else []
        if signal is None or len(bins) != len(recorded_bins) or [b.upper for b in bins][:-1] != edges:
            per_output[name] = None
            continue
        overall = _overall_mae(recorded_bins)
        n = sum(b.current_rows for b in bins)
        total = sum(b.current_rows * (r.mae if r.mae is not None else overall) for b, r in zip(bins, recorded_bins, strict=True))
        per_output[name] = total / n if n else None
    estimated.per_output = per_output
    known = [v for v in per_output.values() if v is not None]
    estimated.mae = sum(known) / len(known) if known and len(known) == len(per_output) else None
    if estimated.mae is None:
        estimated.unavailable = "the reference's residual bins do not match this run's prediction signal"


def _overall_mae(bins: list[ResidualBin]) -> float:
    """The reference's MAE over all its evaluated cells of an output: an empty bin's estimate."""
    rows = sum(b.rows for b in bins)
    return sum(b.rows * (b.mae or 0.0) for b in bins) / rows if rows else 0.0


# The evaluated rows as the slices and the length split read them (head_slice_rows: |e| per row).
SLICE_ROWS = "regression_slice_rows.sql"


def slice_group(rows: int, num: float, den: float, exact: int, wilson, ci) -> dict:
    """A slice group's fields: MAE (the mean of the outputs') with the bootstrap interval."""
    return {"rows": rows, "mae": num / den, "mae_ci": ci}


def slice_breakdown(con: Connection, slice_columns: list[str]) -> tuple[dict, dict]:
    """metrics.json `slices` and `slices_truncated` of a regression run (over `reg_cells`)."""
    return head_slices(con, SLICE_ROWS, slice_group, slice_columns)


class Regression:
    kind = HeadKind.REGRESSION
    report = KindReport(
        slice_metrics=(SliceMetric(BY_NAME["mae"], "mae_ci", "bootstrap"),),
        slice_caption=None,
        sections=("per_output",),
        # the per-output table: every metric only a regression head has, in the registry's order
        table_metrics=tuple(
            m.name for m in run_metrics(HeadKind.REGRESSION) if m.heads == {HeadKind.REGRESSION} and not m.monitoring and not m.labelling
        ),
    )

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        return truth_table(ev.con, ev.run, ev.manifest, STAGED_VALUE, Fragment("value DOUBLE"), rule=False)

    def check_truth(self, ev: Evaluation, column: ColumnKind | None) -> TruthMatching | None:
        """A truth of numbers has no rule: only its shape is checked (one number per output)."""
        check_regression_truth(ev.con, ev.labels, ev.truth_column)
        return None

    def metrics(self, ev: Evaluation, coverage: Coverage) -> RegressionMetrics:
        check_regression_truth(ev.con, ev.labels, ev.truth_column)  # checked before scoring too; a resumed run's truth again
        ev.con.execute(sql("regression_evaluated.sql"))
        return RegressionMetrics.model_validate(regression_metrics(ev.con, ev.labels))

    def reference_records(self, ev: Evaluation) -> ReferenceRecords:
        return ReferenceRecords.model_validate(regression_records(ev.con, ev.labels))

    def slices(self, ev: Evaluation) -> tuple[SliceGroups, dict[str, int]]:
        groups, truncated = slice_breakdown(ev.con, ev.slice_columns)
        return as_parts(groups, RegressionSliceGroup), truncated

    def length_sides(self, ev: Evaluation) -> dict[bool, LengthSide]:
        return ratio_sides(ev.con, SLICE_ROWS)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        return compare(ev, baseline, document, pair)

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None:
        """The prediction (numeric): `prediction`, or `prediction:OUTPUT` per output both models have."""
        if len(current.labels) <= 1:
            views.view("prediction", "drift_prediction.sql", True)
            return
        for i, name in views.skip_unshared("prediction:", reference, current):
            # each run's own list position of the output (1-based), named as this run's
            positions = {"reference_index": number(reference.labels.index(name) + 1), "current_index": number(i + 1)}
            views.view(f"prediction:{name}", "drift_prediction_output.sql", True, **positions)

    def estimate(self, con: Connection, estimated: Estimated, labels: list[str], reference: RecordedMetrics, drift: Drift) -> None:
        residual_estimate(estimated, reference, labels, drift)

    # -- section 13: the targets and label-free predictions of the prediction-powered metrics --------

    def label_free(self, ev: Evaluation, reference: RecordedMetrics | None) -> LabelFreeModel:
        """pp_label_free and pp_cells: per output, f = the reference's MAE in the row's prediction bin
        (its residual_bins), 0 without one; the headline mae is the mean over the outputs."""
        residuals = (reference.residual_bins or {}) if reference is not None else {}
        uses = bool(residuals) and all(name in residuals for name in ev.labels)
        edges, maes = [], []
        for name in ev.labels:
            recorded = residuals.get(name) if uses else None
            bins = recorded.bins if recorded is not None else []
            overall = _overall_mae(bins)
            edges.append([float(e) for e in recorded.edges] if recorded is not None else [])
            maes.append([float(b.mae) if b.mae is not None else overall for b in bins] or [0.0])
        kinds = {name: kind for name, kind, *_ in ev.con.execute("DESCRIBE predictions").fetchall()}
        prediction = Fragment("prediction::DOUBLE[]") if kinds["prediction"].endswith("[]") else Fragment("[prediction::DOUBLE]")
        params = {"reference": uses, "edges": edges, "maes": maes, "outputs": ev.labels}
        set_variables(ev.con, **params)
        ev.con.execute(sql("regression_label_free.sql", prediction=prediction))
        set_variables(ev.con, f_zero=_f_zero_everywhere(ev.con, uses, maes))
        per_output = (
            tuple(PlanMetric(f"mae:{name}", "mean", "mae", terms=(name,), upper=None) for name in ev.labels) if len(ev.labels) > 1 else ()
        )
        return LabelFreeModel(
            metrics=(PlanMetric("mae", "mean", "mae", terms=tuple(ev.labels), upper=None), *per_output),
            headline="mae",
            sample_target=None,
            uses_reference=uses,
            classical_only=not uses,
            f_target=("mae", ev.labels[0]) if len(ev.labels) == 1 else None,  # pp_cell_totals is empty then
        )

    def label_targets(self, ev: Evaluation) -> None:
        """pp_targets over the evaluated rows: each output's absolute error."""
        if not has_table(ev.con, "reg_status"):
            empty_targets(ev.con)
            return
        set_variables(ev.con, outputs=ev.labels)
        ev.con.execute(sql("regression_targets.sql"))

    def label_free_variance(self, ev: Evaluation, reference: RecordedMetrics | None, rows: int) -> float | None:
        """mae's label-free estimate is taken as exact with a reference; without one there is none (no estimate_bias)."""
        return 0.0 if reference is not None else None


def _f_zero_everywhere(con: Connection, uses: bool, maes: list[list[float]]) -> bool:
    """Whether every scored row's label-free f is 0 (then u is 1 on every row): without a reference
    always; with one, never when every bin's MAE is positive (every row's f is a mean of them), else
    as the rows' f say (a pass over them)."""
    if not uses:
        return True
    if all(mae > 0 for output in maes for mae in output):
        return False
    (zero,) = one_row(con.execute("SELECT coalesce(max(f) = 0, false) FROM pp_label_free_f"))
    return bool(zero)


EVALUATION = Regression()

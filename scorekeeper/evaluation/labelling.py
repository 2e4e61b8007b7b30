"""Labelling plans and prediction-powered evaluation (docs/labelling.md, SPEC section 13).

A run with `label_budget` B > 0 draws a Poisson sample of its N scored rows to be labelled: each
row's inclusion probability pi_i is proportional to a weight (its uncertainty, `active`, or 1,
`uniform`) capped at 1 and scaled so that they sum to min(B, N); row i is in the plan when U_i <
pi_i, U_i read from sha256(f"{run_id}:{row_index}"), so a rerun of the run draws the same plan.
When labels come back (a rerun under the same run name with ground truth for plan rows), every
metric is estimated from the labelled plan rows L and a label-free prediction f_i on every row:

    theta(lambda) = (1/N) [ sum_N lambda f_i + sum_L (Y_i - lambda f_i) / pi_i ]
    var(lambda)   = (1/N^2) sum_L (1 - pi_i) (Y_i - lambda f_i)^2 / pi_i^2

with lambda tuned per target, F1 metrics as functions of estimated totals (linearised variance),
the sample alone (Hajek ratio) as `classical`, and `estimate_bias` testing the label-free estimate.

What is kind-specific (the targets Y and the predictions f of each metric, the label-free estimate's
own variance) is the head kind's (HeadEvaluation.label_free / label_targets / label_free_variance,
in single_label.py, multi_label.py, regression.py, with their SQL in sql/labelling/). The per-row
work is SQL over the run's files; Python holds per-target sums and the labelled rows' cells.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from scorekeeper.errors import InputError
from scorekeeper.evaluation.duck import Fragment, identifier, one_row, parquet_uri, parquet_view, sql
from scorekeeper.metrics.document import EstimateBias, LabelPlan, PredictionPowered, PredictionPoweredMetric, RecordedMetrics
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection
    from scorekeeper.params import ScoreRequest

Z95 = 1.959963984540054
PLAN_FILE = "label_plan.parquet"  # under report/ (published), and under work/ until the report is
PLAN_REPORT = f"{RunFolder.REPORT_DIR}/{PLAN_FILE}"
PLAN_WORK = f"work/{PLAN_FILE}"
SMALL_SAMPLE_ROWS = 300
SMALL_SAMPLE_CLASS = 30
MISSING_AT_RANDOM = (
    "plan rows without ground truth are taken to be missing at random within the plan: every labelled row's "
    "inclusion probability is multiplied by the response rate"
)


@dataclass(frozen=True)
class PlanMetric:
    """One metric of `prediction_powered.metrics`: a mean of per-row targets, or an F1 of totals."""

    name: str  # its key in prediction_powered.metrics
    kind: Literal["mean", "f1_macro", "f1_micro"]
    source: str  # the `metric` of pp_cells / pp_targets rows it reads
    terms: tuple[str, ...] | None = None  # a mean over these terms of `source` only (None: all of them)
    upper: float | None = 1.0  # the top of its range (None: unbounded); the bottom is 0


@dataclass(frozen=True)
class LabelFreeModel:
    """What a head kind's label_free() made: the views pp_label_free (row_index, f, u) and pp_cells
    (row_index, metric, term, f) over every scored row, and how its metrics read them."""

    metrics: tuple[PlanMetric, ...]
    headline: str  # estimate_bias's metric: accuracy, micro_f1, mae
    sample_target: str | None  # small_sample's 0/1 per-row target (None: |L| alone decides)
    uses_reference: bool  # f came from the reference's calibration (else from the model's own outputs)
    classical_only: bool = False  # f is 0 on every row (regression without a reference): value and ci are the classical ones
    # the target whose f is pp_label_free's f: its total over every row is the design's pass's (pp_scale's
    # sum_f), so the kind's pp_cell_totals leaves it out (None: pp_cell_totals holds every target's)
    f_target: tuple[str, str] | None = None


@dataclass(frozen=True)
class LabelRequest:
    """The labelling asked of a run: its key (the run id), budget and sampling, the reference run whose
    calibration gives f (None: the model's own outputs), and whether the plan was drawn before
    (pinned: its rows are report/label_plan.parquet's)."""

    key: str
    budget: int
    sampling: Literal["active", "uniform"]
    reference_name: str | None = None
    reference: RecordedMetrics | None = None
    pinned: bool = False


def label_run(ev, kind, request: LabelRequest, scored: int, from_files: bool) -> tuple[LabelPlan, PredictionPowered | None]:
    """metrics.json `label_plan` (and work/label_plan.parquet) and, when plan rows have ground truth,
    `prediction_powered`. Refuses a plan over no scored row, and ground truth from files handed back
    to a pinned plan (drawn by an earlier run under this name) that labels none of its rows but
    others (the labels of another run's plan). A plan drawn now with labels outside it (a partial
    backfill) is evaluated: those rows take no part (labelled_outside_plan, SPEC 13)."""
    if scored == 0:
        raise InputError(
            f"label_budget {request.budget}: run {request.key} scored no rows, so there is nothing to draw a labelling plan from"
        )
    model, plan = draw_plan(ev, kind, request, scored)
    document, outside = prediction_powered(ev, kind, request, model, scored)
    if document is None and outside and from_files and request.pinned:
        (ids,) = ev.con.execute(
            "SELECT list(DISTINCT s.id::VARCHAR ORDER BY s.id::VARCHAR)[:3] FROM pp_labelled AS t "
            "JOIN staged AS s ON s.row_index = t.row_index ANTI JOIN pp_planned AS p ON p.row_index = t.row_index"
        ).fetchone()
        raise InputError(another_plans_labels(request.key, plan.rows, outside, ids or []))
    return plan, document


def another_plans_labels(key: str, plan_rows: int, outside: int, ids: list[str]) -> str:
    """The refusal of ground truth that labels none of run `key`'s plan rows but `outside` other rows
    of the run (a few of their `ids`): the labels of another run's plan."""
    return (
        f"ground_truth_uri labels none of the {plan_rows} rows of run {key}'s labelling plan but {outside} rows "
        f"outside it (ids {', '.join(ids)}, ...): labels of another run's plan? Label the rows of {PLAN_REPORT} of run {key}"
    )


def plan_labels_refusal(run: RunFolder, plan: dict, key: str, truth_path: str) -> str | None:
    """The evaluate step's refusal of another run's plan's labels, made before anything starts: the
    staged ground truth at `truth_path` (id, label) against the pinned plan's rows (its published
    label_plan.parquet) and the run's staged ids. None when some of its ids are the plan's, or none
    is the run's (the evaluate step judges those), or the run's files are not there to compare."""
    plan_file = PLAN_REPORT if run.exists(PLAN_REPORT) else PLAN_WORK
    if not (run.exists(plan_file) and run.exists(RunFolder.STAGED_INPUT)):
        return None
    from scorekeeper.evaluation.duck import connect_run

    con = connect_run(run)
    try:
        con.execute("SET VARIABLE pp_truth_file = ?", [truth_path])
        parquet_view(con, "planned", run, plan_file)
        parquet_view(con, "staged", run, RunFolder.STAGED_INPUT)
        in_plan, outside, ids = one_row(con.execute(sql("plan_labels.sql")))
    finally:
        con.close()
    if in_plan or not outside:
        return None
    return another_plans_labels(key, int(plan.get("rows") or 0), int(outside), list(ids or []))


def draw_plan(ev, kind, request: LabelRequest, scored: int) -> tuple[LabelFreeModel, LabelPlan]:
    """The plan of the run on `ev.con`: the view pp_design (f, u, w, pi, draw per scored row) and the
    table pp_planned (the plan's rows: row_index, f, u, pi), and metrics.json `label_plan`; writes
    work/label_plan.parquet."""
    con = ev.con
    con.execute(sql("plan_start.sql"))
    model = kind.label_free(ev, request.reference)
    set_variables(con, key=request.key, active=request.sampling == "active", target=min(request.budget, scored))
    con.execute(sql("plan_design.sql"))
    # pp_planned: the plan's rows with their f, u and pi, from one pass over pp_design that also sums pi
    # (the draw, sha256 of every row, only for a new plan; a pinned plan's rows are its file's)
    if request.pinned:
        set_variables(con, plan_file=parquet_uri(ev.run, PLAN_REPORT if ev.run.exists(PLAN_REPORT) else PLAN_WORK))
        pinned = Fragment("row_index IN (SELECT row_index FROM read_parquet(getvariable('pp_plan_file')))")
        con.execute(sql("plan_draw.sql", planned=pinned))
    else:
        con.execute(sql("plan_draw.sql", planned=Fragment("draw < pi")))
    rows, expected = con.execute("SELECT (SELECT count(*) FROM pp_planned), (SELECT expected FROM pp_drawn)").fetchone()
    _write_plan_file(ev)
    plan = LabelPlan(
        sampling=request.sampling,
        budget=request.budget,
        rows=int(rows),
        expected_rows=float(expected or 0.0),
        key=request.key,
        reference=request.reference_name if model.uses_reference else None,
    )
    return model, plan


def _write_plan_file(ev) -> None:
    """work/label_plan.parquet: the plan's rows in row_index order, row_index, id, the staged text
    column(s), the prediction columns, inclusion_probability, uncertainty, label_free (plan_rows.sql's
    view); and pp_plan_predictions, the plan rows' predictions read back from it (the one pass over
    the run's predictions for the plan's rows)."""
    con = ev.con
    staged = {name for (name, *_) in con.execute("DESCRIBE staged").fetchall()}
    names = [identifier(c) for c in ("text", "text_pair") if c in staged]
    con.execute(sql("plan_rows.sql", texts=Fragment(", ".join("s." + n for n in names))))
    fd, path = tempfile.mkstemp(suffix=".parquet", prefix="scorekeeper-plan-")
    os.close(fd)
    try:
        con.execute(Fragment("COPY (SELECT * FROM pp_plan_rows ORDER BY row_index) TO '" + path.replace("'", "''") + "' (FORMAT parquet)"))
        set_variables(con, plan_copy=path)
        plan_only = Fragment(", ".join([*names, "inclusion_probability", "uncertainty", "label_free"]))
        con.execute(sql("plan_predictions.sql", plan_only=plan_only))
        with open(path, "rb") as fh:
            ev.run.publish_bytes(fh.read(), "work", PLAN_FILE)
    finally:
        os.unlink(path)


def prediction_powered(ev, kind, request: LabelRequest, model: LabelFreeModel, scored: int) -> tuple[PredictionPowered | None, int]:
    """metrics.json `prediction_powered` from the plan's labelled rows (None when no plan row has a
    label), and the rows with ground truth outside the plan."""
    con = ev.con
    kind.label_targets(ev)
    plan_rows, labelled, outside = con.execute(
        "SELECT (SELECT count(*) FROM pp_planned), "
        "(SELECT count(DISTINCT t.row_index) FROM pp_targets AS t), "
        "(SELECT count(*) FROM pp_labelled AS t ANTI JOIN pp_planned AS p USING (row_index))"
    ).fetchone()
    plan_rows, labelled, outside = int(plan_rows), int(labelled), int(outside)
    if labelled == 0:
        return None, outside
    response = labelled / plan_rows
    set_variables(con, response=response)
    con.execute(sql("plan_sample.sql"))
    # each target's sum of f over every row (the kind's pp_cell_totals, and the design pass's sum of
    # pp_label_free's f for the target it is), and f on the sample's rows
    f_all = {(metric, term): float(total or 0.0) for metric, term, total in con.execute("SELECT * FROM pp_cell_totals").fetchall()}
    if model.f_target is not None:
        (total,) = one_row(con.execute("SELECT sum_f FROM pp_scale"))
        f_all[model.f_target] = float(total or 0.0)
    sample_f: dict[tuple[str, str], tuple[list, list]] = dict.fromkeys(f_all, ([], []))
    for metric, term, rows, fs in con.execute(sql("pp_totals.sql")).fetchall():
        sample_f[(metric, term)] = (rows or [], fs or [])
    targets = con.execute(
        "SELECT metric, term, list(row_index ORDER BY row_index), list(y ORDER BY row_index) FROM pp_targets GROUP BY ALL"
    ).fetchall()
    (order, pis) = con.execute("SELECT list(row_index ORDER BY row_index), list(pi ORDER BY row_index) FROM pp_sample").fetchone()
    sample = _Sample.of(order, pis, sample_f, {(m, t): (r, y) for m, t, r, y in targets})
    n = scored
    metrics = {spec.name: _estimate(spec, sample, f_all, n, model.classical_only) for spec in model.metrics}
    headline = next(spec for spec in model.metrics if spec.name == model.headline)
    v_lf = kind.label_free_variance(ev, request.reference if model.uses_reference else None, n)
    bias = None if v_lf is None else _estimate_bias(headline, sample, f_all, n, v_lf)
    small = labelled < SMALL_SAMPLE_ROWS
    if model.sample_target is not None:
        y = sample.y[(model.sample_target, "")]
        small = small or int(np.sum(y == 0)) < SMALL_SAMPLE_CLASS or int(np.sum(y == 1)) < SMALL_SAMPLE_CLASS
    document = PredictionPowered(
        method="prediction_powered",
        sampling=request.sampling,
        rows=n,
        plan_rows=plan_rows,
        labelled=labelled,
        unlabelled_plan_rows=plan_rows - labelled,
        labelled_outside_plan=outside,
        response_rate=response,
        small_sample=small,
        metrics=metrics,
        estimate_bias=bias,
    )
    if labelled < plan_rows:
        document.assumptions = MISSING_AT_RANDOM
    return document, outside


def set_variables(con: Connection, **values: Any) -> None:
    """DuckDB variables pp_NAME (read by the label-free SQL's views as getvariable('pp_NAME')): bool,
    int, list of numbers, list of lists of numbers, or list of text."""
    for name, value in values.items():
        identifier(name)  # a plain name
        if isinstance(value, bool | int | float | str):
            cast = ""
        elif value and all(isinstance(v, str) for v in value):
            cast = "::VARCHAR[]"
        elif any(isinstance(v, list | tuple) for v in value):
            cast = "::DOUBLE[][]"
            value = [[float(x) for x in v] for v in value]
        else:
            cast = "::DOUBLE[]"
            value = [float(x) for x in value]
        con.execute(Fragment("SET VARIABLE pp_" + name + " = ?" + cast), [value])


# -- the plan a rerun keeps ----------------------------------------------------------------------------


def pinned_plan(run: RunFolder) -> dict | None:
    """metrics.json `label_plan` of the run's last published evaluation, if it drew one."""
    if not run.exists(RunFolder.METRICS):
        return None
    recorded = RecordedMetrics.parse(run.read_json(RunFolder.METRICS))
    plan = getattr(recorded, "label_plan", None) if recorded is not None else None
    return plan if isinstance(plan, dict) and plan.get("budget") else None


def check_label_plan(request: ScoreRequest, run_id: str, run: RunFolder) -> dict | None:
    """The run's pinned plan, when it has one: a budget or sampling other than its own is refused, and
    so is a plan whose reference run is gone (its label-free predictions could not be recomputed)."""
    plan = pinned_plan(run)
    if plan is None:
        return None
    budget, sampling = int(plan["budget"]), str(plan.get("sampling"))
    if request.label_budget != budget or request.label_sampling != sampling:
        raise InputError(
            f"run {run_id} drew its labelling plan with label_budget {budget} and label_sampling {sampling} "
            f"(report/label_plan.parquet); a rerun keeps the plan: rerun with --label-budget {budget} --label-sampling {sampling}, "
            "or give another run name for a new plan"
        )
    reference = plan.get("reference")
    if reference:
        output = Location.from_uri(request.output_uri)
        refuse_unverified(RunFolder(output.fs, output.join(reference)), f"label_plan.reference {reference!r}")
    return plan


def label_request(request: ScoreRequest, run_id: str, run: RunFolder, drift_reference: str | None) -> LabelRequest | None:
    """What the evaluate step draws (or re-reads) the plan with; None without a label_budget. A pinned
    plan's f comes from the reference recorded with it, whatever drift_reference says now."""
    if not request.label_budget:
        return None
    plan = pinned_plan(run)
    name = (plan.get("reference") if plan is not None else drift_reference) or None
    from scorekeeper.evaluation.drift import recorded_reference

    reference = recorded_reference(Location.from_uri(request.output_uri).child(name)) if name else None
    return LabelRequest(
        key=run_id,
        budget=request.label_budget,
        sampling=request.label_sampling,
        reference_name=name,
        reference=reference,
        pinned=plan is not None,
    )


def has_table(con: Connection, name: str) -> bool:
    (found,) = one_row(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]))
    return bool(found)


def empty_targets(con: Connection) -> None:
    """pp_labelled and pp_targets of a run without ground truth: no row."""
    con.execute(sql("plan_no_truth.sql"))


# -- the estimator -------------------------------------------------------------------------------------


@dataclass
class _Sample:
    """The labelled plan rows' cells: per (metric, term) Y and f over L (one row order), and pi."""

    pi: np.ndarray
    y: dict[tuple[str, str], np.ndarray]
    f: dict[tuple[str, str], np.ndarray]

    @classmethod
    def of(cls, rows: list, pi: list, f: dict[tuple[str, str], tuple[list, list]], y: dict[tuple[str, str], tuple[list, list]]) -> _Sample:
        """From the sample's rows and pi (row_index order), and per target its (rows, values) of f and of Y."""
        ys, fs = {}, {}
        for key, (f_rows, f_values) in f.items():
            y_rows, y_values = y.get(key, ([], []))
            if list(f_rows) != list(rows) or list(y_rows) != list(rows):
                raise ValueError(f"prediction-powered cells: target {key} does not cover every labelled row")
            fs[key], ys[key] = np.asarray(f_values, dtype=float), np.asarray(y_values, dtype=float)
        return cls(pi=np.asarray(pi, dtype=float), y=ys, f=fs)

    def terms(self, source: str) -> list[str]:
        return [t for (m, t) in self.y if m == source]

    def lam(self, key: tuple[str, str]) -> float:
        y, f, pi = self.y[key], self.f[key], self.pi
        den = float(np.sum((1 - pi) * f * f / pi**2))
        if den == 0:
            return 0.0
        return min(1.0, max(0.0, float(np.sum((1 - pi) * y * f / pi**2)) / den))

    def total(self, key: tuple[str, str], f_all: float, lam: float) -> float:
        return lam * f_all + float(np.sum((self.y[key] - lam * self.f[key]) / self.pi))

    def var(self, e: np.ndarray) -> float:
        return float(np.sum((1 - self.pi) * e * e / self.pi**2))


def _interval(value: float | None, var: float | None, upper: float | None) -> list[float] | None:
    """theta -+ 1.96 sqrt(var), both ends clipped to the metric's range [0, upper] (an estimate beyond
    the range by more than the half-width gives [upper, upper] or [0, 0], never a lower end above the upper)."""
    if value is None or var is None:
        return None
    half = Z95 * math.sqrt(max(var, 0.0))
    top = upper if upper is not None else math.inf
    return [min(max(0.0, value - half), top), min(max(0.0, value + half), top)]


def _estimate(spec: PlanMetric, sample: _Sample, f_all: dict, n: int, classical_only: bool) -> PredictionPoweredMetric:
    if spec.kind == "mean":
        return _mean_metric(spec, sample, f_all, n, classical_only)
    return _f1_metric(spec, sample, f_all)


def _mean_terms(spec: PlanMetric, sample: _Sample) -> list[tuple[str, str]]:
    terms = spec.terms if spec.terms is not None else tuple(sample.terms(spec.source))
    return [(spec.source, t) for t in terms]


def _mean_metric(spec: PlanMetric, sample: _Sample, f_all: dict, n: int, classical_only: bool) -> PredictionPoweredMetric:
    keys = _mean_terms(spec, sample)
    lams = [sample.lam(k) for k in keys]
    value = sum(sample.total(k, f_all[k], lam) for k, lam in zip(keys, lams, strict=True)) / (len(keys) * n)
    e = sum(sample.y[k] - lam * sample.f[k] for k, lam in zip(keys, lams, strict=True)) / (len(keys) * n)
    var = sample.var(np.asarray(e, dtype=float))
    # the sample alone: the Hajek ratio of the per-row target (the mean over the terms)
    y = sum(sample.y[k] for k in keys) / len(keys)
    m = float(np.sum(1 / sample.pi))
    classical = float(np.sum(y / sample.pi)) / m
    classical_var = float(np.sum((1 - sample.pi) * (y - classical) ** 2 / sample.pi**2)) / m**2
    classical_ci = _interval(classical, classical_var, spec.upper)
    if classical_only:
        value, ci = classical, classical_ci
    else:
        ci = _interval(value, var, spec.upper)
    return PredictionPoweredMetric.model_validate(
        {"value": value, "ci": ci, "lambda": lams[0] if len(lams) == 1 else lams, "classical": classical, "classical_ci": classical_ci}
    )


def _f1_parts(spec: PlanMetric, sample: _Sample) -> list[tuple[str, tuple[str, str], tuple[str, str], tuple[str, str]]]:
    """(label, TP key, FP key, FN key) of an F1 metric's labels (micro_f1: one, named '')."""
    if spec.kind == "f1_micro":
        return [("", (spec.source, "TP"), (spec.source, "FP"), (spec.source, "FN"))]
    labels = [t[3:] for t in sample.terms(spec.source) if t.startswith("TP:")]
    return [(label, (spec.source, f"TP:{label}"), (spec.source, f"FP:{label}"), (spec.source, f"FN:{label}")) for label in labels]


def f1_of_totals(parts, totals: dict) -> tuple[float | None, dict]:
    """The (macro) F1 of the totals and its partial derivatives by total; labels with 2TP + FP + FN = 0 left out."""
    kept = [(tp, fp, fn) for _, tp, fp, fn in parts if 2 * totals[tp] + totals[fp] + totals[fn] != 0]
    grads: dict = {}
    if not kept:
        return None, grads
    f1s = []
    for tp, fp, fn in kept:
        a, b, c = totals[tp], totals[fp], totals[fn]
        d = 2 * a + b + c
        f1s.append(2 * a / d)
        grads[tp] = 2 * (b + c) / d**2 / len(kept)
        grads[fp] = grads[fn] = -2 * a / d**2 / len(kept)
    return sum(f1s) / len(f1s), grads


def _linearised(parts, sample: _Sample, f_all: dict, lams: dict) -> tuple[float | None, float | None]:
    totals = {k: sample.total(k, f_all[k], lams[k]) for _, *keys in parts for k in keys}
    value, grads = f1_of_totals(parts, totals)
    if value is None:
        return None, None
    e = sum(g * (sample.y[k] - lams[k] * sample.f[k]) for k, g in grads.items())
    return value, sample.var(np.asarray(e, dtype=float))


def _f1_metric(spec: PlanMetric, sample: _Sample, f_all: dict) -> PredictionPoweredMetric:
    parts = _f1_parts(spec, sample)
    keys = [k for _, *ks in parts for k in ks]
    lams = {k: sample.lam(k) for k in keys}
    value, var = _linearised(parts, sample, f_all, lams)
    classical, classical_var = _linearised(parts, sample, f_all, dict.fromkeys(keys, 0.0))
    return PredictionPoweredMetric.model_validate(
        {
            "value": value,
            "ci": _interval(value, var, spec.upper),
            "lambda": {k[1]: lams[k] for k in keys},
            "classical": classical,
            "classical_ci": _interval(classical, classical_var, spec.upper),
        }
    )


def _estimate_bias(spec: PlanMetric, sample: _Sample, f_all: dict, n: int, v_lf: float) -> EstimateBias:
    """The label-free estimate minus theta(1), its interval, and the p of their difference."""
    if spec.kind == "mean":
        keys = _mean_terms(spec, sample)
        label_free: float | None = sum(f_all[k] for k in keys) / (len(keys) * n)
        theta1: float | None = sum(sample.total(k, f_all[k], 1.0) for k in keys) / (len(keys) * n)
        e = sum(sample.y[k] - sample.f[k] for k in keys) / (len(keys) * n)
        var1: float | None = sample.var(np.asarray(e, dtype=float))
    else:
        parts = _f1_parts(spec, sample)
        label_free, _ = f1_of_totals(parts, {k: f_all[k] for _, *ks in parts for k in ks})
        theta1, var1 = _linearised(parts, sample, f_all, {k: 1.0 for _, *ks in parts for k in ks})
    if label_free is None or theta1 is None or var1 is None:
        return EstimateBias(metric=spec.name, label_free=label_free, value=None, ci=None, p=None)
    value = label_free - theta1
    half = Z95 * math.sqrt(var1)
    total_var = var1 + v_lf
    if total_var == 0:
        p = 1.0 if value == 0 else 0.0
    else:
        p = math.erfc(abs(value) / math.sqrt(total_var) / math.sqrt(2))
    return EstimateBias(metric=spec.name, label_free=label_free, value=value, ci=[value - half, value + half], p=p)

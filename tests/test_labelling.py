"""Labelling plans and prediction-powered evaluation (scorekeeper/evaluation/labelling.py, SPEC section
13) against the independent implementation of the section (tests/labelling_reference.py): for every
head kind, active and uniform, with and without a drift reference, with plan rows missing their
labels and labels outside the plan, every number of metrics.json `label_plan` and
`prediction_powered` and every row of label_plan.parquet is recomputed from the run's files. And
properties over generated inputs: the capping (sum pi = min(B, N), pi in (0, 1]), the sha256 draw
read exactly as hashlib reads it, and the estimator's exact answer when every row is labelled."""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.evaluation import labelling
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.duck import sql
from scorekeeper.evaluation.labelling import LabelRequest
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.metrics.document import RecordedMetrics
from scorekeeper.report.publish import publish_complete
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from tests import labelling_reference as ref

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import golden  # noqa: E402  (bench/golden.py: the generated runs of every head kind)

PROFILE = settings(deadline=None, derandomize=True, database=None, max_examples=15, suppress_health_check=[HealthCheck.too_slow])
BUDGET = 60
KINDS = {
    "single_label": lambda p, seed, skill: golden._single_label(p, seed, skill, False),
    "multi_label": lambda p, seed, skill: golden._multi_label(p, seed, skill),
    "regression": lambda p, seed, skill: golden._regression(p, seed, 1.0 / (1 + skill), ["stars"]),
    "regression2": lambda p, seed, skill: golden._regression(p, seed, 1.0 / (1 + skill), golden.OUTPUTS),
}


def head_of(kind: str) -> str:
    return "regression" if kind.startswith("regression") else kind


def evaluate(root: Path, name: str, kind: str, labelling_request: LabelRequest | None = None, drift_reference: str | None = None):
    labels = json.loads((root / name / "plan.json").read_text())["labels"]
    run = RunFolder.from_uri(str(root / name))
    drift = Location.from_uri(str(root / drift_reference)) if drift_reference else None
    document = evaluate_run(
        run,
        labels,
        golden._manifest(root / name),
        EvaluationSettings(head=head_of(kind), drift_reference=drift, labelling=labelling_request),
    )
    files = {"metrics.json": document.to_json_bytes()}
    if document.label_plan is not None:
        files = {labelling.PLAN_FILE: run.read_bytes(labelling.PLAN_WORK)} | files
    publish_complete(run, files, "2026-12-03T00:00:00+00:00")
    return document.as_dict()


# -- the reference implementation over a run's files ---------------------------------------------------


def expected_plan(root: Path, name: str, kind: str, reference: dict | None, budget: int, sampling: str):
    """Per scored row: (f, u, per-target f's), pi and the draw, from predictions.parquet alone."""
    labels = json.loads((root / name / "plan.json").read_text())["labels"]
    p = pq.read_table(root / name / "predictions.parquet").to_pydict()
    n = len(p["row_index"])
    cells: dict = {}
    if head_of(kind) == "single_label":
        probs = np.array(p["probabilities"])
        predicted = np.array(p["predicted_id"])
        f, q = ref.single_label_f(probs, predicted, reference, labels)
        u = np.sqrt(f * (1 - f))
        cells["accuracy"] = {"": f}
        for k, label in enumerate(labels):
            is_k = predicted == k
            cells.setdefault("macro_f1", {})
            cells["macro_f1"][("TP", label)] = np.where(is_k, q[:, k], 0.0)
            cells["macro_f1"][("FP", label)] = np.where(is_k, 1 - q[:, k], 0.0)
            cells["macro_f1"][("FN", label)] = np.where(is_k, 0.0, q[:, k])
    elif head_of(kind) == "multi_label":
        probs = np.array(p["probabilities"])
        q = ref.multi_label_q(probs, reference, labels)
        pred = np.array([[label in row for label in labels] for row in p["predicted_labels"]])
        f = np.prod(np.where(pred, q, 1 - q), axis=1)
        u = np.mean(np.sqrt(q * (1 - q)), axis=1)
        cells["subset_accuracy"] = {"": f}
        cells["macro_f1"], cells["micro_f1"] = {}, {}
        for k, label in enumerate(labels):
            cells["macro_f1"][("TP", label)] = np.where(pred[:, k], q[:, k], 0.0)
            cells["macro_f1"][("FP", label)] = np.where(pred[:, k], 1 - q[:, k], 0.0)
            cells["macro_f1"][("FN", label)] = np.where(pred[:, k], 0.0, q[:, k])
        for part in ("TP", "FP", "FN"):
            cells["micro_f1"][(part, "")] = sum(cells["macro_f1"][(part, label)] for label in labels)
    else:
        pred = np.array(p["prediction"], dtype=float).reshape(n, -1)
        fo = ref.regression_f(pred, reference, labels)
        f = fo.mean(1)
        u = f.copy() if np.any(f != 0) else np.ones(n)
        cells["mae"] = {label: fo[:, o] for o, label in enumerate(labels)}
    pi = ref.capped(ref.weights(u, sampling), budget)
    draws = np.array([ref.draw(name, i) for i in p["row_index"]])
    return {"n": n, "f": f, "u": u, "pi": pi, "planned": draws < pi, "cells": cells, "labels": labels, "p": p}


def truth_targets(root: Path, name: str, kind: str, plan: dict) -> dict:
    """Per row with ground truth (after the test's edits): Y of every target, from the staged labels."""
    labels, p = plan["labels"], plan["p"]
    staged = pq.read_table(root / name / "work" / "input.parquet").column("label").to_pylist()
    out: dict = {}
    for i, truth in enumerate(staged):
        if truth is None:
            continue
        y: dict = {}
        if head_of(kind) == "single_label":
            t = labels.index(truth) if truth in labels else None
            pred = p["predicted_id"][i]
            y["accuracy"] = {"": float(t is not None and t == pred)}
            y["macro_f1"] = {}
            for k, label in enumerate(labels):
                y["macro_f1"][("TP", label)] = float(pred == k and t == k)
                y["macro_f1"][("FP", label)] = float(pred == k and t != k)
                y["macro_f1"][("FN", label)] = float(pred != k and t == k)
        elif head_of(kind) == "multi_label":
            tv = [label in truth for label in labels]
            pv = [label in p["predicted_labels"][i] for label in labels]
            y["subset_accuracy"] = {"": float(tv == pv)}
            y["macro_f1"] = {}
            for k, label in enumerate(labels):
                y["macro_f1"][("TP", label)] = float(pv[k] and tv[k])
                y["macro_f1"][("FP", label)] = float(pv[k] and not tv[k])
                y["macro_f1"][("FN", label)] = float(tv[k] and not pv[k])
            y["micro_f1"] = {(part, ""): sum(y["macro_f1"][(part, label)] for label in labels) for part in ("TP", "FP", "FN")}
        else:
            t = np.array(truth if isinstance(truth, list) else [truth], dtype=float)
            pr = np.array(p["prediction"][i] if isinstance(p["prediction"][i], list) else [p["prediction"][i]], dtype=float)
            y["mae"] = {label: float(abs(t[o] - pr[o])) for o, label in enumerate(labels)}
        out[i] = y
    return out


def expected_pp(plan: dict, targets: dict, kind: str, reference: dict | None, sampling: str, v_lf: float | None) -> dict:
    planned = np.flatnonzero(plan["planned"])
    labelled = [i for i in planned if i in targets]
    outside = [i for i in targets if not plan["planned"][i]]
    rate = len(labelled) / len(planned)
    pi = plan["pi"][labelled] * rate
    n = plan["n"]
    metrics: dict = {}
    cells = plan["cells"]

    def ys(metric, key):
        return np.array([targets[i][metric][key] for i in labelled])

    def fs(metric, key):
        return cells[metric][key][labelled]

    def f1(metric, labels, name_of):
        keys = [(part, label) for label in labels for part in ("TP", "FP", "FN")]
        y = {k: ys(metric, k) for k in keys}
        f = {k: fs(metric, k) for k in keys}
        f_all = {k: float(cells[metric][k].sum()) for k in keys}
        return y, f, f_all

    head = head_of(kind)
    if head == "single_label":
        metrics["accuracy"] = ref.mean_metric([ys("accuracy", "")], [fs("accuracy", "")], [cells["accuracy"][""].sum()], pi, n)
        y, f, fa = f1("macro_f1", plan["labels"], None)
        metrics["macro_f1"] = ref.f1_entry(y, f, fa, pi, plan["labels"], lambda part, k: f"{part}:{k}")
    elif head == "multi_label":
        y, f, fa = f1("micro_f1", [""], None)
        metrics["micro_f1"] = ref.f1_entry(y, f, fa, pi, [""], lambda part, k: part)
        y2, f2, fa2 = f1("macro_f1", plan["labels"], None)
        metrics["macro_f1"] = ref.f1_entry(y2, f2, fa2, pi, plan["labels"], lambda part, k: f"{part}:{k}")
        metrics["subset_accuracy"] = ref.mean_metric(
            [ys("subset_accuracy", "")], [fs("subset_accuracy", "")], [cells["subset_accuracy"][""].sum()], pi, n
        )
    else:
        outputs = plan["labels"]
        only = reference is None
        metrics["mae"] = ref.mean_metric(
            [ys("mae", o) for o in outputs], [fs("mae", o) for o in outputs], [cells["mae"][o].sum() for o in outputs], pi, n, None, only
        )
        if len(outputs) > 1:
            for o in outputs:
                metrics[f"mae:{o}"] = ref.mean_metric([ys("mae", o)], [fs("mae", o)], [cells["mae"][o].sum()], pi, n, None, only)
    # estimate_bias on the headline
    bias = None
    if head == "single_label" or head == "regression":
        metric = "accuracy" if head == "single_label" else "mae"
        terms = [""] if head == "single_label" else plan["labels"]
        if not (head == "regression" and reference is None):
            label_free = sum(cells[metric][t].sum() for t in terms) / (len(terms) * n)
            theta1 = sum(cells[metric][t].sum() + np.sum((ys(metric, t) - fs(metric, t)) / pi) for t in terms) / (len(terms) * n)
            e = sum(ys(metric, t) - fs(metric, t) for t in terms) / (len(terms) * n)
            var1 = float(np.sum((1 - pi) * e**2 / pi**2))
            bias = (metric, label_free, label_free - theta1, var1)
    else:
        y, f, fa = f1("micro_f1", [""], None)
        label_free, _ = ref.f1_totals([(fa[("TP", "")], fa[("FP", "")], fa[("FN", "")])])
        theta1, var1, _ = ref.f1_metric(y, f, fa, pi, [""], lam_fixed=1.0)
        bias = ("micro_f1", label_free, label_free - theta1, var1)
    estimate_bias = None
    if bias is not None:
        metric, label_free, value, var1 = bias
        half = ref.Z * np.sqrt(var1)
        estimate_bias = {
            "metric": metric, "label_free": label_free, "value": value, "ci": [value - half, value + half],
            "p": ref.bias_p(value, var1, v_lf if v_lf is not None else 0.0),
        }  # fmt: skip
    target = {"single_label": ("accuracy", ""), "multi_label": ("subset_accuracy", "")}.get(head)
    small = len(labelled) < 300
    if target is not None:
        y0 = ys(*target)
        small = small or int(np.sum(y0 == 0)) < 30 or int(np.sum(y0 == 1)) < 30
    return {
        "method": "prediction_powered", "sampling": sampling, "rows": n, "plan_rows": len(planned), "labelled": len(labelled),
        "unlabelled_plan_rows": len(planned) - len(labelled), "labelled_outside_plan": len(outside), "response_rate": rate,
        "small_sample": small, "metrics": metrics, "estimate_bias": estimate_bias,
    }  # fmt: skip


def close(got, want, path="") -> None:
    """Numbers equal to 1e-9 (relative), everything else exactly, recursively."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (path, sorted(got or {}), sorted(want))
        for k in want:
            close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list | tuple):
        assert isinstance(got, list) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            close(g, w, f"{path}[{i}]")
    elif isinstance(want, bool) or want is None or isinstance(want, str):
        assert got == want, (path, got, want)
    else:
        assert got == pytest.approx(float(want), rel=1e-9, abs=1e-12), (path, got, want)


def accuracy_v_lf(plan: dict, reference: dict | None) -> float:
    """Section 12's accuracy_ci variance with a reference; sum f (1 - f) / N^2 without one."""
    n, f = plan["n"], plan["f"]
    if reference is None:
        return float(np.sum(f * (1 - f)) / n**2)
    probs = np.array(plan["p"]["probabilities"])
    score = probs[np.arange(n), np.array(plan["p"]["predicted_id"])]
    bins = np.array([ref._bin(s) for s in score])
    recorded = {int(c["bin"]): (int(c["rows"]), round((c["accuracy"] or 0.0) * int(c["rows"]))) for c in reference["calibration"]}
    var = 0.0
    for b in set(bins.tolist()):
        rows_b, correct_b = recorded.get(b, (0, 0))
        n_b = int(np.sum(bins == b))
        a = (correct_b + score[bins == b].mean()) / (rows_b + 1)
        var += (n_b / n) ** 2 * a * (1 - a) / (rows_b + 1) + n_b * a * (1 - a) / n**2
    return var


def hide_labels(root: Path, name: str, kind: str, planned: np.ndarray) -> None:
    """Every 7th plan row loses its label; 15 rows outside the plan keep theirs, the rest lose them."""
    table = pq.read_table(root / name / "work" / "input.parquet")
    truth = table.column("label").to_pylist()
    plan_rows = np.flatnonzero(planned)
    keep = set(plan_rows.tolist()) - set(plan_rows[::7].tolist()) | set(np.flatnonzero(~planned)[:15].tolist())
    hidden = pa.array([v if i in keep else None for i, v in enumerate(truth)], table.schema.field("label").type)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", hidden), root / name / "work" / "input.parquet")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("sampling", ["active", "uniform"])
@pytest.mark.parametrize("with_reference", [False, True])
def test_every_number_of_the_plan_and_the_estimates_is_section_13s(tmp_path, kind, sampling, with_reference):
    check_plan_and_estimates(tmp_path, kind, sampling, with_reference)


@pytest.mark.parametrize("kind", ["single_label", "multi_label"])
def test_a_plan_drawn_beside_the_estimate_against_its_reference_is_section_13s_too(tmp_path, kind):
    """The run's drift reference is the plan's: the label-free totals are the estimate's (estimate_totals)."""
    check_plan_and_estimates(tmp_path, kind, "active", True, drift=True)


def check_plan_and_estimates(tmp_path: Path, kind: str, sampling: str, with_reference: bool, drift: bool = False) -> None:
    reference = None
    if with_reference:
        KINDS[kind](tmp_path / "ref", 11, 1.0)
        evaluate(tmp_path, "ref", kind)
        reference = json.loads((tmp_path / "ref" / "report" / "metrics.json").read_text())
    KINDS[kind](tmp_path / "cur", 12, 1.5)
    plan = expected_plan(tmp_path, "cur", kind, reference, BUDGET, sampling)
    hide_labels(tmp_path, "cur", kind, plan["planned"])
    request = LabelRequest(
        key="cur", budget=BUDGET, sampling=sampling, reference_name="ref" if with_reference else None,
        reference=RecordedMetrics.parse(reference) if reference else None,
    )  # fmt: skip
    document = evaluate(tmp_path, "cur", kind, request, "ref" if drift else None)
    assert (document.get("estimated") is not None) == drift

    want_plan = {
        "sampling": sampling, "budget": BUDGET, "rows": int(plan["planned"].sum()), "expected_rows": float(plan["pi"].sum()),
        "key": "cur", "reference": "ref" if with_reference else None,
    }  # fmt: skip
    close(document["label_plan"], want_plan, "label_plan")
    assert want_plan["expected_rows"] == pytest.approx(BUDGET)

    file = pq.read_table(tmp_path / "cur" / "report" / "label_plan.parquet").to_pydict()
    rows = np.flatnonzero(plan["planned"])
    predictions = pq.read_table(tmp_path / "cur" / "predictions.parquet").column_names
    assert list(file) == ["row_index", "id", "text", *[c for c in predictions if c not in ("row_index", "id")],
                          "inclusion_probability", "uncertainty", "label_free"]  # fmt: skip
    assert file["row_index"] == rows.tolist() and file["id"] == rows.tolist()
    close(file["inclusion_probability"], plan["pi"][rows].tolist(), "inclusion_probability")
    close(file["uncertainty"], plan["u"][rows].tolist(), "uncertainty")
    close(file["label_free"], plan["f"][rows].tolist(), "label_free")

    targets = truth_targets(tmp_path, "cur", kind, plan)
    v_lf = accuracy_v_lf(plan, reference) if head_of(kind) == "single_label" else 0.0
    want = expected_pp(plan, targets, kind, reference, sampling, v_lf)
    got = dict(document["prediction_powered"])
    assert got.pop("assumptions").startswith("plan rows without ground truth are taken to be missing at random")
    close(got, want, "prediction_powered")
    assert want["unlabelled_plan_rows"] > 0 and want["labelled_outside_plan"] == 15


@pytest.mark.parametrize("kind", ["single_label", "regression"])
def test_a_rerun_draws_the_same_plan_and_a_plan_without_labels_has_no_estimates(tmp_path, kind):
    KINDS[kind](tmp_path / "cur", 3, 1.0)
    table = pq.read_table(tmp_path / "cur" / "work" / "input.parquet")
    pq.write_table(table.drop(["label"]), tmp_path / "cur" / "work" / "input.parquet")
    request = LabelRequest(key="cur", budget=40, sampling="active")
    first = evaluate(tmp_path, "cur", kind, request)
    plan_bytes = (tmp_path / "cur" / "report" / "label_plan.parquet").read_bytes()
    assert "prediction_powered" not in first and first["label_plan"]["rows"] > 0
    again = evaluate(tmp_path, "cur", kind, LabelRequest(key="cur", budget=40, sampling="active", pinned=True))
    assert again["label_plan"] == first["label_plan"]
    assert pq.read_table(tmp_path / "cur" / "report" / "label_plan.parquet").equals(pq.read_table(io.BytesIO(plan_bytes)))


# -- properties -----------------------------------------------------------------------------------------


def production_design(u: list[float], budget: int, sampling: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE pp_label_free AS SELECT unnest(range(?)) AS row_index, 0.0 AS f, unnest(?::DOUBLE[]) AS u", [len(u), u])
    labelling.set_variables(con, key=key, active=sampling == "active", target=min(budget, len(u)))
    con.execute(sql("plan_design.sql"))
    pi, d = zip(*con.execute("SELECT pi, draw FROM pp_design ORDER BY row_index").fetchall(), strict=True)
    return np.array(pi), np.array(d)


@settings(PROFILE)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(0.0, 0.5), st.sampled_from([0.1, 0.3])), min_size=1, max_size=120),
    st.integers(1, 150),
    st.sampled_from(["active", "uniform"]),
)
def test_the_capping_sums_to_the_budget_and_keeps_every_row_possible(u, budget, sampling):
    pi, _ = production_design(u, budget, sampling, "k")
    assert float(pi.sum()) == pytest.approx(min(budget, len(u)), rel=1e-9)
    assert np.all(pi > 0) and np.all(pi <= 1.0)
    assert np.allclose(pi, ref.capped(ref.weights(np.array(u), sampling), budget), rtol=1e-9, atol=1e-12)


@settings(PROFILE)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(0.0, 0.5), st.sampled_from([0.1, 0.2, 0.3])), min_size=1, max_size=80),
    st.integers(0, 5),
    st.sampled_from(["active", "uniform"]),
)
def test_a_budget_of_every_row_takes_each_row_with_probability_exactly_one(u, extra, sampling):
    """sum pi = min(B, N) = N with every pi <= 1 leaves one answer, pi = 1 on every row: exactly 1,
    not c w rounded to 1 - 4e-14 on the last free rows (with one such row, lambda's denominator
    sum_L (1 - pi) f^2 / pi^2 is not 0, and lambda became that row's Y / f)."""
    pi, _ = production_design(u, len(u) + extra, sampling, "k")
    assert pi.tolist() == [1.0] * len(u)
    assert ref.capped(ref.weights(np.array(u), sampling), len(u) + extra).tolist() == [1.0] * len(u)


@settings(PROFILE)
@given(st.text(min_size=1, max_size=40), st.lists(st.integers(0, 2**62), min_size=1, max_size=30))
def test_the_draw_is_sha256s_first_8_bytes_read_big_endian_exactly(key, rows):
    con = duckdb.connect()
    got = con.execute(
        "SELECT ('0x' || left(sha256(? || ':' || r::VARCHAR), 16))::UBIGINT::DOUBLE / 18446744073709551616.0 FROM unnest(?::BIGINT[]) AS t(r)",
        [key, rows],
    ).fetchall()
    assert [g for (g,) in got] == [ref.draw(key, r) for r in rows]
    exact = con.execute(
        "SELECT ('0x' || left(sha256(? || ':' || r::VARCHAR), 16))::UBIGINT FROM unnest(?::BIGINT[]) AS t(r)", [key, rows]
    ).fetchall()
    assert [int(g) for (g,) in exact] == [int.from_bytes(hashlib.sha256(f"{key}:{r}".encode()).digest()[:8], "big") for r in rows]
    _, draws = production_design([0.2] * 3, 1, "uniform", key)
    assert draws.tolist() == [ref.draw(key, r) for r in range(3)]


def test_an_estimate_beyond_the_metrics_range_has_its_interval_clipped_at_both_ends(tmp_path):
    """SPEC 13: the interval theta -+ 1.96 sqrt(var) is clipped to the metric's range, both ends. A run
    whose every row is right, its plan rows (uniform, known from the run id) scored 0.6 and the others
    0.999: lambda 1 and theta(1) = 0.999 + 1.2 |L| / N, about 1.3, more than its half-width (about
    0.09) above 1. Its interval is [1, 1], not [theta - half, 1] (an upper end below the lower)."""
    n, budget = golden.N, 60
    run = tmp_path / "cur"
    planned = np.array([ref.draw("cur", i) < budget / n for i in range(n)])
    predicted = np.arange(n) % 4
    top = np.where(planned, 0.6, 0.999)
    probs = np.tile(((1 - top) / 3)[:, None], (1, 4))
    probs[np.arange(n), predicted] = top
    names = [golden.SENTIMENT[k] for k in predicted]  # every row right
    golden._write_common(run, n, golden.SENTIMENT, pa.array(names), [None] * n, "cur")
    pq.write_table(
        pa.table({
            "row_index": pa.array(range(n), pa.int64()), "id": pa.array(range(n), pa.int64()),
            "predicted_id": pa.array(predicted, pa.int64()), "predicted_label": pa.array(names),
            "score": pa.array(top), "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip
    document = evaluate(tmp_path, "cur", "single_label", LabelRequest(key="cur", budget=budget, sampling="uniform"))
    pp = document["prediction_powered"]
    assert pp["labelled"] == int(planned.sum()) and pp["labelled_outside_plan"] == n - int(planned.sum())
    accuracy = pp["metrics"]["accuracy"]
    assert accuracy["lambda"] == 1.0 and accuracy["value"] > 1.1
    assert accuracy["ci"] == [1.0, 1.0] and accuracy["classical"] == 1.0 and accuracy["classical_ci"] == [1.0, 1.0]
    for name, metric in pp["metrics"].items():
        for ci in (metric["ci"], metric["classical_ci"]):
            assert 0.0 <= ci[0] <= ci[1] <= 1.0, (name, ci)
    plan = expected_plan(tmp_path, "cur", "single_label", None, budget, "uniform")
    want = expected_pp(
        plan, truth_targets(tmp_path, "cur", "single_label", plan), "single_label", None, "uniform", accuracy_v_lf(plan, None)
    )
    close(pp["metrics"], want["metrics"], "prediction_powered.metrics")


@settings(PROFILE)
@given(st.integers(2, 80), st.integers(0, 10_000))
def test_with_every_row_labelled_the_estimate_is_the_runs_metric_with_no_width(n, seed):
    rng = np.random.default_rng(seed)
    y, f = (rng.random(n) < 0.7).astype(float), rng.random(n)
    sample = labelling._Sample(pi=np.ones(n), y={("accuracy", ""): y}, f={("accuracy", ""): f})
    spec = labelling.PlanMetric("accuracy", "mean", "accuracy")
    got = labelling._mean_metric(spec, sample, {("accuracy", ""): float(f.sum())}, n, False)
    assert got.value == pytest.approx(y.mean()) and got.ci == [pytest.approx(y.mean())] * 2
    assert got.classical == pytest.approx(y.mean())


def test_a_plan_over_a_run_without_scored_rows_is_refused():
    with pytest.raises(Exception, match="scored no rows"):
        labelling.label_run(None, None, LabelRequest(key="cur", budget=5, sampling="uniform"), 0, False)


def test_the_reports_commands_rerun_this_run_with_the_labels():
    """The CLI command parses into this run's request with the labels as ground truth; the deployment
    command names the run, the labels and the moment its dated templates were filled with."""
    import shlex

    from scorekeeper.cli import build_parser, parse_request
    from scorekeeper.params import ScoreRequest
    from scorekeeper.report.labelling_report import labels_back_commands
    from scorekeeper.run_facts import RunFacts

    night = ScoreRequest(
        input_uri="in/2026-12-02/", model_uri="m", output_uri="runs", id_column="review_id", label_column=None, label_budget=300,
        max_length=64, slice_columns=["a", "b"], drift_reference="validation", as_of="2026-12-03",
    )  # fmt: skip
    info = night.public_dict() | {"run_id": "monitor-2026-12-02", "deployment": "scorekeeper/monitor"}
    cli, prefect = labels_back_commands(RunFacts.of(info))
    options = vars(build_parser().parse_args(shlex.split(cli)[1:]))
    options.pop("command")
    request, _ = parse_request(options)
    assert request.run_name == "monitor-2026-12-02" and request.ground_truth_uri == "labels.csv" and request.label_column == "label"
    assert (request.input_uri, request.max_length, request.id_column, request.label_budget, request.drift_reference) == (
        "in/2026-12-02/",
        64,
        "review_id",
        300,
        "validation",
    )
    assert shlex.split(prefect) == [
        "prefect", "deployment", "run", "scorekeeper/monitor", "--param", "run_name=monitor-2026-12-02",
        "--param", "ground_truth_uri=labels.csv", "--param", "label_column=label", "--param", f"as_of={night.as_of}",
    ]  # fmt: skip
    assert labels_back_commands(RunFacts.of(info | {"id_column": None})) is None  # no id to join labels on


@pytest.mark.parametrize(
    ("maes", "predictions", "want_u"),
    [
        ([[0.0, 0.5]], [0.5, 0.7], [1.0, 1.0]),  # a zero bin holds every row: f is 0 everywhere, u is 1
        ([[0.0, 0.5]], [0.5, 2.0], [0.0, 0.5]),  # a zero bin, one row outside it: u is f
        ([[0.2, 0.5]], [0.5, 2.0], [0.2, 0.5]),  # every bin's MAE positive: u is f without a pass
    ],
)
def test_regression_u_is_one_on_every_row_only_where_f_is_zero_on_every_row(maes, predictions, want_u):
    """Section 13's regression u: f of mae, 1 for every row when f is 0 everywhere, with a reference
    whose bins' MAE are 0 (the rows' f decide) or not (the bins decide)."""
    from scorekeeper.evaluation import regression
    from scorekeeper.evaluation.duck import Fragment

    con = duckdb.connect()
    con.execute(
        "CREATE TEMP TABLE predictions AS SELECT unnest(range(?)) AS row_index, unnest(?::DOUBLE[]) AS prediction",
        [len(predictions), predictions],
    )
    con.execute("CREATE TEMP TABLE pp_focus AS SELECT * FROM predictions LIMIT 0")
    labelling.set_variables(con, reference=True, edges=[[1.0]], maes=maes, outputs=["stars"])
    con.execute(sql("regression_label_free.sql", prediction=Fragment("[prediction::DOUBLE]")))
    labelling.set_variables(con, f_zero=regression._f_zero_everywhere(con, True, maes))
    got = con.execute("SELECT list(u ORDER BY row_index), list(f ORDER BY row_index) FROM pp_label_free").fetchone()
    assert got[0] == want_u
    assert got[1] == [maes[0][int(p > 1.0)] for p in predictions]

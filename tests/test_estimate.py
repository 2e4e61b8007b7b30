"""The estimated performance (scorekeeper/evaluation/estimate.py) against the independent
implementation of its definitions (tests/drift_reference.py), for every head kind: a labelled
reference run records its calibration (calibration_by_label, residual_bins), a second run is
evaluated against it, and every estimate is recomputed from both runs' files."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.report.publish import publish_complete
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from tests import drift_reference as ref

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import golden  # noqa: E402  (bench/golden.py: the generated runs of every head kind)

PROFILE = settings(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=6,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def evaluate(root: Path, name: str, head: str, reference: str | None = None):
    run = Location.from_uri(str(root / name))
    labels = json.loads((root / name / "plan.json").read_text())["labels"]
    document = evaluate_run(
        RunFolder.from_uri(str(root / name)),
        labels,
        golden._manifest(root / name),
        EvaluationSettings(
            slice_columns=["source"], head=head, drift_reference=Location.from_uri(str(root)).child(reference) if reference else None
        ),
    )
    # published as a run publishes: its completion record seals what a later run reads
    publish_complete(RunFolder.from_uri(str(root / name)), {"metrics.json": document.to_json_bytes()}, "2026-12-01T00:00:00+00:00")
    assert run.exists("predictions.parquet")
    return document


def truth_ids(root: Path, name: str, labels: list[str]) -> list[int | None]:
    names = pq.read_table(root / name / "work" / "input.parquet").column("label").to_pylist()
    return [labels.index(v) if v in labels else None for v in names]


@settings(PROFILE)
@given(st.integers(0, 10_000), st.floats(0.0, 2.5), st.floats(0.0, 2.5))
def test_single_label_accuracy_its_interval_and_macro_f1(tmp_path_factory, seed, skill_ref, skill_cur):
    root = tmp_path_factory.mktemp("single")
    golden._single_label(root / "ref", seed, skill_ref, False)
    golden._single_label(root / "cur", seed + 1, skill_cur, False)
    evaluate(root, "ref", "single_label")
    got = evaluate(root, "cur", "single_label", "ref").estimated
    labels = golden.SENTIMENT
    r, c = pq.read_table(root / "ref" / "predictions.parquet"), pq.read_table(root / "cur" / "predictions.parquet")
    truth = truth_ids(root, "ref", labels)
    ref_scores = r.column("score").to_pylist()
    correct = [t is not None and t == p for t, p in zip(truth, r.column("predicted_id").to_pylist(), strict=True)]
    accuracy, ci = ref.estimated_accuracy(ref_scores, correct, c.column("score").to_pylist())
    assert got is not None and got.method == "reference_calibration" and got.rows == c.num_rows
    assert math.isclose(got.accuracy, accuracy, abs_tol=1e-9)
    assert np.allclose(got.accuracy_ci, ci, atol=1e-9)
    ref_probs = np.array(r.column("probabilities").to_pylist())
    onehot = np.zeros_like(ref_probs)
    for i, t in enumerate(truth):
        if t is not None:
            onehot[i, t] = 1
    rows, hits = ref.label_calibration(ref_probs, onehot)
    probs = np.array(c.column("probabilities").to_pylist())
    predicted = np.zeros_like(probs)
    predicted[np.arange(len(probs)), c.column("predicted_id").to_pylist()] = 1
    macro, _ = ref.estimated_f1(rows, hits, probs, predicted, renormalise=True)
    assert math.isclose(got.macro_f1, macro, abs_tol=1e-9)
    assert got.micro_f1 is None and got.micro_f1_ci is None
    assert np.allclose(got.macro_f1_ci, ref.f1_interval(rows, hits, probs, predicted, True, "macro"), atol=1e-6)
    assert got.macro_f1_ci[0] < got.macro_f1 < got.macro_f1_ci[1]


@settings(PROFILE)
@given(st.integers(0, 10_000), st.floats(0.0, 2.5), st.floats(0.0, 2.5))
def test_multi_label_micro_and_macro_f1(tmp_path_factory, seed, skill_ref, skill_cur):
    root = tmp_path_factory.mktemp("multi")
    golden._multi_label(root / "ref", seed, skill_ref)
    golden._multi_label(root / "cur", seed + 1, skill_cur)
    evaluate(root, "ref", "multi_label")
    document = evaluate(root, "cur", "multi_label", "ref")
    got = document.estimated
    labels = golden.TOPICS
    r, c = pq.read_table(root / "ref" / "predictions.parquet"), pq.read_table(root / "cur" / "predictions.parquet")
    truth_lists = pq.read_table(root / "ref" / "work" / "input.parquet").column("label").to_pylist()
    onehot = np.array([[name in t for name in labels] for t in truth_lists], dtype=float)
    rows, hits = ref.label_calibration(np.array(r.column("probabilities").to_pylist()), onehot)
    predicted = np.array([[name in p for name in labels] for p in c.column("predicted_labels").to_pylist()], dtype=float)
    macro, micro = ref.estimated_f1(rows, hits, np.array(c.column("probabilities").to_pylist()), predicted, renormalise=False)
    assert got is not None and got.accuracy is None
    assert math.isclose(got.micro_f1, micro, abs_tol=1e-9) and math.isclose(got.macro_f1, macro, abs_tol=1e-9)
    probs = np.array(c.column("probabilities").to_pylist())
    assert np.allclose(got.macro_f1_ci, ref.f1_interval(rows, hits, probs, predicted, False, "macro"), atol=1e-6)
    assert np.allclose(got.micro_f1_ci, ref.f1_interval(rows, hits, probs, predicted, False, "micro"), atol=1e-6)
    # the multi-label drift signals, recomputed from both runs' predictions
    ref_lists, cur_lists = r.column("predicted_labels").to_pylist(), c.column("predicted_labels").to_pylist()
    want = {"labels_per_row": ref.signal([float(len(x)) for x in ref_lists], [float(len(x)) for x in cur_lists], numeric=True)}
    for name in labels:
        want[f"positive:{name}"] = ref.signal(
            ["1" if name in x else "0" for x in ref_lists], ["1" if name in x else "0" for x in cur_lists], numeric=False
        )
    assert document.drift is not None and set(document.drift.signals) == set(want)
    for name, w in want.items():
        s = document.drift.signals[name]
        assert [b.reference_rows for b in s.bins] == w["a"] and [b.current_rows for b in s.bins] == w["b"], name
        assert math.isclose(s.psi, w["psi"], abs_tol=1e-9) and math.isclose(s.p, w["p"], rel_tol=1e-6, abs_tol=1e-300), name


@settings(PROFILE)
@given(st.integers(0, 10_000), st.floats(0.1, 2.0), st.floats(-1.0, 1.0), st.booleans())
def test_regression_mae_per_output_and_mean(tmp_path_factory, seed, noise, shift, two):
    outputs = golden.OUTPUTS if two else ["stars"]
    root = tmp_path_factory.mktemp("reg")
    golden._regression(root / "ref", seed, noise, outputs)
    golden._regression(root / "cur", seed + 1, noise, outputs)
    table = pq.read_table(root / "cur" / "predictions.parquet")  # the current run's predictions moved by `shift`
    values = np.array(table.column("prediction").to_pylist()) + shift
    pq.write_table(table.set_column(2, "prediction", [values.tolist()]), root / "cur" / "predictions.parquet")
    evaluate(root, "ref", "regression")
    document = evaluate(root, "cur", "regression", "ref")
    got = document.estimated
    r = np.array(pq.read_table(root / "ref" / "predictions.parquet").column("prediction").to_pylist()).reshape(-1, len(outputs))
    truth = np.array(pq.read_table(root / "ref" / "work" / "input.parquet").column("label").to_pylist()).reshape(-1, len(outputs))
    c = values.reshape(-1, len(outputs))
    expected = [ref.estimated_mae(list(r[:, i]), list(truth[:, i]), list(c[:, i])) for i in range(len(outputs))]
    assert got is not None and got.per_output is not None
    assert np.allclose([got.per_output[o] for o in outputs], expected, atol=1e-9)
    assert math.isclose(got.mae, float(np.mean(expected)), abs_tol=1e-9)
    # the regression drift signals (many distinct values: counted per bucket), recomputed
    for i, name in enumerate(outputs):
        w = ref.signal(list(r[:, i]), list(c[:, i]), numeric=True)
        s = document.drift.signals["prediction" if len(outputs) == 1 else f"prediction:{name}"]
        assert [b.reference_rows for b in s.bins] == w["a"] and [b.current_rows for b in s.bins] == w["b"], name
        assert [b.upper for b in s.bins if not b.null][:-1] == w["edges"], name
        assert math.isclose(s.psi, w["psi"], abs_tol=1e-9) and math.isclose(s.ks, w["ks"], abs_tol=1e-9), name


def test_a_reference_without_ground_truth_gives_no_estimate_and_says_why(tmp_path):
    golden._single_label(tmp_path / "ref", 1, 1.0, False)
    golden._single_label(tmp_path / "cur", 2, 1.0, False)
    evaluate(tmp_path, "ref", "single_label")
    recorded = json.loads((tmp_path / "ref" / "report" / "metrics.json").read_text())
    del recorded["calibration_by_label"]  # as an older version wrote it
    publish_complete(
        RunFolder.from_uri(str(tmp_path / "ref")), {"metrics.json": json.dumps(recorded).encode()}, "2026-12-01T00:00:00+00:00"
    )
    got = evaluate(tmp_path, "cur", "single_label", "ref")
    assert got.estimated is not None and got.estimated.accuracy is None and "calibration_by_label" in (got.estimated.unavailable or "")
    assert got.drift is not None and {"predicted_label", "score"} <= set(got.drift.signals)
    assert {"tokens", "unknown_token_share", "slice:source"} <= set(got.drift.skipped)


@settings(PROFILE, max_examples=4)
@given(st.sampled_from(["single_label", "multi_label", "regression"]), st.integers(0, 10_000), st.sampled_from([0.0, 0.7]))
def test_an_input_drift_puts_the_estimate_in_doubt_naming_the_signals(tmp_path_factory, head, seed, shift):
    """estimated.caveat names exactly the input signals that drifted (drift.py INPUT_SIGNALS: tokens,
    the unknown-token share, slices), null when none did; the report's estimate part opens with it."""
    from scorekeeper.evaluation.drift import is_input_signal
    from tests import generated_runs as gen

    root = tmp_path_factory.mktemp("caveat")
    gen.write(root / "reference", head, gen.Spec(rows=150, seed=seed, fingerprint="reference"))
    gen.publish(root, "reference", gen.evaluate(root, "reference", head))
    gen.write(root / "night", head, gen.Spec(rows=150, seed=seed + 1, shift=shift, labelled=False))
    document = gen.evaluate(root, "night", head, reference="reference")
    assert document.drift is not None and document.estimated is not None
    moved = [name for name in document.drift.drifted if is_input_signal(name)]
    assert moved or not shift  # the shift moves the generated inputs (lengths, unknown words, the slice)
    caveat = document.estimated.caveat
    if not moved:
        assert caveat is None
        return
    assert caveat is not None and f"({', '.join(moved)} drifted)" in caveat
    assert not [name for name in document.drift.drifted if name not in moved and name in caveat]  # output signals are not named
    markdown, html = gen.render(document, "night")
    estimate_part = markdown[max(0, markdown.index("Estimated performance") - 400) :]
    assert estimate_part.index("The estimate's assumption is in doubt") < estimate_part.index("Estimated performance")
    assert 'id="estimate-caveat"' in html and html.index('id="estimate-caveat"') < html.index("From run reference's calibration")

"""Comparison between two runs (compare_to), run history and the choice of the run to compare with,
over run folders written here directly (no scoring): the flipped rows are exactly the rows built to
differ; McNemar's exact test and the paired bootstrap against references written here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import precision_recall_fscore_support

from scorekeeper.errors import InputError
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.duck import NULL_GROUP
from scorekeeper.evaluation.history import completed_runs, run_history
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.evaluation.statistics.paired_tests import accuracy_test, mcnemar_exact
from scorekeeper.metrics.document import RecordedMetrics
from scorekeeper.params import ScoreRequest
from scorekeeper.report.publish import publish_complete
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location
from scorekeeper.tasks.compare import resolve_baseline
from scorekeeper.tasks.read import list_input_files
from tests.helpers import staged_manifest, write_predictions
from tests.s3server import moto  # noqa: F401  (a fixture)

LABELS = ["cat", "dog", "bird", "fish"]


def mcnemar_reference(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def write_run(
    output: Path, name: str, probs, truth, *, ids=None, slices=None, files=None, id_column=None, complete=True, finished_at=None
) -> tuple[Location, StagedManifest]:
    """A run folder as the flow leaves it: predictions.parquet, the staged input, plan.json,
    request.json, and (complete) report/metrics.json from evaluate_run()."""
    run = output / name
    (run / "work").mkdir(parents=True)
    n = len(probs)
    ids = list(range(n)) if ids is None else ids
    write_predictions(run / "predictions.parquet", probs, ids, LABELS)
    staged = {"row_index": pa.array(range(n), pa.int64()), "id": pa.array(ids), "text": [f"t{i}" for i in range(n)]}
    staged["label"] = pa.array([LABELS[t] for t in truth])
    for i, values in enumerate(slices or []):
        staged[f"slice_{i}"] = pa.array(values, pa.string())
    pq.write_table(pa.table(staged), run / "work" / "input.parquet")
    files = files if files is not None else [{"uri": "in.parquet", "fingerprint": "same-content"}]
    plan = {"files": files, "input_fingerprint": "fp-" + "-".join(f["fingerprint"] for f in files), "model_fingerprint": f"model-{name}"}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "request.json").write_text(json.dumps({"id_column": id_column}))
    location = Location.from_uri(str(run))
    manifest = staged_manifest(n, "int64" if isinstance(ids[0], int) else "string")
    if complete:
        metrics = evaluate_run(location, LABELS, manifest, EvaluationSettings(slice_columns=[f"s{i}" for i in range(len(slices or []))]))
        if finished_at:
            metrics.finished_at = finished_at
        # as the report step publishes it: metrics.json, then the completion record
        publish_complete(RunFolder(location.fs, location.path), {"metrics.json": metrics.to_json_bytes()}, finished_at or "2026-01-01")
    return location, manifest


def two_runs_differing_in_known_rows(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, len(LABELS), size=n)
    before = rng.dirichlet(np.ones(len(LABELS)), size=n).round(3)
    after = before.copy()
    right = before.argmax(1) == truth
    rows = rng.permutation(n)
    r2w = [i for i in rows if right[i]][:17]
    w2r = [i for i in rows if not right[i]][:9]
    other = [i for i in rows if not right[i] and i not in w2r][:6]
    for i in r2w:  # right before, a wrong label now
        after[i] = np.roll(before[i], 1)
    for i in w2r:  # wrong before, the true label now
        after[i] = 0.02
        after[i, truth[i]] = 0.94
    for i in other:  # wrong both times, another wrong label
        wrong = [k for k in range(len(LABELS)) if k not in (truth[i], before[i].argmax())][0]
        after[i] = 0.02
        after[i, wrong] = 0.94
    return truth, before, after, set(r2w), set(w2r), set(other)


def test_comparison_reports_exactly_the_flipped_rows(tmp_path):
    truth, before, after, r2w, w2r, other = two_runs_differing_in_known_rows(0)
    n = len(truth)
    group = np.random.default_rng(1).choice(np.array(["a", "b", "None", None], dtype=object), size=n).tolist()
    base, _ = write_run(tmp_path, "base", before, truth, slices=[group])
    run, manifest = write_run(tmp_path, "cand", after, truth, slices=[group], complete=False)
    m = evaluate_run(run, LABELS, manifest, EvaluationSettings(slice_columns=["group"], baseline=base)).as_dict()
    c = m["comparison"]
    base_metrics = json.loads((tmp_path / "base" / "report" / "metrics.json").read_text())

    assert c["run"] == "base" and c["matched_on"] == "row_index" and c["rows_compared"] == n
    assert c["flipped"] == {"right_to_wrong": len(r2w), "wrong_to_right": len(w2r), "other": len(other)}
    assert {s["row_index"] for s in c["samples"]["right_to_wrong"]} <= r2w and len(c["samples"]["right_to_wrong"]) == len(r2w)
    assert {s["row_index"] for s in c["samples"]["wrong_to_right"]} == w2r
    sample = c["samples"]["right_to_wrong"][0]
    i = sample["row_index"]
    assert sample == {
        "row_index": i,
        "id": i,
        "truth": LABELS[truth[i]],
        "before": LABELS[before[i].argmax()],
        "after": LABELS[after[i].argmax()],
        "score_before": before[i].max(),
        "score_after": after[i].max(),
    }
    scores = [s["score_after"] for s in c["samples"]["right_to_wrong"]]
    assert scores == sorted(scores, reverse=True)

    assert c["mcnemar_p"] == pytest.approx(mcnemar_reference(len(r2w), len(w2r)), rel=1e-12)
    assert c["accuracy_delta_paired"] == pytest.approx((len(w2r) - len(r2w)) / n)
    low, high = c["accuracy_delta_ci"]
    assert low < c["accuracy_delta_paired"] < high
    for metric in ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece"):
        assert c["deltas"][metric] == pytest.approx(m[metric] - base_metrics[metric], abs=1e-12)
    assert c["deltas"]["roc_auc_macro"] == pytest.approx(m["roc_auc"]["macro"] - base_metrics["roc_auc"]["macro"], abs=1e-12)
    assert c["deltas"]["accuracy"] == pytest.approx(c["accuracy_delta_paired"])  # same rows, same truth

    t = [LABELS[k] for k in truth]
    sides = [precision_recall_fscore_support(t, [LABELS[k] for k in p.argmax(1)], labels=LABELS, zero_division=0) for p in (before, after)]
    for j, name in enumerate(LABELS):
        for metric, k in (("precision", 0), ("recall", 1), ("f1", 2)):
            assert c["per_class_deltas"][name][metric] == pytest.approx(sides[1][k][j] - sides[0][k][j], abs=1e-12)

    right_before, right_after = before.argmax(1) == truth, after.argmax(1) == truth
    deltas = c["slice_deltas"]["group"]
    assert set(deltas) == {"a", "b", "None", NULL_GROUP}
    for key, d in deltas.items():
        rows = np.array([v is None if key == NULL_GROUP else v == key for v in group])
        assert d["rows"] == rows.sum()
        assert d["accuracy"] == pytest.approx(right_after[rows].mean() - right_before[rows].mean(), abs=1e-12)
    assert [d["accuracy"] for d in deltas.values()] == sorted(d["accuracy"] for d in deltas.values())


def test_runs_over_other_inputs_are_matched_on_ids(tmp_path):
    """The other run read other files (rows reordered, some missing, ids typed as integers there
    and as text here): rows are matched on the id, compared as text."""
    truth, before, after, r2w, w2r, other = two_runs_differing_in_known_rows(2, n=120)
    order = np.random.default_rng(3).permutation(120)[:100]  # this run: 100 of the rows, shuffled
    base, _ = write_run(tmp_path, "base", before, truth, ids=list(range(120)), files=[{"fingerprint": "old"}], id_column="rid")
    run, manifest = write_run(
        tmp_path,
        "cand",
        after[order],
        truth[order],
        ids=[str(i) for i in order],
        files=[{"fingerprint": "new"}],
        id_column="rid",
        complete=False,
    )
    c = evaluate_run(run, LABELS, manifest, EvaluationSettings(baseline=base)).as_dict()["comparison"]
    kept = set(order.tolist())
    assert c["matched_on"] == "id" and c["rows_compared"] == 100
    assert c["flipped"] == {"right_to_wrong": len(r2w & kept), "wrong_to_right": len(w2r & kept), "other": len(other & kept)}
    position = {int(i): p for p, i in enumerate(order)}
    assert {s["id"] for s in c["samples"]["wrong_to_right"]} == {str(i) for i in w2r & kept}
    assert all(s["row_index"] == position[int(s["id"])] for s in c["samples"]["wrong_to_right"])


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (5, 0), (3, 4), (17, 9), (40, 12), (300, 250), (1000, 1100)])
def test_mcnemar_exact_matches_the_binomial_reference(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(mcnemar_reference(b, c), rel=1e-9, abs=1e-300)
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)


def test_bootstrap_interval_matches_a_row_by_row_bootstrap():
    """The multinomial shortcut has the distribution of resampling rows one by one."""
    n, r2w, w2r = 500, 31, 18
    diffs = np.zeros(n)
    diffs[:r2w], diffs[r2w : r2w + w2r] = -1, 1
    rng = np.random.default_rng(123)
    naive = [diffs[rng.integers(0, n, size=n)].mean() for _ in range(4000)]
    low, high = accuracy_test(r2w, w2r, n)["ci"]
    assert low == pytest.approx(np.percentile(naive, 2.5), abs=0.004)
    assert high == pytest.approx(np.percentile(naive, 97.5), abs=0.004)
    assert accuracy_test(r2w, w2r, n)["ci"] == [low, high]  # fixed seed
    assert accuracy_test(0, 0, 10)["ci"] == [0.0, 0.0] and accuracy_test(0, 0, 0)["ci"] is None


def test_history_lists_completed_runs_oldest_first_and_this_run_last(tmp_path):
    truth = np.array([0, 1, 2, 3] * 5)
    probs = np.eye(4)[truth] * 0.7 + 0.075
    write_run(tmp_path, "b-newer", probs, truth, finished_at="2026-11-02T02:00:00+00:00")
    write_run(tmp_path, "a-older", probs, truth, finished_at="2026-11-01T02:00:00+00:00")
    write_run(tmp_path, "unfinished", probs, truth, complete=False)
    # Its metrics.json has no finished_at: the completion record's time orders it.
    write_run(tmp_path, "early", probs, truth)
    metrics_file = tmp_path / "early" / "report" / "metrics.json"
    metrics = {k: v for k, v in json.loads(metrics_file.read_text()).items() if k != "finished_at"}
    publish_complete(
        RunFolder.from_uri(str(tmp_path / "early")), {"metrics.json": json.dumps(metrics).encode()}, "2019-01-01T00:00:00+00:00"
    )
    (tmp_path / "stray.txt").write_text("not a run")
    output = Location.from_uri(str(tmp_path))

    runs = completed_runs(output)
    assert [r["run_id"] for r in runs] == ["early", "a-older", "b-newer"]
    assert runs[0]["finished_at"] < "2020" and runs[1]["accuracy"] == 1.0 and runs[1]["model_fingerprint"] == "model-a-older"

    this = {"finished_at": "2026-11-03T02:00:00+00:00", "rows": 20, "evaluated": 20, "accuracy": 0.5, "macro_f1": 0.4}
    plan = {"model_fingerprint": "m", "input_fingerprint": "i"}
    history = [h.record() for h in run_history(output, "b-newer", RecordedMetrics.parse(this), plan)]  # a rerun of b-newer
    assert [h["run_id"] for h in history] == ["early", "a-older", "b-newer"]
    assert history[-1] == {"run_id": "b-newer", "model_fingerprint": "m", "adapter_fingerprint": None, "input_fingerprint": "i"} | this
    assert set(history[0]) == {
        "run_id",
        "finished_at",
        "rows",
        "evaluated",
        "accuracy",
        "macro_f1",
        "model_fingerprint",
        "adapter_fingerprint",
        "input_fingerprint",
    }


def test_compare_to_previous_is_the_latest_completed_run_on_the_same_input(tmp_path):
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "label": ["cat", "dog"]}), data)
    same = [{"uri": str(data), "fingerprint": f.fingerprint} for f in list_input_files(str(data))]
    out = tmp_path / "out"
    truth, probs = np.array([0, 1]), np.array([[0.9, 0.1, 0, 0], [0.2, 0.8, 0, 0]])
    write_run(out, "old", probs, truth, files=same, finished_at="2026-11-01T00:00:00+00:00")
    write_run(out, "latest", probs, truth, files=same, finished_at="2026-11-02T00:00:00+00:00")
    write_run(out, "other-input", probs, truth, files=[{"fingerprint": "x"}], id_column="rid", finished_at="2026-11-03T00:00:00+00:00")
    write_run(out, "running", probs, truth, files=same, complete=False)

    def request(**params):
        return ScoreRequest(input_uri=str(data), model_uri="m", output_uri=str(out), **params)

    assert resolve_baseline(request(), "now") is None
    assert resolve_baseline(request(compare_to="previous"), "now") == "latest"
    assert resolve_baseline(request(compare_to="previous"), "latest") == "old"  # never this run
    assert resolve_baseline(request(compare_to="old"), "now") == "old"
    with pytest.raises(InputError, match="compare_to: run 'nope' under .* does not exist"):
        resolve_baseline(request(compare_to="nope"), "now")
    with pytest.raises(InputError, match="compare_to: run 'running' under .* has not completed"):
        resolve_baseline(request(compare_to="running"), "now")
    with pytest.raises(InputError, match="compare_to names this run"):
        resolve_baseline(request(compare_to="old"), "old")
    with pytest.raises(InputError, match="read other input files.*set id_column"):
        resolve_baseline(request(compare_to="other-input"), "now")
    assert resolve_baseline(request(compare_to="other-input", id_column="label"), "now") == "other-input"  # ids on both sides
    with pytest.raises(InputError, match="compare_to 'previous': no completed run under .* read the same input"):
        resolve_baseline(ScoreRequest(input_uri=str(data), model_uri="m", output_uri=str(tmp_path / "empty"), compare_to="previous"), "now")


@pytest.mark.integration
def test_history_and_comparison_over_object_storage(moto, tmp_path):
    """The same listing, batched reads and DuckDB join through s3fs (moto's S3 server on loopback)."""
    truth, before, after, r2w, w2r, other = two_runs_differing_in_known_rows(4, n=60)
    write_run(tmp_path / "local", "base", before, truth, finished_at="2026-11-01T00:00:00+00:00")
    _, manifest = write_run(tmp_path / "local", "cand", after, truth, complete=False)
    (tmp_path / "local" / "unfinished").mkdir()
    (tmp_path / "local" / "unfinished" / "plan.json").write_text("{}")
    bucket = moto.create_bucket()
    moto.upload_folder(tmp_path / "local", f"s3://{bucket}/runs")
    output = Location.from_uri(f"s3://{bucket}/runs", **moto.storage_options())

    assert [r["run_id"] for r in completed_runs(output)] == ["base"]
    m = evaluate_run(output.child("cand"), LABELS, manifest, EvaluationSettings(baseline=output.child("base"))).as_dict()
    assert m["comparison"]["flipped"] == {"right_to_wrong": len(r2w), "wrong_to_right": len(w2r), "other": len(other)}
    assert [h.run_id for h in run_history(output, "cand", RecordedMetrics.parse(m), {})] == ["base", "cand"]


def test_a_baseline_written_before_fields_existed_is_compared_on_what_it_has(tmp_path):
    """compare_to an early run: its metrics.json lacks `head`, `roc_auc`, `average_precision` and
    `finished_at` (fields added since). The deltas it can give are given, the others are null."""
    truth, before, after, *_ = two_runs_differing_in_known_rows(2, n=80)
    base, _ = write_run(tmp_path, "base", before, truth)
    path = tmp_path / "base" / "report" / "metrics.json"
    early = {k: v for k, v in json.loads(path.read_text()).items() if k not in {"head", "roc_auc", "average_precision", "finished_at"}}
    publish_complete(RunFolder.from_uri(str(tmp_path / "base")), {"metrics.json": json.dumps(early).encode()}, "2026-01-01")
    run, manifest = write_run(tmp_path, "cand", after, truth, complete=False)
    c = evaluate_run(run, LABELS, manifest, EvaluationSettings(baseline=base)).as_dict()["comparison"]
    assert c["deltas"]["roc_auc_macro"] is None and c["deltas"]["average_precision_macro"] is None
    assert c["deltas"]["accuracy"] == pytest.approx(c["accuracy_delta_paired"]) and c["deltas"]["macro_f1"] is not None
    assert [h["run_id"] for h in completed_runs(Location.from_uri(str(tmp_path)))] == ["base"]

"""The contract's section 8 metrics (docs/contracts.md) and the report's extra fields, computed in DuckDB, against scikit-learn
and references written here (Wilson by its formula), on random data with ties (rounded scores),
labels absent from the truth, labels the model does not know, and slices with a null group."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import (
    average_precision_score,
    precision_recall_fscore_support,
    roc_auc_score,
    roc_curve,
    top_k_accuracy_score,
)

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.duck import NULL_GROUP
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.evaluation.single_label import THRESHOLDS
from scorekeeper.run_folder import RunFolder
from tests.helpers import staged_manifest

LABELS = ["cat", "dog", "bird", "fish", "cow", "eel"]
Z = 1.959963984540054


def wilson(successes: int, n: int) -> list[float]:
    p = successes / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return [centre - half, centre + half]


def random_scores(rng, n: int, labels: int, truth, decimals: int = 1):
    """Softmax probabilities, better than chance, rounded so that ties are common."""
    logits = rng.normal(size=(n, labels)) * rng.uniform(0.5, 3)
    known = truth < labels
    logits[np.arange(n)[known], truth[known]] += rng.uniform(0.5, 2)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return np.round(probs, decimals)


def write_run(tmp_path, probs, truth_labels, labels=LABELS, texts=None, slices=None):
    """A run folder with predictions.parquet and the staged input, as the gather and read steps write them."""
    n = len(probs)
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    predicted = probs.argmax(1)
    pq.write_table(
        pa.table(
            {
                "row_index": pa.array(range(n), pa.int64()),
                "id": pa.array([f"r{i}" for i in range(n)]),
                "predicted_id": pa.array(predicted, pa.int64()),
                "predicted_label": pa.array([labels[i] for i in predicted]),
                "score": pa.array(probs.max(1)),
                "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
            }
        ),
        run / "predictions.parquet",
    )
    staged = {
        "row_index": pa.array(range(n), pa.int64()),
        "id": pa.array([f"r{i}" for i in range(n)]),
        "text": pa.array(texts or [f"text {i}" for i in range(n)]),
        "label": pa.array(truth_labels, pa.string()),
    }
    for i, values in enumerate(slices or []):
        staged[f"slice_{i}"] = pa.array(values, pa.string())
    pq.write_table(pa.table(staged), run / "work" / "input.parquet")
    return RunFolder.from_uri(str(run)), staged_manifest(n, "string")


@pytest.mark.parametrize("seed", range(4))
def test_ranking_metrics_match_scikit_learn(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(80, 300))
    present = len(LABELS) - 1 - (seed % 2)  # the last label (and for odd seeds one more) never true
    truth = rng.integers(0, present, size=n)
    probs = random_scores(rng, n, len(LABELS), truth, decimals=1 + seed % 2)
    names = [LABELS[t] for t in truth]
    unknown = rng.random(n) < 0.05  # labels the model cannot predict: misses, left out of AUC/AP
    names = ["hamster" if u else name for u, name in zip(unknown, names)]
    run, manifest = write_run(tmp_path, probs, names)
    m = evaluate_run(run, LABELS, manifest).as_dict()

    pred = probs.argmax(1)
    correct = (pred == truth) & ~unknown
    assert m["evaluated"] == n and m["unknown_labels"] == {"hamster": int(unknown.sum())}
    assert m["accuracy_ci"] == pytest.approx(wilson(int(correct.sum()), n), abs=1e-12)

    known = ~unknown
    for k, name in enumerate(LABELS):
        y = truth[known] == k
        if y.any() and not y.all():
            assert m["roc_auc"]["per_class"][name] == pytest.approx(roc_auc_score(y, probs[known, k]), abs=1e-12)
        else:
            assert m["roc_auc"]["per_class"][name] is None
        if y.any():
            assert m["average_precision"]["per_class"][name] == pytest.approx(average_precision_score(y, probs[known, k]), abs=1e-12)
        else:
            assert m["average_precision"]["per_class"][name] is None
    assert LABELS[-1] not in set(names) and m["roc_auc"]["per_class"][LABELS[-1]] is None
    for field in ("roc_auc", "average_precision"):
        values = [v for v in m[field]["per_class"].values() if v is not None]
        assert m[field]["macro"] == pytest.approx(np.mean(values), abs=1e-12)

    assert list(m["top_k_accuracy"]) == ["2", "3", "4", "5"]
    for k in range(2, 6):
        hits = top_k_accuracy_score(truth[known], probs[known], k=k, labels=list(range(len(LABELS))), normalize=False)
        assert m["top_k_accuracy"][str(k)] == pytest.approx(hits / n, abs=1e-12)  # unknown labels are misses

    true_names, pred_names = np.array(names), np.array([LABELS[p] for p in pred])
    scores = probs.max(1)
    assert [t["threshold"] for t in m["thresholds"]] == THRESHOLDS
    for row in m["thresholds"]:
        kept = scores >= row["threshold"]
        assert row["rows"] == kept.sum() and row["coverage"] == pytest.approx(kept.mean())
        if not kept.any():
            assert row["accuracy"] is None and row["macro_f1"] is None
            continue
        p, r, f, _ = precision_recall_fscore_support(true_names[kept], pred_names[kept], average="macro", zero_division=0)
        assert row["accuracy"] == pytest.approx(correct[kept].mean(), abs=1e-12)
        assert (row["macro_precision"], row["macro_recall"], row["macro_f1"]) == pytest.approx((p, r, f), abs=1e-12)

    edges = m["score_histogram"]["edges"]
    assert len(edges) == 21 and edges[0] == 0.0 and edges[-1] == 1.0
    assert m["score_histogram"]["correct"] == np.histogram(scores[correct], bins=edges)[0].tolist()
    assert m["score_histogram"]["wrong"] == np.histogram(scores[~correct], bins=edges)[0].tolist()

    wrong = np.flatnonzero(~correct)
    expected = sorted(wrong, key=lambda i: (-scores[i], i))[:20]
    assert [e["row_index"] for e in m["confident_errors"]] == expected
    first = m["confident_errors"][0]
    i = first["row_index"]
    assert first == {
        "row_index": i,
        "id": f"r{i}",
        "text": f"text {i}",
        "truth": names[i],
        "predicted": LABELS[pred[i]],
        "score": scores[i],
    }

    for k, name in enumerate(LABELS):
        y = truth[known] == k
        curve = m["curves"]["roc"].get(name)
        if not (y.any() and not y.all()):
            assert curve is None
            continue
        assert len(curve["fpr"]) <= 101 and (curve["fpr"][0], curve["tpr"][0]) == (0.0, 0.0)
        assert (curve["fpr"][-1], curve["tpr"][-1]) == (1.0, 1.0)
        fpr, tpr, _ = roc_curve(y, probs[known, k], drop_intermediate=False)
        sk_points = set(zip(np.round(fpr, 12), np.round(tpr, 12)))
        assert set(zip(np.round(curve["fpr"], 12), np.round(curve["tpr"], 12))) <= sk_points  # every point lies on the curve
        pr = m["curves"]["pr"][name]
        assert len(pr["recall"]) <= 101 and pr["recall"][-1] == 1.0 and (pr["recall"][0], pr["precision"][0]) == (0.0, 1.0)


def test_curves_are_thinned_to_about_a_hundred_points(tmp_path):
    rng = np.random.default_rng(7)
    n = 3000
    truth = rng.integers(0, 3, size=n)
    probs = random_scores(rng, n, 3, truth, decimals=6)
    run, manifest = write_run(tmp_path, probs, [LABELS[t] for t in truth], labels=LABELS[:3])
    m = evaluate_run(run, LABELS[:3], manifest).as_dict()
    for name in LABELS[:3]:
        roc = m["curves"]["roc"][name]
        assert 50 < len(roc["fpr"]) <= 101
        assert all(a <= b for a, b in zip(roc["fpr"], roc["fpr"][1:])) and all(a <= b for a, b in zip(roc["tpr"], roc["tpr"][1:]))
        assert np.trapezoid(roc["tpr"], roc["fpr"]) == pytest.approx(m["roc_auc"]["per_class"][name], abs=0.01)
        assert 50 < len(m["curves"]["pr"][name]["recall"]) <= 101
    assert list(m["top_k_accuracy"]) == ["2"]  # 3 labels: k = 2 only


def test_one_class_in_the_truth_and_two_labels(tmp_path):
    """A class present in every row: ROC-AUC is undefined (null), AP is scikit-learn's 1.0; with two
    labels there is no top-k accuracy."""
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3], [0.7, 0.3]])
    run, manifest = write_run(tmp_path, probs, ["cat"] * 4, labels=LABELS[:2])
    m = evaluate_run(run, LABELS[:2], manifest).as_dict()
    assert m["roc_auc"] == {"macro": None, "per_class": {"cat": None, "dog": None}}
    assert m["average_precision"] == {"macro": 1.0, "per_class": {"cat": 1.0, "dog": None}}
    assert m["top_k_accuracy"] == {}
    assert m["accuracy_ci"] == pytest.approx(wilson(3, 4))
    assert m["curves"]["roc"] == {} and list(m["curves"]["pr"]) == ["cat"]


def test_slices_keep_null_apart_from_text_spelled_none(tmp_path):
    rng = np.random.default_rng(3)
    n = 120
    truth = rng.integers(0, 4, size=n)
    probs = random_scores(rng, n, len(LABELS), truth)
    group = rng.choice(np.array(["None", "null", "a", "x", None], dtype=object), size=n).tolist()
    group[0], group[1] = None, "None"  # both present whatever the draw
    single = ["only"] * n  # a one-value slice: one group holding every row
    run, manifest = write_run(tmp_path, probs, [LABELS[t] for t in truth], slices=[group, single])
    m = evaluate_run(run, LABELS, manifest, EvaluationSettings(slice_columns=["group", "single"])).as_dict()
    correct = probs.argmax(1) == truth

    by_group = m["slices"]["group"]
    assert set(by_group) == {NULL_GROUP, "None", "null", "a", "x"}
    assert sum(g["rows"] for g in by_group.values()) == n  # no row vanishes
    for key, stats in by_group.items():
        rows = np.array([v is None if key == NULL_GROUP else v == key for v in group])
        assert stats["rows"] == rows.sum()
        assert stats["accuracy"] == pytest.approx(correct[rows].mean())
        assert stats["accuracy_ci"] == pytest.approx(wilson(int(correct[rows].sum()), int(rows.sum())), abs=1e-12)
    accuracies = [g["accuracy"] for g in by_group.values()]
    assert accuracies == sorted(accuracies)  # worst first
    assert m["slices"]["single"] == {
        "only": {"rows": n, "accuracy": correct.mean(), "accuracy_ci": pytest.approx(wilson(int(correct.sum()), n))}
    }
    assert m["slices_truncated"] == {}


def test_null_group_key_never_collides_with_a_value(tmp_path):
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]])
    run, manifest = write_run(tmp_path, probs, ["cat", "cat", "dog"], labels=LABELS[:2], slices=[[None, NULL_GROUP, NULL_GROUP]])
    m = evaluate_run(run, LABELS[:2], manifest, EvaluationSettings(slice_columns=["s"])).as_dict()
    assert m["slices"]["s"][NULL_GROUP]["rows"] == 2
    assert m["slices"]["s"][NULL_GROUP + " [null]"]["rows"] == 1


def test_many_slice_groups_keep_the_largest_and_say_so(tmp_path):
    n = 200
    probs = np.tile([[0.8, 0.2]], (n, 1))
    values = [str(i % 60) if i < 120 else "big" for i in range(n)]  # 61 groups, "big" has 80 rows
    run, manifest = write_run(tmp_path, probs, ["cat"] * n, labels=LABELS[:2], slices=[values])
    m = evaluate_run(run, LABELS[:2], manifest, EvaluationSettings(slice_columns=["v"])).as_dict()
    assert len(m["slices"]["v"]) == 50 and m["slices"]["v"]["big"]["rows"] == 80
    assert m["slices_truncated"] == {"v": 61}


def test_scoring_only_run_has_no_ranking_fields(tmp_path):
    probs = np.array([[0.9, 0.1], [0.4, 0.6]])
    run, manifest = write_run(tmp_path, probs, [None, None], labels=LABELS[:2])
    m = evaluate_run(run, LABELS[:2], manifest).as_dict()
    assert m["evaluated"] == 0
    assert all(m.get(k) is None for k in ("roc_auc", "average_precision", "accuracy_ci", "thresholds", "curves", "comparison"))

"""Evaluation in DuckDB against scikit-learn (the reference, not the engine) on random data."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, log_loss, precision_recall_fscore_support

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.run_folder import RunFolder
from tests.helpers import staged_manifest, write_predictions

LABELS = ["cat", "dog", "bird", "fish"]


def _ece(confidence, correct, bins=15):
    """ECE over the bins [j/bins, (j+1)/bins), the last one holding 1.0 (docs/drift.md)."""
    index = np.minimum(np.floor(confidence * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = index == b
        if inside.any():
            total += inside.sum() * abs(correct[inside].mean() - confidence[inside].mean())
    return total / len(confidence)


def _write_run(tmp_path, probs, labels, ids=None, label_type="name"):
    n = len(probs)
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    ids = ids if ids is not None else list(range(n))
    write_predictions(run / "predictions.parquet", probs, ids, LABELS)
    pq.write_table(
        pa.table({"row_index": pa.array(range(n), pa.int64()), "id": pa.array(ids), "text": ["x"] * n, "label": pa.array(labels)}),
        run / "work" / "input.parquet",
    )
    return RunFolder.from_uri(str(run)), staged_manifest(n)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("label_type", ["name", "id"])
def test_metrics_match_scikit_learn(tmp_path, seed, label_type):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    truth = rng.integers(0, len(LABELS) - (seed == 2), size=n)  # seed 2: one class never true
    logits = rng.normal(size=(n, len(LABELS))) * rng.uniform(0.5, 4)
    logits[np.arange(n), truth] += rng.uniform(0, 3)  # better than chance, so every metric is exercised
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = [LABELS[t] for t in truth] if label_type == "name" else truth.tolist()
    run, manifest = _write_run(tmp_path, probs, labels)
    m = evaluate_run(run, LABELS, manifest).as_dict()

    pred = probs.argmax(1)
    t_names = np.array([LABELS[t] for t in truth])
    p_names = np.array([LABELS[p] for p in pred])
    assert m["rows"] == m["scored"] == m["evaluated"] == n
    assert m["accuracy"] == pytest.approx(accuracy_score(t_names, p_names), abs=1e-12)
    assert m["macro_f1"] == pytest.approx(f1_score(t_names, p_names, average="macro", zero_division=0), abs=1e-12)
    assert m["weighted_f1"] == pytest.approx(f1_score(t_names, p_names, average="weighted", zero_division=0), abs=1e-12)
    assert m["log_loss"] == pytest.approx(log_loss(truth, probs, labels=list(range(len(LABELS)))), rel=1e-9)
    assert m["ece"] == pytest.approx(_ece(probs.max(1), pred == truth), abs=1e-12)
    classes = sorted(set(t_names) | set(p_names))
    p, r, f, s = precision_recall_fscore_support(t_names, p_names, labels=classes, zero_division=0)
    for i, c in enumerate(classes):
        assert m["per_class"][c] == pytest.approx({"precision": p[i], "recall": r[i], "f1": f[i], "support": s[i]})
    cm = confusion_matrix(t_names, p_names, labels=classes)
    for i, tc in enumerate(classes):
        for j, pc in enumerate(classes):
            assert m["confusion"].get(tc, {}).get(pc, 0) == cm[i, j]
    assert m["missing_predictions"] == m["unmatched_predictions"] == 0 and m["unknown_labels"] == {}


def test_unknown_and_missing_labels_are_counted(tmp_path):
    probs = np.array([[0.9, 0.05, 0.03, 0.02], [0.1, 0.8, 0.05, 0.05], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
    run, manifest = _write_run(tmp_path, probs, ["cat", "hamster", None, "7"])
    m = evaluate_run(run, LABELS, manifest).as_dict()
    assert m["evaluated"] == 3 and m["unmatched_predictions"] == 1
    assert m["unknown_labels"] == {"hamster": 1, "7": 1}
    # scikit-learn semantics: unknown labels are classes the model never predicts (f1 = 0)
    t, p = ["cat", "hamster", "7"], ["cat", "dog", "cat"]
    assert m["accuracy"] == pytest.approx(accuracy_score(t, p))
    assert m["macro_f1"] == pytest.approx(f1_score(t, p, average="macro", zero_division=0))
    assert m["log_loss_rows"] == 1 and m["log_loss"] == pytest.approx(-np.log(0.9))


def test_integer_label_ids_and_digit_strings_map_to_model_labels(tmp_path):
    probs = np.array([[0.9, 0.05, 0.03, 0.02], [0.1, 0.8, 0.05, 0.05]])
    run, manifest = _write_run(tmp_path, probs, ["0", "1"])
    m = evaluate_run(run, LABELS, manifest).as_dict()
    assert m["accuracy"] == 1.0 and m["unknown_labels"] == {}

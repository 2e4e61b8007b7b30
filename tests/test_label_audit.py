"""The label audit (scorekeeper/evaluation/label_audit.py, confident learning in DuckDB) against a NumPy reference
written from the paper's definition (Northcutt, Jiang & Chuang, JAIR 2021, section 3.1), and on
data with injected label errors: most injected errors are found, few clean rows are flagged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorekeeper.evaluation.driver import evaluate_run
from tests.test_compare import LABELS, write_run
from tests.test_properties import examples


def confident_learning(given: np.ndarray, probs: np.ndarray):
    """The paper's confident joint: t_j = mean of p_j over the examples labelled j; an example
    labelled i goes to C[i][j*] with j* = argmax over {j : p_j >= t_j} of p_j (none: not counted).
    Returns the thresholds, C, and the off-diagonal examples as {row: (j*, margin)}."""
    k = probs.shape[1]
    thresholds = np.array([probs[given == j, j].mean() if np.any(given == j) else np.inf for j in range(k)])
    joint = np.zeros((k, k), dtype=int)
    suspected = {}
    for row, (i, p) in enumerate(zip(given, probs, strict=True)):
        above = p >= thresholds
        if not above.any():
            continue
        j = int(np.argmax(np.where(above, p, -1.0)))
        joint[i, j] += 1
        if j != i:
            suspected[row] = (j, p[j] - p[i])
    return thresholds, joint, suspected


def audit_of(tmp_path, probs, truth, name="run"):
    run, manifest = write_run(tmp_path, name, probs, truth, complete=False)
    return evaluate_run(run, LABELS, manifest).as_dict()


def test_the_audit_is_the_confident_joint_off_its_diagonal(tmp_path):
    rng = np.random.default_rng(0)
    n = 500
    truth = rng.integers(0, len(LABELS), size=n)
    probs = rng.dirichlet(np.ones(len(LABELS)) * 0.7, size=n)
    probs[np.arange(n), truth] += rng.uniform(0, 1.5, size=n)
    probs = (probs / probs.sum(1, keepdims=True)).round(3)  # rounded: ties, as real scores have
    metrics = audit_of(tmp_path, probs, truth)
    audit = metrics["label_audit"]
    thresholds, joint, suspected = confident_learning(truth, probs)

    assert audit["method"] == "confident_learning"
    assert list(audit["thresholds"]) == LABELS
    assert [audit["thresholds"][name] for name in LABELS] == pytest.approx(thresholds, abs=1e-12)
    assert audit["suspected"] == len(suspected) == joint.sum() - np.trace(joint)
    expected_pairs = {
        LABELS[i]: {LABELS[j]: int(joint[i, j]) for j in range(len(LABELS)) if j != i and joint[i, j]} for i in range(len(LABELS))
    }
    assert audit["by_pair"] == {g: s for g, s in expected_pairs.items() if s}
    order = sorted(suspected, key=lambda r: (-suspected[r][1], r))[:50]
    assert [r["row_index"] for r in audit["rows"]] == order
    for r in audit["rows"]:
        j, margin = suspected[r["row_index"]]
        assert r["suggested"] == LABELS[j] and r["given"] == LABELS[truth[r["row_index"]]]
        assert r["margin"] == pytest.approx(margin, abs=1e-12) and r["id"] == r["row_index"] and r["text"] == f"t{r['row_index']}"
    clean = np.array([i not in suspected for i in range(n)])
    assert audit["accuracy_excluding_suspected"] == pytest.approx(np.mean(probs.argmax(1)[clean] == truth[clean]))


def test_injected_label_errors_are_found_and_clean_rows_are_not(tmp_path):
    """A fair model (right on 90.6% of the true classes) and 10% of the given labels (212 of 2000)
    replaced by another class at random: the audit finds 70.8% of the replaced labels and flags 0.8%
    of the clean rows (confident learning is built for precision: a replaced row whose true class
    the model gives less than that class's threshold is not counted at all)."""
    rng = np.random.default_rng(1)
    n, k = 2000, len(LABELS)
    true_class = rng.integers(0, k, size=n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), true_class] += 2.5
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    flipped = rng.random(n) < 0.10
    given = true_class.copy()
    given[flipped] = (true_class[flipped] + rng.integers(1, k, size=flipped.sum())) % k
    audit = audit_of(tmp_path, probs, given)["label_audit"]
    _, _, reference = confident_learning(given, probs)
    found = set(reference)
    assert audit["suspected"] == len(found)
    recall = np.mean([i in found for i in np.flatnonzero(flipped)])
    false_alarms = np.mean([i in found for i in np.flatnonzero(~flipped)])
    print(f"injected {flipped.sum()} of {n}: found {recall:.1%} of them, flagged {false_alarms:.1%} of clean rows")
    assert np.mean(probs.argmax(1) == true_class) == pytest.approx(0.906)
    assert recall >= 0.7 and false_alarms <= 0.01
    top = [r["row_index"] for r in audit["rows"]]
    assert np.mean(flipped[top]) >= 0.9  # the largest margins are the injected errors


def test_a_class_without_rows_has_no_threshold_and_is_never_suggested(tmp_path):
    truth = np.array([0, 0, 1, 1, 2, 2])
    probs = np.array(
        [[0.9, 0.05, 0.03, 0.02], [0.2, 0.75, 0.03, 0.02], [0.1, 0.8, 0.05, 0.05], [0.1, 0.6, 0.2, 0.1]] + [[0.1, 0.1, 0.7, 0.1]] * 2
    )
    audit = audit_of(tmp_path, probs, truth)["label_audit"]
    assert audit["thresholds"]["fish"] is None
    assert audit["thresholds"]["cat"] == pytest.approx(0.55) and audit["thresholds"]["dog"] == pytest.approx(0.7)
    # row 1: cat given, p(cat) 0.2 < 0.55, p(dog) 0.75 >= 0.7: suggested dog, margin 0.55
    assert audit["suspected"] == 1 and audit["by_pair"] == {"cat": {"dog": 1}}
    assert audit["rows"][0] | {"text": None} == {
        "row_index": 1,
        "id": 1,
        "text": None,
        "given": "cat",
        "suggested": "dog",
        "margin": pytest.approx(0.55),
    }
    assert audit["accuracy_excluding_suspected"] == pytest.approx(1.0)


@settings(max_examples=examples(40), deadline=None)
@given(
    k=st.integers(2, 5),
    rows=st.integers(1, 60),
    decimals=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    missing=st.integers(0, 2),
)
def test_the_suspected_rows_are_the_reference_on_generated_scores(k, rows, decimals, seed, missing):
    """label_audit.sql (one pass of list functions per row) against the reference over generated
    scores: coarse rounding makes ties between classes, and up to two classes have no rows labelled
    with them, so no threshold."""
    import duckdb

    from scorekeeper.evaluation.duck import sql

    rng = np.random.default_rng(seed)
    given_ = rng.integers(0, max(1, k - missing), size=rows)
    probs = rng.dirichlet(np.ones(k) * 0.5, size=rows).round(decimals).astype(np.float32)
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE labels AS SELECT range AS label_id, 'c' || range AS label_name FROM range(?)", [k])
    con.execute("CREATE TEMP TABLE evaluated (row_index BIGINT, true_id BIGINT, probabilities FLOAT[])")
    con.executemany(
        "INSERT INTO evaluated VALUES (?, ?, ?)", [(i, int(g), p.tolist()) for i, (g, p) in enumerate(zip(given_, probs, strict=True))]
    )
    con.execute(sql("label_audit.sql"))
    got = {r: (int(j), m) for r, _, j, m in con.execute("SELECT row_index, true_id, suggested_id, margin FROM audit_suspected").fetchall()}
    # the reference over the float32 scores' exact values in float64, as DuckDB averages them
    _, _, expected = confident_learning(given_, probs.astype(np.float64))
    assert got.keys() == expected.keys()
    for row, (j, margin) in expected.items():
        assert got[row][0] == j and got[row][1] == pytest.approx(margin, abs=1e-6)

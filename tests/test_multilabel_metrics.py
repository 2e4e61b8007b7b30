"""The multi-label metrics of docs/contracts.md section 9 (scorekeeper/evaluation/multi_label.py), computed in DuckDB,
against scikit-learn and references written here (binary ECE, the threshold search by brute force),
on seeded random data with ties (rounded probabilities, exact 0 and 1 among them), a label never
true, a label always true, rows with no label, rows without ground truth, and one row."""

from __future__ import annotations

import hashlib
import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    coverage_error,
    f1_score,
    hamming_loss,
    label_ranking_average_precision_score,
    label_ranking_loss,
    log_loss,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
    roc_auc_score,
)

from scorekeeper.evaluation.multi_label import multilabel_metrics

LABELS = ["bug", "feature", "docs", "question", "security"]
TOL = 1e-9
BINS = 15


def random_case(rng, n: int, labels: int = len(LABELS), decimals: int = 1, always: bool = True):
    """Truth with a label never true (0), one always true (1) or else rows with no label at all;
    probabilities better than chance, rounded so that ties (and exact 0 and 1) are common."""
    prevalence = rng.uniform(0.1, 0.6, size=labels)
    truth = rng.random((n, labels)) < prevalence
    truth[:, 0] = False
    if always and labels > 1:
        truth[:, 1] = True
    truth[rng.random(n) < 0.15, 2 if always else 0 :] = False
    logits = rng.normal(size=(n, labels)) * rng.uniform(0.5, 4) + np.where(truth, 1.0, -1.0)
    probs = np.round(1 / (1 + np.exp(-logits)), decimals)
    return truth, probs


def make_con(truth, probs, no_truth=()):
    con = duckdb.connect()
    n = len(probs)
    table = pa.table(
        {
            "row_index": pa.array(range(n), pa.int64()),
            "id": pa.array([f"r{i}" for i in range(n)]),
            "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
            "truth": pa.array([None if i in no_truth else t for i, t in enumerate(truth.tolist())], pa.list_(pa.bool_())),
        }
    )
    con.register("ml_rows", table)
    return con


def binary_ece(y, p) -> float:
    b = np.minimum(np.floor(p * BINS).astype(int), BINS - 1)
    return sum((b == k).sum() * abs(y[b == k].mean() - p[b == k].mean()) for k in range(BINS) if (b == k).any()) / len(p)


def tuning_half(ids) -> np.ndarray:
    return np.array([hashlib.md5(str(i).encode()).hexdigest()[0] < "8" for i in ids])


def brute_force_threshold(y, p):
    """The F1-optimal cut on (y, p) by trying every midpoint between distinct probabilities, highest F1, then highest cut."""
    if not y.any():
        return None, None
    scores = np.unique(p)[::-1]
    lower = np.append(scores[1:], 0.0)
    best = (None, -1.0)
    for s, below in zip(scores, lower):
        if s <= below:
            continue
        t = (s + below) / 2 if (s + below) / 2 < s else below
        predicted = p > t
        f1 = 2 * (y & predicted).sum() / (predicted.sum() + y.sum())
        if f1 > best[1]:
            best = (t, f1)
    return best


def mean_of_known(values):
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def sklearn_reference(truth, probs, thresholds):
    pred = probs > np.asarray(thresholds)
    ref = {
        "subset_accuracy": accuracy_score(truth, pred),
        "hamming_loss": hamming_loss(truth, pred),
        "micro_precision": precision_score(truth, pred, average="micro"),
        "micro_recall": recall_score(truth, pred, average="micro"),
        "micro_f1": f1_score(truth, pred, average="micro"),
        "macro_f1": f1_score(truth, pred, average="macro"),
        "weighted_f1": f1_score(truth, pred, average="weighted"),
        "samples_f1": f1_score(truth, pred, average="samples"),
        "lrap": label_ranking_average_precision_score(truth, probs),
        "coverage_error": coverage_error(truth, probs),
        "ranking_loss": label_ranking_loss(truth, probs),
        # binary cross-entropy per label (NOT log_loss on the indicator matrix), averaged
        "log_loss": float(np.mean([log_loss(truth[:, j], probs[:, j], labels=[0, 1]) for j in range(truth.shape[1])])),
    }
    defined = [0 < truth[:, j].sum() < len(truth) for j in range(truth.shape[1])]
    roc = [roc_auc_score(truth[:, j], probs[:, j]) if d else None for j, d in enumerate(defined)]
    ap = [average_precision_score(truth[:, j], probs[:, j]) if d else None for j, d in enumerate(defined)]
    pooled = 0 < truth.sum() < truth.size
    ref["roc_auc"] = (roc, mean_of_known(roc), roc_auc_score(truth.ravel(), probs.ravel()) if pooled else None)
    ref["average_precision"] = (ap, mean_of_known(ap), average_precision_score(truth.ravel(), probs.ravel()) if pooled else None)
    ref["per_label"] = precision_recall_fscore_support(truth, pred, average=None, zero_division=0)
    ref["ece_per_label"] = [binary_ece(truth[:, j], probs[:, j]) for j in range(truth.shape[1])]
    ref["ece_micro"] = binary_ece(truth.ravel(), probs.ravel())
    ref["cardinality"] = (truth.sum(1).mean(), pred.sum(1).mean(), int((pred.sum(1) == 0).sum()))
    return ref


def check_against_sklearn(got, truth, probs, thresholds, ids):
    labels = LABELS[: truth.shape[1]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sklearn_reference(truth, probs, thresholds)
    assert got["evaluated"] == len(truth)
    for key in (
        "subset_accuracy",
        "hamming_loss",
        "micro_precision",
        "micro_recall",
        "micro_f1",
        "macro_f1",
        "weighted_f1",
        "samples_f1",
        "lrap",
        "coverage_error",
        "ranking_loss",
        "log_loss",
    ):
        assert got[key] == pytest.approx(ref[key], abs=TOL), key
    for key in ("roc_auc", "average_precision"):
        per_label, macro, micro = ref[key]
        for name, value in zip(labels, per_label):
            assert got[key]["per_label"][name] == (None if value is None else pytest.approx(value, abs=TOL)), (key, name)
        assert got[key]["macro"] == (None if macro is None else pytest.approx(macro, abs=TOL))
        assert got[key]["micro"] == (None if micro is None else pytest.approx(micro, abs=TOL))
    p, r, f1, support = ref["per_label"]
    for j, name in enumerate(labels):
        row = got["per_label"][name]
        assert (row["precision"], row["recall"], row["f1"]) == pytest.approx((p[j], r[j], f1[j]), abs=TOL), name
        assert row["support"] == support[j] and row["threshold"] == thresholds[j]
        assert got["ece"]["per_label"][name] == pytest.approx(ref["ece_per_label"][j], abs=TOL)
    assert got["ece"]["macro"] == pytest.approx(np.mean(ref["ece_per_label"]), abs=TOL)
    assert got["ece"]["micro"] == pytest.approx(ref["ece_micro"], abs=TOL)
    truth_card, pred_card, without = ref["cardinality"]
    card = got["label_cardinality"]
    assert (card["truth"], card["predicted"]) == pytest.approx((truth_card, pred_card), abs=TOL)
    assert card["rows_without_prediction"] == without

    tune = tuning_half(ids)
    assert got["threshold_tuning"]["tuning_rows"] == tune.sum() and got["threshold_tuning"]["heldout_rows"] == (~tune).sum()
    for j, name in enumerate(labels):
        row = got["per_label"][name]
        t, f1_in = brute_force_threshold(truth[tune, j], probs[tune, j])
        if t is None:
            assert row["tuned_threshold"] is None and row["tuned_f1_in_sample"] is None and row["tuned_f1_heldout"] is None
            continue
        assert row["tuned_threshold"] == pytest.approx(t, abs=1e-15) and row["tuned_f1_in_sample"] == pytest.approx(f1_in, abs=TOL)
        if (~tune).any():
            held = f1_score(truth[~tune, j], probs[~tune, j] > t, zero_division=0)
            given = f1_score(truth[~tune, j], probs[~tune, j] > thresholds[j], zero_division=0)
            assert row["tuned_f1_heldout"] == pytest.approx(held, abs=TOL)
            assert row["heldout_f1_at_threshold"] == pytest.approx(given, abs=TOL)
        else:
            assert row["tuned_f1_heldout"] is None


@pytest.mark.parametrize("seed", range(6))
def test_multilabel_metrics_match_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 400))
    truth, probs = random_case(rng, n, decimals=1 + seed % 3, always=seed % 2 == 0)
    thresholds = [0.5, 0.3, float(rng.uniform(0.2, 0.8)), 0.5, 0.7]
    no_truth = set(rng.choice(n, size=n // 10, replace=False).tolist())
    got = multilabel_metrics(make_con(truth, probs, no_truth), LABELS, thresholds)
    keep = np.array([i not in no_truth for i in range(n)])
    check_against_sklearn(got, truth[keep], probs[keep], thresholds, [f"r{i}" for i in range(n) if keep[i]])
    assert got["roc_auc"]["per_label"]["bug"] is None and got["average_precision"]["per_label"]["bug"] is None
    if seed % 2 == 0:  # always true: null, not scikit-learn's 1.0
        assert got["roc_auc"]["per_label"]["feature"] is None and got["average_precision"]["per_label"]["feature"] is None
    else:
        assert got["label_cardinality"]["rows_without_prediction"] > 0 and (truth[keep].sum(1) == 0).any()


def test_a_tie_in_tuned_f1_goes_to_the_higher_threshold():
    """Probabilities in quarters over a few rows make equal F1s at several cuts: the tuned threshold
    is the highest of them (brute_force_threshold tries the cuts from the highest, keeping the first
    best), on every label of every generated case, and the cases hold such ties."""
    ties = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(4, 16))
        truth = rng.random((n, len(LABELS))) < 0.5
        probs = rng.integers(0, 5, size=(n, len(LABELS))) / 4
        got = multilabel_metrics(make_con(truth, probs), LABELS, [0.5] * len(LABELS))
        tune = tuning_half([f"r{i}" for i in range(n)])
        for j, name in enumerate(LABELS):
            y, p = truth[tune, j], probs[tune, j]
            t, f1 = brute_force_threshold(y, p)
            row = got["per_label"][name]
            assert row["tuned_threshold"] == (None if t is None else pytest.approx(t, abs=1e-15)), (seed, name)
            if t is not None:
                f1s = [2 * (y & (p > c)).sum() / ((p > c).sum() + y.sum()) for c in np.unique(p)[::-1]]
                ties += sum(f == f1 for f in f1s) > 1
    assert ties > 0


def test_one_row_and_tiny_inputs():
    rng = np.random.default_rng(7)
    for n in (1, 2, 3):
        truth, probs = random_case(rng, n, labels=3)
        got = multilabel_metrics(make_con(truth, probs), LABELS[:3], [0.5] * 3)
        check_against_sklearn(got, truth, probs, [0.5] * 3, [f"r{i}" for i in range(n)])


def test_every_cell_positive_leaves_the_ranking_metrics_null():
    truth = np.ones((20, 3), dtype=bool)
    probs = np.round(np.random.default_rng(3).random((20, 3)), 2)
    got = multilabel_metrics(make_con(truth, probs), LABELS[:3], [0.5] * 3)
    assert got["roc_auc"] == {"macro": None, "micro": None, "per_label": dict.fromkeys(LABELS[:3])}
    assert got["average_precision"]["macro"] is None
    check_against_sklearn(got, truth, probs, [0.5] * 3, [f"r{i}" for i in range(20)])


def test_no_row_with_ground_truth_gives_nulls_not_nans():
    truth, probs = random_case(np.random.default_rng(1), 10)
    got = multilabel_metrics(make_con(truth, probs, no_truth=set(range(10))), LABELS, [0.5] * 5)
    assert got["evaluated"] == 0
    assert all(got[k] is None for k in ("subset_accuracy", "micro_f1", "macro_f1", "log_loss", "lrap"))
    assert got["ece"]["macro"] is None and got["label_cardinality"]["truth"] is None
    assert all(row["f1"] is None and row["support"] == 0 for row in got["per_label"].values())


def test_lists_of_the_wrong_length_are_refused():
    truth, probs = random_case(np.random.default_rng(2), 5)
    with pytest.raises(ValueError, match="one probability and one truth per label"):
        multilabel_metrics(make_con(truth, probs), LABELS + ["extra"], [0.5] * 6)


def test_report_data_is_there_for_every_label():
    rng = np.random.default_rng(11)
    truth, probs = random_case(rng, 200, decimals=3)
    got = multilabel_metrics(make_con(truth, probs), LABELS, [0.5] * 5)
    defined = [name for name in LABELS if got["roc_auc"]["per_label"][name] is not None]
    assert set(got["curves"]["roc"]) == set(defined)
    assert sum(b["rows"] for b in got["label_calibration"]["docs"]) == 200
    errors = got["confident_wrong_labels"]
    assert errors and all((e["probability"] > 0.5) != e["truth"] for e in errors)
    distance = [e["probability"] if not e["truth"] else 1 - e["probability"] for e in errors]
    assert distance == sorted(distance, reverse=True)


RUN_INFO = {"run_id": "ml-run", "input_uri": "data/in.parquet", "model_uri": "models/tagger", "mode": "replica", "num_processes": 1}


def report_metrics(labels, truth, probs, slices: dict[str, list] | None = None) -> dict:
    """metrics.json of a multi-label run as the evaluation step writes it: the counts, then this
    module's keys; with `slices` ({column: a value per row}) the slice breakdown too."""
    n = len(probs)
    base = {"head": "multi_label", "ground_truth_source": "label_column", "rows": n, "scored": n, "missing_predictions": 0}
    base |= {"unmatched_predictions": 0, "scoring_only": False, "unknown_labels": {}, "labels": labels}
    con = make_con(truth, probs)
    metrics = base | multilabel_metrics(con, labels, [0.5] * len(labels))
    return metrics | (slice_metrics(con, "multi_label", slices) if slices else {})


def slice_metrics(con, head: str, slices: dict[str, list]) -> dict:
    """`slices` and `slices_truncated` of a connection holding the head's evaluated rows, a slice column per key."""
    from scorekeeper.evaluation import multi_label, regression

    n = len(next(iter(slices.values())))
    columns = {"row_index": pa.array(range(n), pa.int64())} | {
        f"slice_{i}": pa.array(v, pa.string()) for i, v in enumerate(slices.values())
    }
    con.register("staged", pa.table(columns))
    breakdown = {"multi_label": multi_label.slice_breakdown, "regression": regression.slice_breakdown}[head]
    found, truncated = breakdown(con, list(slices))
    return {"slices": found, "slices_truncated": truncated}


def test_report_shows_the_multilabel_sections_with_every_value_escaped():
    from scorekeeper.report.report import plot_files, render_html, render_markdown
    from tests.report_fixture import check_marked_numbers, document

    evil = '<img src=x onerror="alert(1)">|pipe'
    labels = [evil, *LABELS[1:]]
    truth, probs = random_case(np.random.default_rng(4), 300, decimals=2, always=False)
    metrics = report_metrics(labels, truth, probs)
    page = render_html(document(metrics), RUN_INFO)
    for section in ("per-label", "curves", "label-calibration", "wrong-labels", "run"):
        assert f'<section id="{section}">' in page
    assert '<section id="per-class">' not in page and '<section id="regression">' not in page
    assert "<img" not in page and "&lt;img src=x" in page
    checked = check_marked_numbers(page, metrics)
    assert checked >= len(labels) * 12 + 9  # every per-label cell and the headline
    assert set(plot_files(document(metrics))) == {"roc.svg", "pr.svg", "label_calibration.svg"}
    markdown = render_markdown(document(metrics), RUN_INFO)
    assert "## Per label" in markdown and "\\|pipe" in markdown and "| subset_accuracy |" in markdown
    assert "## Per class" not in markdown

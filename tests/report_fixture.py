"""A metrics.json with every field the report can show, computed from synthetic predictions.

The report's renderers are developed and tested against it (and the README's screenshot is taken
from it): the numbers are consistent with each other because they come from one set of rows, but
they are computed here with plain numpy, not by the evaluation step, which has its own tests.
"""

from __future__ import annotations

import math

import numpy as np

from scorekeeper.metrics.document import MetricsDocument

Z95 = 1.959963984540054
SENTIMENT = ["negative", "neutral", "positive", "mixed", "off-topic"]
SCRIPT_TEXT = 'I <b>loved</b> it <script>alert("x")</script> & "quotes"'


def wilson(k: int, n: int) -> list[float] | None:
    if n == 0:
        return None
    p = k / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _rows(n: int, labels: list[str], seed: int, skill: float, model_seed: int = 0):
    rng = np.random.default_rng(seed)
    k = len(labels)
    prior = np.linspace(2.0, 1.0, k)
    truth = rng.choice(k, size=n, p=prior / prior.sum())
    source = rng.choice(["web", "app", "email", None], size=n, p=[0.5, 0.3, 0.15, 0.05])
    hardness = np.where(source == "email", 0.45, np.where(source == "app", 0.85, 1.0))
    length = rng.choice(["short", "medium", "long"], size=n, p=[0.3, 0.5, 0.2])
    noise = np.random.default_rng([seed, model_seed])  # the model's own errors
    logits = noise.normal(0.0, 1.0, size=(n, k))
    logits[np.arange(n), truth] += skill * hardness + noise.normal(0, 0.8, size=n)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return truth, probs, source, length


def _curve_points(xs: np.ndarray, ys: np.ndarray, limit: int = 101) -> tuple[list, list]:
    if len(xs) > limit:
        keep = np.unique(np.linspace(0, len(xs) - 1, limit).round().astype(int))
        xs, ys = xs[keep], ys[keep]
    return [round(float(x), 6) for x in xs], [round(float(y), 6) for y in ys]


def _one_vs_rest(truth: np.ndarray, probs: np.ndarray, c: int):
    positive = truth == c
    if positive.all() or not positive.any():
        return None
    order = np.argsort(-probs[:, c], kind="stable")
    scores, hits = probs[order, c], positive[order]
    last = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]  # one point per distinct score
    tp, fp = np.cumsum(hits)[last], np.cumsum(~hits)[last]
    tpr, fpr = np.r_[0, tp] / positive.sum(), np.r_[0, fp] / (~positive).sum()
    precision, recall = tp / (tp + fp), tp / positive.sum()
    auc = float(np.trapezoid(tpr, fpr))
    ap = float(np.sum(np.diff(np.r_[0, recall]) * precision))
    return auc, ap, _curve_points(fpr, tpr), _curve_points(recall[::-1], precision[::-1])


def _metrics(truth, probs, labels, source, length, texts, ids):
    n, k = probs.shape
    pred = probs.argmax(1)
    score = probs.max(1)
    correct = pred == truth
    accuracy = float(correct.mean())
    per_class, confusion = {}, {}
    for c, name in enumerate(labels):
        tp = int(((pred == c) & (truth == c)).sum())
        fp = int(((pred == c) & (truth != c)).sum())
        fn = int(((pred != c) & (truth == c)).sum())
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        per_class[name] = {
            "precision": p,
            "recall": r,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0,
            "support": int((truth == c).sum()),
        }
        row = {labels[j]: int(((truth == c) & (pred == j)).sum()) for j in range(k)}
        confusion[name] = {p_: v for p_, v in row.items() if v}
    support = np.array([per_class[x]["support"] for x in labels])
    f1s = np.array([per_class[x]["f1"] for x in labels])
    bins = np.minimum(np.floor(score * 15).astype(int), 14)
    calibration = [
        {
            "bin": b,
            "lower": b / 15,
            "upper": (b + 1) / 15,
            "rows": int((bins == b).sum()),
            "confidence": float(score[bins == b].mean()),
            "accuracy": float(correct[bins == b].mean()),
        }
        for b in range(15)
        if (bins == b).any()
    ]
    ece = sum(c["rows"] * abs(c["accuracy"] - c["confidence"]) for c in calibration) / n
    roc, ap, curves = {}, {}, {"roc": {}, "pr": {}}
    for c, name in enumerate(labels):
        result = _one_vs_rest(truth, probs, c)
        roc[name], ap[name] = (result[0], result[1]) if result else (None, None)
        if result:
            curves["roc"][name] = {"fpr": result[2][0], "tpr": result[2][1]}
            curves["pr"][name] = {"recall": result[3][0], "precision": result[3][1]}
    ranked = np.argsort(-probs, 1)
    top_k = {str(t): float((ranked[:, :t] == truth[:, None]).any(1).mean()) for t in range(2, min(5, k - 1) + 1)}
    thresholds = []
    for t in [i / 10 for i in range(10)] + [0.95, 0.99]:
        kept = score >= t
        thresholds.append(
            {
                "threshold": t,
                "rows": int(kept.sum()),
                "coverage": float(kept.mean()),
                "accuracy": float(correct[kept].mean()) if kept.any() else None,
                "macro_precision": None,
                "macro_recall": None,
                "macro_f1": None,
            }
        )
    edges = [round(i / 20, 2) for i in range(21)]
    hist_bins = np.clip(np.ceil(score * 20).astype(int) - 1, 0, 19)
    histogram = {
        "edges": edges,
        "correct": [int(((hist_bins == b) & correct).sum()) for b in range(20)],
        "wrong": [int(((hist_bins == b) & ~correct).sum()) for b in range(20)],
    }
    slices = {}
    for column, values in (("source", source), ("length", length)):
        groups = {}
        for value in dict.fromkeys(values.tolist()):
            mask = values == value
            hits = int(correct[mask].sum())
            groups["∅ (null)" if value is None else value] = {
                "rows": int(mask.sum()),
                "accuracy": hits / int(mask.sum()),
                "accuracy_ci": wilson(hits, int(mask.sum())),
            }
        slices[column] = dict(sorted(groups.items(), key=lambda kv: kv[1]["accuracy"]))
    wrong = np.nonzero(~correct)[0]
    wrong = wrong[np.argsort(-score[wrong], kind="stable")][:20]
    errors = [
        {
            "row_index": int(i),
            "id": ids[i],
            "text": texts[i][:200],
            "truth": labels[truth[i]],
            "predicted": labels[pred[i]],
            "score": float(score[i]),
        }
        for i in wrong
    ]
    known = probs[np.arange(n), truth]
    return (
        {
            "rows": n,
            "scored": n,
            "evaluated": n,
            "ground_truth_source": "label_column",
            "scoring_only": False,
            "head": "single_label",
            "accuracy": accuracy,
            "accuracy_ci": wilson(int(correct.sum()), n),
            "macro_f1": float(f1s.mean()),
            "weighted_f1": float((f1s * support).sum() / support.sum()),
            "log_loss": float(-np.log(np.clip(known, 2.2e-16, 1)).mean()),
            "log_loss_rows": n,
            "ece": float(ece),
            "ece_bins": 15,
            "calibration": calibration,
            "per_class": per_class,
            "confusion": confusion,
            "labels": labels,
            "missing_predictions": 0,
            "unmatched_predictions": 0,
            "unknown_labels": {},
            "null_text_rows": 0,
            "slices": slices,
            "roc_auc": {"macro": float(np.mean([v for v in roc.values() if v is not None])), "per_class": roc},
            "average_precision": {"macro": float(np.mean([v for v in ap.values() if v is not None])), "per_class": ap},
            "top_k_accuracy": top_k,
            "thresholds": thresholds,
            "curves": curves,
            "score_histogram": histogram,
            "confident_errors": errors,
        },
        pred,
        score,
        correct,
    )


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = "the battery lasts long screen cracked after week delivery late great value support never answered works as described".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(4, 60)))) for _ in range(n)]
    return texts


def full_metrics(n: int = 1200, labels: list[str] | None = None, seed: int = 0, failing_gate: bool = True) -> tuple[dict, dict]:
    """(metrics, run_info) with every section of the report present, including a comparison with
    an earlier run, gates and a history; one confident error's text holds a <script> tag."""
    labels = list(labels or SENTIMENT)
    truth, probs, source, length = _rows(n, labels, seed, skill=2.6)
    texts = _texts(n, seed)
    ids = [f"rev-{i:05d}" for i in range(n)]
    metrics, pred, score, correct = _metrics(truth, probs, labels, source, length, texts, ids)
    if metrics["confident_errors"]:
        i = metrics["confident_errors"][0]["row_index"]
        texts[i] = SCRIPT_TEXT
        metrics["confident_errors"][0]["text"] = SCRIPT_TEXT

    # The same rows scored by an earlier, weaker model: the comparison's flips and deltas.
    _, old_probs, _, _ = _rows(n, labels, seed, skill=2.3, model_seed=1)
    old, old_pred, old_score, old_correct = _metrics(truth, old_probs, labels, source, length, texts, ids)
    r2w = np.nonzero(old_correct & ~correct)[0]
    w2r = np.nonzero(~old_correct & correct)[0]
    other = int((~old_correct & ~correct & (old_pred != pred)).sum())
    b, c = len(r2w), len(w2r)
    tail = sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c)

    def sample(rows):
        return [
            {
                "row_index": int(i),
                "id": ids[i],
                "truth": labels[truth[i]],
                "before": labels[old_pred[i]],
                "after": labels[pred[i]],
                "score_before": float(old_score[i]),
                "score_after": float(score[i]),
            }
            for i in rows[:20]
        ]

    names = ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece")
    deltas = {m: metrics[m] - old[m] for m in names}
    deltas["roc_auc_macro"] = metrics["roc_auc"]["macro"] - old["roc_auc"]["macro"]
    deltas["average_precision_macro"] = metrics["average_precision"]["macro"] - old["average_precision"]["macro"]
    metrics["comparison"] = {
        "run": "nightly-2026-11-29",
        "rows_compared": n,
        "matched_on": "row_index",
        "flipped": {"right_to_wrong": b, "wrong_to_right": c, "other": other},
        "mcnemar_p": min(1.0, 2 * tail),
        "deltas": deltas,
        "accuracy_delta_ci": [deltas["accuracy"] - 0.02, deltas["accuracy"] + 0.02],
        "samples": {"right_to_wrong": sample(r2w), "wrong_to_right": sample(w2r)},
        "per_class_deltas": {
            name: {m: metrics["per_class"][name][m] - old["per_class"][name][m] for m in ("precision", "recall", "f1")} for name in labels
        },
        "slice_deltas": {
            column: {v: {"accuracy": s["accuracy"] - old["slices"][column][v]["accuracy"], "rows": s["rows"]} for v, s in values.items()}
            for column, values in metrics["slices"].items()
        },
    }
    metrics["gates"] = [
        {"gate": "accuracy >= 0.6", "metric": "accuracy", "value": metrics["accuracy"], "limit": 0.6, "passed": metrics["accuracy"] >= 0.6},
        {
            "gate": "macro_f1_drop <= 0.01",
            "metric": "macro_f1_drop",
            "value": -deltas["macro_f1"],
            "limit": 0.01,
            "passed": -deltas["macro_f1"] <= 0.01,
        },
        {"gate": "ece <= 0.02", "metric": "ece", "value": metrics["ece"], "limit": 0.02, "passed": metrics["ece"] <= 0.02}
        if failing_gate
        else {"gate": "ece <= 0.5", "metric": "ece", "value": metrics["ece"], "limit": 0.5, "passed": True},
    ]
    rng = np.random.default_rng(seed + 7)
    history = []
    for day in range(1, 8):
        acc = float(np.clip(old["accuracy"] + rng.normal(0, 0.01), 0, 1))
        history.append(
            {
                "run_id": f"nightly-2026-11-{21 + day:02d}",
                "finished_at": f"2026-11-{21 + day:02d}T02:10:00+00:00",
                "rows": n,
                "evaluated": n,
                "accuracy": acc,
                "macro_f1": acc - 0.03,
                "model_fingerprint": "9c1e4b7d" if day < 7 else "2f0a6c13",
                "input_fingerprint": "b7e2",
            }
        )
    history.append(
        {
            "run_id": "nightly-2026-11-30",
            "finished_at": "2026-11-30T02:10:00+00:00",
            "rows": n,
            "evaluated": n,
            "accuracy": metrics["accuracy"],
            "macro_f1": metrics["macro_f1"],
            "model_fingerprint": "5d44e0aa",
            "input_fingerprint": "b7e2",
        }
    )
    metrics["history"] = history
    throughput = {
        "rows_scored": n,
        "tokens": 41 * n,
        "padded_tokens": 42 * n,
        "truncated": 3,
        "seconds": 12.5,
        "rows_per_s": round(n / 12.5, 2),
        "tokens_per_s": round(41 * n / 12.5, 1),
        "processes": 2,
    }
    metrics["scoring"] = throughput
    run_info = {
        "run_id": "nightly-2026-11-30",
        "input_uri": "s3://reviews/eval/2026-11-30/*.parquet",
        "model_uri": "s3://models/minilm-reviews",
        "adapter_uri": "s3://models/minilm-reviews-lora",
        "mode": "replica",
        "num_processes": 2,
        "dtype": "auto",
        "slice_columns": ["source", "length"],
        "model_fingerprint": "5d44e0aa91f2",
        "adapter_fingerprint": "07c9d2e1aa34",
        "input_fingerprint": "b7e2c0ffee11",
        "throughput": throughput,
    }
    return metrics, run_info


def marked_numbers(page: str) -> list[tuple[list, str, str]]:
    """Every number the page marks: (its JSON path in metrics.json, data-value, the text shown)."""
    import json
    from html.parser import HTMLParser

    found: list[tuple[list, str, str]] = []

    class Parser(HTMLParser):
        def __init__(self):
            super().__init__()
            self.open: list | None = None

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if "data-key" in attrs:
                self.open = [json.loads(attrs["data-key"]), attrs.get("data-value", ""), ""]

        def handle_data(self, data):
            if self.open is not None:
                self.open[2] += data

        def handle_endtag(self, tag):
            if self.open is not None:
                found.append(tuple(self.open))
                self.open = None

    Parser().feed(page)
    return found


def check_marked_numbers(page: str, metrics: dict) -> int:
    """Assert that each marked number equals metrics.json at its path, and that the text shown is
    that value rounded as displayed; returns how many were checked."""
    marks = marked_numbers(page)
    for path, raw, shown in marks:
        value = metrics
        for part in path:
            value = value[part]
        if value is None:
            assert raw == "" and shown == "n/a", (path, raw, shown)
            continue
        assert float(raw) == value, (path, raw, value)
        shown = shown.replace(",", "")  # a count in a sentence has thousands separators
        digits = len(shown.split(".")[1]) if "." in shown else 0
        assert abs(float(shown) - value) <= 0.5 * 10**-digits + 1e-12, (path, shown, value)
    return len(marks)


def document(metrics: dict) -> MetricsDocument:
    """A metrics.json's content as the typed document the report renders."""
    return MetricsDocument.model_validate(metrics)

"""An independent implementation of SPEC section 14's evaluation side, written from the SPEC, not from
scorekeeper/evaluation/representation.py or words.py: the representation signal of two runs'
embeddings.parquet files (split, standardisation, fit, auc, p, Hanley-McNeil interval, examples) and
the moved tokens of two runs' token_counts.parquet files, in plain Python, numpy, scikit-learn and
scipy. The tests compare the drift step with it."""

from __future__ import annotations

import hashlib
import math
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
from scipy.stats import mannwhitneyu
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score


def w(row_index: int) -> float:
    """W_i: the first 8 bytes of sha256(f"split:{row_index}"), big-endian, over 2^64."""
    return int.from_bytes(hashlib.sha256(f"split:{row_index}".encode()).digest()[:8], "big") / 2**64


def read_embeddings(path) -> list[tuple[int, object, list[float]]]:
    """(row_index, id, embedding) of a run's embeddings.parquet, in row_index order."""
    rows = pq.read_table(path).to_pylist()
    return sorted(((r["row_index"], r["id"], r["embedding"]) for r in rows), key=lambda t: t[0])


def representation(reference_path, current_path, texts: dict[int, str | None]) -> dict:
    """The signal before Holm: auc, auc_ci, p, rows, examples (texts: the current run's text by row_index)."""
    ref, cur = read_embeddings(reference_path), read_embeddings(current_path)
    parts = {
        (side, half): [r for r in rows if (w(r[0]) < 0.5) == (half == "fit")]
        for side, rows in (("reference", ref), ("current", cur))
        for half in ("fit", "test")
    }
    fit = np.array([r[2] for r in parts["reference", "fit"]] + [r[2] for r in parts["current", "fit"]], dtype=np.float64)
    mean = fit.mean(axis=0)
    sd = np.sqrt(((fit - mean) ** 2).mean(axis=0))
    sd = np.where(sd == 0, 1.0, sd)
    y = [0] * len(parts["reference", "fit"]) + [1] * len(parts["current", "fit"])
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit((fit - mean) / sd, y)

    def scores(rows):
        return model.decision_function((np.array([r[2] for r in rows], dtype=np.float64) - mean) / sd)

    s0, s1 = scores(parts["reference", "test"]), scores(parts["current", "test"])
    auc = roc_auc_score([0] * len(s0) + [1] * len(s1), np.concatenate([s0, s1]))
    p = mannwhitneyu(s1, s0, alternative="greater").pvalue
    n1, n0 = len(s1), len(s0)
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    se = math.sqrt((auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n0 - 1) * (q2 - auc * auc)) / (n1 * n0))
    ranked = sorted(zip(parts["current", "test"], s1, strict=True), key=lambda t: (-t[1], t[0][0]))[:20]
    examples = [
        {"row_index": r[0], "id": r[1], "text": None if texts.get(r[0]) is None else texts[r[0]][:300], "score": float(s)}
        for r, s in ranked
    ]
    return {
        "auc": float(auc),
        "auc_ci": [max(0.0, auc - 1.959963984540054 * se), min(1.0, auc + 1.959963984540054 * se)],
        "p": float(p),
        "rows": {side: {half: len(parts[side, half]) for half in ("fit", "test")} for side in ("reference", "current")},
        "examples": examples,
    }


def moved_tokens(reference_path, current_path) -> list[dict]:
    """drift.moved_tokens of two token_counts.parquet files (tokenizers assumed the same)."""
    counts, names = [Counter(), Counter()], {}
    for k, path in enumerate((reference_path, current_path)):
        for r in pq.read_table(path).to_pylist():
            counts[k][r["token_id"]] += r["count"]
            names.setdefault(r["token_id"], r["token"])
    a, b = counts
    tokens = [t for t in set(a) | set(b) if a[t] + b[t] > 0]
    m, n, big_b = sum(a.values()), sum(b.values()), len(tokens)
    out = []
    for t in tokens:
        if a[t] < 20 and b[t] < 20:
            continue
        r, c = (a[t] + 0.5) / (m + 0.5 * big_b), (b[t] + 0.5) / (n + 0.5 * big_b)
        out.append({"token_id": t, "token": names[t], "reference_count": a[t], "current_count": b[t],
                    "reference_share": r, "current_share": c, "log_ratio": math.log(c / r)})  # fmt: skip
    return sorted(out, key=lambda x: (-abs(x["log_ratio"]), x["token_id"]))[:20]

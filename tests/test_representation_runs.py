"""SPEC section 14 end to end through the flow: a reference run and a run in which a third of the
texts are on words the reference never holds, both scored by the real worker (embeddings.parquet,
report/token_counts.parquet); the drift step's representation signal (auc, p, interval, examples,
Holm), its moved tokens, and the report, recomputed from the runs' own files by the independent
implementation (tests/representation_reference.py). A run without embeddings skips it, naming why:
tests/test_drift_runs.py (its 40-row run)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tests import drift_reference as dref
from tests import representation_reference as ref
from tests.helpers import WORDS, make_rows, run_flow, write_rows

pytestmark = pytest.mark.integration


def new_words(model: str) -> list[str]:
    """Eight whole words of the model's vocabulary that make_rows never writes: the new topic."""
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(model).get_vocab()
    return sorted(w for w in vocab if w.isalpha() and len(w) >= 4 and w not in WORDS)[:8]


def shifted_rows(n: int, seed: int, share: float, words: list[str]) -> list[dict]:
    rows = make_rows(n, seed=seed)
    rng = random.Random(seed)
    for r in rows[: int(share * n)]:
        r["text"] = " ".join(rng.choice(words) for _ in range(len(r["text"].split())))
    return rows


def test_a_new_topic_is_measured_from_the_runs_embeddings_and_its_words_named(tmp_path, models):
    words = new_words(models["bert"])
    assert len(words) == 8
    reference_rows, current_rows = make_rows(260, seed=1), shifted_rows(260, 2, 0.35, words)
    write_rows(tmp_path / "reference.csv", reference_rows)
    write_rows(tmp_path / "current.csv", current_rows)
    common = {"model_uri": models["bert"], "output_uri": str(tmp_path / "runs"), "id_column": "review_id"}
    run_flow(input_uri=str(tmp_path / "reference.csv"), run_name="reference", **common)
    current = run_flow(input_uri=str(tmp_path / "current.csv"), run_name="current", drift_reference="reference", **common)
    drift = current.metrics["drift"]
    runs = tmp_path / "runs"
    texts = {i: r["text"] for i, r in enumerate(current_rows)}
    want = ref.representation(runs / "reference" / "embeddings.parquet", runs / "current" / "embeddings.parquet", texts)
    s = drift["signals"]["representation"]
    assert math.isclose(s["auc"], want["auc"], abs_tol=1e-6) and np.allclose(s["auc_ci"], want["auc_ci"], atol=1e-6)
    assert math.isclose(s["p"], want["p"], rel_tol=1e-3, abs_tol=1e-300) and s["rows"] == want["rows"]
    assert [e["row_index"] for e in s["examples"]] == [e["row_index"] for e in want["examples"]]
    assert [(e["id"], e["text"]) for e in s["examples"]] == [
        (current_rows[e["row_index"]]["review_id"], e["text"]) for e in want["examples"]
    ]
    names = list(drift["signals"])
    adjusted = dref.holm([drift["signals"][name]["p"] for name in names])
    assert all(math.isclose(drift["signals"][n]["p_holm"], p, rel_tol=1e-9) for n, p in zip(names, adjusted, strict=True))
    judged = min(want["rows"]["reference"]["test"], want["rows"]["current"]["test"]) >= 100
    assert s["drifted"] == ((s["auc"] >= 0.55 and s["p_holm"] < 0.05) if judged else None)
    # the words: recomputed from both runs' token counts; the new topic's words moved most
    moved = ref.moved_tokens(runs / "reference" / "report" / "token_counts.parquet", runs / "current" / "report" / "token_counts.parquet")
    assert [t["token_id"] for t in drift["moved_tokens"]] == [t["token_id"] for t in moved]
    for got, w in zip(drift["moved_tokens"], moved, strict=True):
        assert all(math.isclose(got[k], w[k], rel_tol=1e-12) for k in ("reference_share", "current_share", "log_ratio"))
    assert {t["token"] for t in drift["moved_tokens"][:5]} <= set(words) and drift["moved_tokens"][0]["reference_count"] == 0
    report = (runs / "current" / "report" / "report.md").read_text()
    assert "The texts most unlike the reference" in report and "What the texts say more, and less" in report

"""SPEC section 14's representation signal and moved tokens, measured (docs/drift.md, bench/README.md):
does it stay quiet without drift, does it find a new topic that section 12's signals miss, are its
examples the new texts, and what do the fit and the flow process cost.

    .venv/bin/python bench/representation.py replays [REPLAYS]   # no drift: 250, 1,000, 5,000, 20,000 rows per run
    .venv/bin/python bench/representation.py shifts [REPLAYS]    # a new topic in 10/20/40% of the rows at 1,000 and 5,000
    .venv/bin/python bench/representation.py fit                 # the fit at 20k + 20k rows of width 768
    .venv/bin/python bench/representation.py memory [ROWS]       # the evaluate step's peak RSS at 3M rows, with and without the files
    .venv/bin/python bench/representation.py                     # all three (40 replays each by default)

Models: the demo's (./demo: all-MiniLM-L6-v2 with its LoRA adapter, merged; built by ./setup.sh)
and a decoder (tests/models.py's tiny qwen2, random weights, its BPE tokenizer trained on the same
texts). Data: scorekeeper/demo_data.py's held-out reviews (a pool of POOL rows); the shift's texts
are reviews on a subject the demo never has (the product's environmental footprint: NEW_CLAUSES,
the demo's openers and closers), each replacing a row of the same predicted label, the nearest
token count and the nearest score, so the predicted label mix and the lengths stay as they were.

The embeddings are SPEC 14's definition computed here with transformers (each row alone, unpadded:
rows are batched by equal token length, so no padding exists): the final hidden state at position 0
(encoder), at the last position (decoder, no pad token); logits from the same pass give the
predicted label and score section 12's signals read. Each replay runs the drift step itself
(scorekeeper/evaluation/drift.py with representation.measure and words.moved_of) on those tables.
Seeds are fixed.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POOL = 12_000  # held-out reviews embedded once; each replay draws two disjoint samples of them (with replacement past POOL / 2 rows)
NEW_POOL = 6_000  # reviews on the new subject
SIZES = (250, 1_000, 5_000, 20_000)
SHARES = (0.1, 0.2, 0.4)
SHIFT_SIZES = (1_000, 5_000)
NEW_CLAUSES = {
    "positive": (
        "the packaging is fully recyclable",
        "it is made from recycled ocean plastic",
        "the factory runs on solar power",
        "the brand plants a tree for every order",
        "the {item} came in compostable cardboard",
        "they offset the carbon of the shipment",
        "no plastic film anywhere in the box",
        "the company publishes its emissions every year",
    ),
    "negative": (
        "the box was stuffed with polystyrene foam",
        "the {item} is wrapped in {n} layers of plastic",
        "none of the packaging can be recycled",
        "it reeks of solvent and chemicals",
        "the brand burns its unsold stock",
        "the label hides a huge carbon footprint",
        "the batteries cannot be replaced or recycled",
        "it is greenwashing from start to finish",
    ),
}


def new_topic_rows(n: int, seed: int) -> list[str]:
    """Reviews on the new subject, built as the demo's are (an opener, a clause, a closer)."""
    from scorekeeper import demo_data as dd

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        category = rng.choice(tuple(dd.CATEGORIES))
        item = rng.choice(dd.CATEGORIES[category])
        sentiment = rng.choice(("positive", "negative"))
        clause = rng.choice(NEW_CLAUSES[sentiment]).format(item=item, n=rng.randint(2, 6))
        parts = [rng.choice(dd._OPENERS).format(item=item), dd._sentence(clause)]
        if rng.random() < 0.6:
            parts.append(rng.choice(dd._CLOSERS[sentiment]))
        out.append(" ".join(parts))
    return out


def decoder_model(texts: list[str]) -> Path:
    """tests/models.py's tiny qwen2 classifier over the demo's five topics, built once."""
    from scorekeeper.demo_data import TOPICS
    from tests.models import build_tiny_classifier

    out = ROOT / "build" / "bench-representation" / "qwen2"
    if not (out / "config.json").exists():
        build_tiny_classifier(out, "qwen2", labels=list(TOPICS), texts=texts[:4000], vocab_size=2000, seed=3)
    return out


def load(model: str):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if model == "demo":
        from peft import PeftModel

        net = AutoModelForSequenceClassification.from_pretrained(str(ROOT / "demo" / "model"))
        net = PeftModel.from_pretrained(net, str(ROOT / "demo" / "adapter")).merge_and_unload()
        tokenizer = AutoTokenizer.from_pretrained(str(ROOT / "demo" / "model"))
    else:
        net = AutoModelForSequenceClassification.from_pretrained(model)
        tokenizer = AutoTokenizer.from_pretrained(model)
    if net.config.pad_token_id is None:  # no pad token: the head reads the last position (-1 is no token id)
        net.config.pad_token_id = -1
    net.eval()
    torch.set_grad_enabled(False)
    return net, tokenizer


def embed(model: str, texts: list[str], decoder: bool) -> dict:
    """SPEC 14's embedding, the predicted label and score, tokens, unknown tokens and the content
    tokens of every text, each scored alone (batches of equal length hold no padding)."""
    import torch

    net, tokenizer = load(model)
    encoded = tokenizer(texts, return_special_tokens_mask=True)
    ids, special = encoded["input_ids"], encoded["special_tokens_mask"]
    width = net.config.hidden_size
    out = {
        "embedding": np.zeros((len(texts), width), np.float32),
        "predicted": np.zeros(len(texts), np.int64),
        "score": np.zeros(len(texts)),
        "tokens": np.array([len(x) for x in ids], np.int32),
        "unknown": np.array([sum(t == tokenizer.unk_token_id for t in x) for x in ids], np.int32),
        "content": [[t for t, s in zip(x, m, strict=True) if not s] for x, m in zip(ids, special, strict=True)],
    }
    by_length: dict[int, list[int]] = {}
    for i, x in enumerate(ids):
        by_length.setdefault(len(x), []).append(i)
    for rows in by_length.values():
        for start in range(0, len(rows), 256):
            batch = rows[start : start + 256]
            inputs = torch.tensor([ids[i] for i in batch])
            result = net(input_ids=inputs, attention_mask=torch.ones_like(inputs), output_hidden_states=True)
            hidden = result.hidden_states[-1][:, -1 if decoder else 0]
            probs = torch.softmax(result.logits.double(), -1)
            out["embedding"][batch] = hidden.float().numpy()
            out["predicted"][batch] = probs.argmax(-1).numpy()
            out["score"][batch] = probs.max(-1).values.numpy()
    out["vocab"] = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return out


def pools(name: str) -> tuple[dict, dict, list[str]]:
    """The held-out pool and the new-subject pool, embedded by model `name` (demo or decoder), cached."""
    from scorekeeper.demo_data import generate

    reviews = [r["text"] for r in generate(POOL, seed=101, split="test")]
    new = new_topic_rows(NEW_POOL, seed=202)
    cache = ROOT / "build" / "bench-representation" / f"{name}-{POOL}-{NEW_POOL}.npz"
    model = "demo" if name == "demo" else str(decoder_model(reviews + new))
    if cache.exists():
        data = np.load(cache, allow_pickle=True)
        return data["reviews"].item(), data["new"].item(), reviews + new
    start = time.perf_counter()
    pool, new_pool = embed(model, reviews, name != "demo"), embed(model, new, name != "demo")
    print(f"{name}: embedded {len(reviews) + len(new):,} texts in {time.perf_counter() - start:.0f} s", flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, reviews=np.array(pool, dtype=object), new=np.array(new_pool, dtype=object))
    return pool, new_pool, reviews + new


def predictions(pool: dict, new: dict, rows: np.ndarray, new_rows: dict[int, int], labels: list[str]) -> pa.Table:
    """A run's predictions as the drift step reads them: pool rows, some replaced by new-subject rows."""

    def take(key):
        values = pool[key][rows].copy()
        for position, k in new_rows.items():
            values[position] = new[key][k]
        return values

    return pa.table({
        "row_index": pa.array(np.arange(len(rows)), pa.int64()),
        "predicted_label": pa.array(np.array(labels)[take("predicted")]),
        "score": pa.array(take("score")),
        "tokens": pa.array(take("tokens")),
        "unknown_tokens": pa.array(take("unknown")),
    })  # fmt: skip


def run_of(pool: dict, new: dict, rows: np.ndarray, new_rows: dict[int, int]):
    """(embeddings, content-token counts) of a run."""
    from scorekeeper.evaluation.representation import Embeddings

    x = pool["embedding"][rows].copy()
    counts: dict[int, int] = {}
    for position, pool_row in enumerate(rows):
        source = new["content"][new_rows[position]] if position in new_rows else pool["content"][pool_row]
        for t in source:
            counts[t] = counts.get(t, 0) + 1
    for position, k in new_rows.items():
        x[position] = new["embedding"][k]
    ids = pa.array([int(r) if p not in new_rows else -1 - new_rows[p] for p, r in enumerate(rows)], pa.int64())
    return Embeddings(np.arange(len(rows), dtype=np.int64), ids, x), counts


def replay(pool: dict, new: dict, labels: list[str], vocab: list[str], reference: np.ndarray, current: np.ndarray, new_rows: dict):
    """The drift step on one pair of runs: section 12's signals and representation in one Holm family."""
    import duckdb

    from scorekeeper.evaluation import drift as d
    from scorekeeper.evaluation import single_label
    from scorekeeper.evaluation.representation import measure
    from scorekeeper.evaluation.words import moved_of

    ref_emb, ref_counts = run_of(pool, new, reference, {})
    cur_emb, cur_counts = run_of(pool, new, current, new_rows)
    start = time.perf_counter()
    measured = measure(ref_emb, cur_emb)
    fit_s = time.perf_counter() - start
    con = duckdb.connect()
    con.from_arrow(predictions(pool, new, reference, {}, labels)).create_view("reference_predictions")
    con.from_arrow(predictions(pool, new, current, new_rows, labels)).create_view("predictions")
    r = d.RunSide("reference", "reference_predictions", d.columns_of(con, "reference_predictions"), labels)
    c = d.RunSide("current", "predictions", d.columns_of(con, "predictions"), labels)
    drift = d.drift(con, single_label.EVALUATION, r, c, [], "reference", representation=measured)
    con.close()
    tokens = sorted(set(ref_counts) | set(cur_counts))
    moved = moved_of(
        np.array(tokens), [vocab[t] for t in tokens], [vocab[t] for t in tokens],
        np.array([ref_counts.get(t, 0) for t in tokens]), np.array([cur_counts.get(t, 0) for t in tokens]),
    )  # fmt: skip
    return drift, moved, fit_s


def matched_shift(pool: dict, new: dict, current: np.ndarray, share: float, rng: np.random.Generator) -> dict[int, int]:
    """Positions of `current` replaced by new-subject rows: each by one of the same predicted label,
    the nearest token count and, among those, the nearest score, so the run's predicted label mix,
    lengths and scores stay about as they were."""
    want = int(round(share * len(current)))
    free = {label: list(rng.permutation(np.flatnonzero(new["predicted"] == label))) for label in np.unique(new["predicted"])}
    out: dict[int, int] = {}
    for position in rng.permutation(len(current)):
        if len(out) == want:
            break
        label = pool["predicted"][current[position]]
        candidates = free.get(label) or []
        if not candidates:
            continue
        row = current[position]
        cand = np.array(candidates)
        gap = np.abs(new["tokens"][cand].astype(np.int64) - int(pool["tokens"][row]))
        near = np.flatnonzero(gap == gap.min())
        best = int(near[np.argmin(np.abs(new["score"][cand[near]] - pool["score"][row]))])
        out[int(position)] = int(candidates.pop(best))
    return out


def replays(name: str, count: int) -> dict:
    pool, new, _ = pools(name)
    labels, vocab = _labels(), _vocab(pool)
    rng = np.random.default_rng(1)
    out = {}
    for n in SIZES:
        reps = count if n < 20_000 else max(10, count // 2)
        alarms, old, aucs, fits = 0, 0, [], []
        for _ in range(reps):
            rows = rng.choice(len(pool["predicted"]), 2 * n, replace=2 * n > len(pool["predicted"]))
            drift, _, fit_s = replay(pool, new, labels, vocab, rows[:n], rows[n:], {})
            rep = drift.signals["representation"]
            alarms += bool(rep.drifted)
            old += any(s for name_, s in ((k, v.drifted) for k, v in drift.signals.items()) if name_ != "representation")
            aucs.append(rep.auc)
            fits.append(fit_s)
        out[n] = {
            "replays": reps,
            "representation_alarms": alarms,
            "old_alarms": old,
            "max_auc": max(aucs),
            "fit_s": float(np.median(fits)),
        }
        print(
            f"{name} no drift, {n:>6,} rows per run: representation alarmed in {alarms} of {reps} replays "
            f"(section 12's signals {old}); largest auc {max(aucs):.3f}; fit median {np.median(fits):.2f} s",
            flush=True,
        )
    return out


def shifts(name: str, count: int) -> dict:
    pool, new, _ = pools(name)
    labels, vocab = _labels(), _vocab(pool)
    rng = np.random.default_rng(2)
    out = {}
    for n in SHIFT_SIZES:
        for share in SHARES:
            alarms, old, shown, new_words, replaced, aucs = 0, 0, [], [], [], []
            for _ in range(count):
                rows = rng.choice(len(pool["predicted"]), 2 * n, replace=False)
                new_rows = matched_shift(pool, new, rows[n:], share, rng)
                drift, moved, _ = replay(pool, new, labels, vocab, rows[:n], rows[n:], new_rows)
                rep = drift.signals["representation"]
                alarms += bool(rep.drifted)
                old += any(v.drifted for k, v in drift.signals.items() if k != "representation")
                shown.append(sum(e.row_index in new_rows for e in rep.examples))
                new_words.append(sum(t.reference_count == 0 for t in moved))
                replaced.append(len(new_rows) / n)
                aucs.append(rep.auc)
            key = f"{n}@{share}"
            out[key] = {"replays": count, "representation_alarms": alarms, "old_alarms": old, "examples_new_min": min(shown),
                        "examples_new_mean": float(np.mean(shown)), "moved_new_mean": float(np.mean(new_words)),
                        "replaced_share": float(np.mean(replaced)), "auc_mean": float(np.mean(aucs))}  # fmt: skip
            print(
                f"{name} new topic in {100 * share:.0f}% ({100 * np.mean(replaced):.1f}% matched) of {n:,} rows: representation "
                f"alarmed in {alarms} of {count} (section 12's signals {old}); mean auc {np.mean(aucs):.3f}; new-topic texts among "
                f"the 20 examples: min {min(shown)}, mean {np.mean(shown):.1f}; moved tokens never in the reference: mean "
                f"{np.mean(new_words):.1f} of 20",
                flush=True,
            )
            if share == 0.2 and n == SHIFT_SIZES[0]:
                print("   moved tokens (last replay):", ", ".join(f"{t.token} {t.log_ratio:+.1f}" for t in moved[:12]), flush=True)
    return out


def fit(width: int = 768, rows: int = 20_000) -> dict:
    """representation.measure at rows + rows of `width` (random values; a tenth of the current rows
    moved), twice; the process's peak memory."""
    import resource

    from scorekeeper.evaluation.representation import Embeddings, measure

    rng = np.random.default_rng(4)
    runs = []
    for shift in (0.0, 0.5):
        x = rng.standard_normal((rows, width)).astype(np.float32)
        x[: rows // 10, :8] += shift
        runs.append(Embeddings(np.arange(rows, dtype=np.int64), pa.array(np.arange(rows)), x))
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        measured = measure(*runs)
        seconds.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fit at {rows:,} + {rows:,} rows of width {width}: {min(seconds):.1f} s (runs {', '.join(f'{s:.1f}' for s in seconds)}); "
          f"auc {measured.auc:.3f}; process peak {peak:.0f} MB", flush=True)  # fmt: skip
    return {"seconds": min(seconds), "peak_mb": peak}


def memory(n: int = 3_000_000, width: int = 768, sample: int = 20_000) -> dict:
    """The evaluate step's peak memory at n rows with drift_reference, each run with embeddings.parquet
    (about `sample` rows of `width`, as embedding_rows samples them) and token counts: bench/drift.py's
    generated run folders, evaluated in a fresh process (its peak RSS), with and without the files."""
    import subprocess
    import tempfile

    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT / "bench"))
    import drift as bench_drift

    from scorekeeper.representation import embedding_sample, embeddings_table

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(6)
        runs = {name: bench_drift.labelled_run(root, name, rng, n) for name in ("reference", "current")}
        bench_drift.evaluate(runs["reference"])
        code = (
            "import resource, sys, time; sys.path.insert(0, 'bench'); import drift; from pathlib import Path; t = time.perf_counter(); "
            f"drift.evaluate(Path({str(runs['current'])!r}), Path({str(runs['reference'])!r})); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
        )
        for files in (False, True):
            if files:
                rows = np.flatnonzero(embedding_sample(np.arange(n), sample, n))
                for k, run in enumerate(runs.values()):
                    x = rng.standard_normal((len(rows), width)).astype(np.float32)
                    pq.write_table(embeddings_table(rows, pa.array(rows), x), run / "embeddings.parquet")
                    counts = rng.poisson(50 + 10 * k, 30_000)
                    (run / "work").mkdir(exist_ok=True)
                    pq.write_table(
                        pa.table({"token_id": pa.array(np.arange(30_000)), "token": pa.array([f"t{i}" for i in range(30_000)]),
                                  "count": pa.array(counts)}), run / ("report/token_counts.parquet" if k == 0 else "work/token_counts.parquet"),
                    )  # fmt: skip
            done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
            seconds, peak = (float(v) for v in done.stdout.split()[-2:])
            out["with" if files else "without"] = {"seconds": seconds, "peak_mb": peak}
            print(f"evaluate at {n:,} rows with drift_reference, {'with' if files else 'without'} SPEC 14's files: "
                  f"{seconds:.1f} s, peak RSS {peak:.0f} MB", flush=True)  # fmt: skip
    return out


def _labels() -> list[str]:
    from scorekeeper.demo_data import TOPICS

    return list(TOPICS)


def _vocab(pool: dict) -> list[str]:
    return list(pool["vocab"])


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    count = int(argv[1]) if len(argv) > 1 and what != "memory" else 40
    results: dict = {}
    for name in ("demo", "decoder"):
        if what in ("replays", "all"):
            results[f"{name}_replays"] = replays(name, count)
        if what in ("shifts", "all"):
            results[f"{name}_shifts"] = shifts(name, count)
    if what in ("fit", "all"):
        results["fit"] = fit()
    if what in ("memory", "all"):
        results["memory"] = memory(int(argv[1]) if what == "memory" and len(argv) > 1 else 3_000_000)
    print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

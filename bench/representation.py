"""SPEC section 14's representation signal and moved tokens, measured (docs/drift.md, bench/README.md):
does it stay quiet without drift, does it find a new topic that section 12's signals miss, are its
examples the new texts, and what do the fit and the flow process cost.

    .venv/bin/python bench/representation.py replays [REPLAYS] [MODEL...]  # no drift: 250, 1,000, 5,000, 20,000 rows per run
    .venv/bin/python bench/representation.py shifts [REPLAYS] [MODEL...]   # a new topic in 10/20/40% of the rows at 1,000 and 5,000
    .venv/bin/python bench/representation.py matched [REPLAYS] [MODEL...]  # 40% matched from the wide pool (every label)
    .venv/bin/python bench/representation.py examples [REPLAYS] [MODEL]    # the 1,000-row 20% replays' examples audited
    .venv/bin/python bench/representation.py check [MODEL]                # an assembled replay against two real runs
    .venv/bin/python bench/representation.py train                        # build the trained decoder (decoder-trained) alone
    .venv/bin/python bench/representation.py fit                          # the fit at 20k + 20k rows of width 768
    .venv/bin/python bench/representation.py memory [ROWS]                # the evaluate step's peak RSS at 3M rows, with and without the files

Models (MODEL: demo, decoder, decoder-trained): the demo's (./demo: all-MiniLM-L6-v2 with its LoRA
adapter, unmerged, as the job scores it; built by ./setup.sh), a decoder (tests/models.py's tiny
qwen2, random weights, width 32, its BPE tokenizer trained on the held-out reviews) and a decoder
that has learned the demo's task (trained_decoder: qwen2 from a config, 2 layers, width 128, trained
on the CPU on the demo's training split). Data: scorekeeper/demo_data.py's held-out reviews (a pool
of POOL rows) and reviews on a subject the demo never has (the product's environmental footprint:
NEW_CLAUSES in demo_data's structure, NEW_POOL rows; then ASPECT_POOL rows of ASPECT_CLAUSES, the
subject seen through each of the demo's topics, which `matched` draws from too); a shifted run
replaces a share of its rows by new-subject rows of the same predicted label, the same token count
and a score within SCORE_GAP, so the predicted label mix and the lengths stay exactly as they were.

Through the job: both pools are scored once by a real `scorekeeper run` (job_pool: the flow, the
accelerate worker, the gather, embedding_rows covering every row), and every replay's runs are
assembled from that run's files (a row's embedding, predicted label, score and lengths do not
depend on the run it is in); each row's content tokens come from the worker's own function, checked
to sum to the job's token_counts.parquet. `check` scores one replay's two runs for real and compares
them with the assembled ones. Each replay runs the drift step's own code (drift.drift with
representation.measure and words.moved_of) on the assembled tables. Seeds are fixed.
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
NEW_POOL = 18_000  # reviews on the new subject (a replaced row needs one of its label, length and score)
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


# The same subject seen through each of the demo's five topics (a delivery, a build, a price, a
# seller, a use that concern the environment), so that the model files it under every label: the
# pool a matched shift of 40% of the rows draws from (`matched`); NEW_CLAUSES' texts land on two.
ASPECT_POOL = 18_000
ASPECT_CLAUSES = {
    "delivery": {
        "positive": (
            "the courier came on an electric cargo bike",
            "they shipped the {item} by rail to cut emissions",
            "the {item} arrived in a reusable crate I sent back",
            "the shipment was carbon neutral",
        ),
        "negative": (
            "the {item} was flown in by air freight",
            "each part came in its own plastic mailer",
            "the delivery van idled outside for {n}0 minutes",
            "they sent {n} half empty boxes by truck",
        ),
    },
    "quality": {
        "positive": (
            "the recycled aluminium body feels solid",
            "the organic cotton has held up for {n} months",
            "the bamboo casing is sturdy",
            "the {item} is made to be repaired, not thrown away",
        ),
        "negative": (
            "the recycled plastic cracked after {n} days",
            "the biodegradable coating peeled off",
            "the eco fabric tore within a month",
            "the {item} is glued shut so it can never be repaired",
        ),
    },
    "price": {
        "positive": (
            "the refill packs save money and plastic",
            "the green version costs no more than the old one",
            "I got a discount for returning my old {item} for recycling",
            "the solar model paid for itself in {n} months",
        ),
        "negative": (
            "they charge {n}0 dollars extra for the eco version",
            "the carbon offset fee doubled the price",
            "paying more for recyclable packaging is a rip off",
            "the refills cost more than a new {item}",
        ),
    },
    "support": {
        "positive": (
            "customer service helped me recycle my old {item}",
            "the support agent explained where every material comes from",
            "the seller replied the same day about the factory's emissions",
            "the help desk walked me through composting the packaging",
        ),
        "negative": (
            "customer service could not tell me whether the {item} is recyclable",
            "the seller ignored my messages about its carbon footprint",
            "support refused to take back the dead battery for recycling",
            "nobody at the help desk had heard of their own green pledge",
        ),
    },
    "usability": {
        "positive": (
            "the energy saving mode is easy to switch on",
            "the refill system is simple and intuitive to use",
            "the solar charger is easy to set up",
            "the instructions for recycling it are short and clear",
        ),
        "negative": (
            "the eco mode is buried in endless menus",
            "the compostable pods are fiddly to load",
            "setting up the solar panel was a nightmare",
            "the refill cartridge is awkward to swap with one hand",
        ),
    },
}


def new_topic_rows(n: int, seed: int, aspects: bool = False) -> list[str]:
    """Reviews on the new subject, built as demo_data's are (a clause, a second one joined in a
    quarter of them, an opener in 40%, a closer in 35%), so their lengths cover the reviews'. With
    `aspects`, each text's clauses are ASPECT_CLAUSES' of one of the demo's topics (drawn uniformly:
    the demo files fewer of them under support and usability), else NEW_CLAUSES'."""
    from scorekeeper import demo_data as dd

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        category = rng.choice(tuple(dd.CATEGORIES))
        item = rng.choice(dd.CATEGORIES[category])
        sentiment = rng.choice(("positive", "negative"))
        clauses = ASPECT_CLAUSES[rng.choice(dd.TOPICS)] if aspects else NEW_CLAUSES
        body = rng.choice(clauses[sentiment]).format(item=item, n=rng.randint(2, 6))
        if rng.random() < 0.25:
            other = rng.choice(("positive", "negative"))
            body += rng.choice(dd._JOINERS[other == sentiment]) + rng.choice(clauses[other]).format(item=item, n=rng.randint(2, 6))
        parts = [dd._sentence(body)]
        if rng.random() < 0.4:
            parts.insert(0, rng.choice(dd._OPENERS).format(item=item))
        if rng.random() < 0.35:
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


DECODER_TRAIN_ROWS = 4_000  # the demo's training split's phrasings, seed 10,000 (the demo's own), never the held-out pool's seed
DECODER_EPOCHS = 4


def english_words() -> list[str]:
    """An English word list for the trained decoder's tokenizer, so that it has words for a subject
    its training never saw, as a real decoder's has: the alphabetic whole words of the demo encoder's
    WordPiece vocabulary (all-MiniLM-L6-v2's, ./demo/model/tokenizer.json), ten to a line."""
    vocab = json.loads((ROOT / "demo" / "model" / "tokenizer.json").read_text())["model"]["vocab"]
    words = sorted(w for w in vocab if w.isascii() and w.isalpha())
    return [" ".join(words[k : k + 10]) for k in range(0, len(words), 10)]


def trained_decoder() -> Path:
    """A decoder sequence classifier that has learned the demo's task: Qwen2 from a config (2 layers,
    width 128; no hub), its byte-level BPE tokenizer (8,000 tokens) trained on the training reviews
    and an English word list, the whole model trained on DECODER_TRAIN_ROWS of the demo's training
    split for DECODER_EPOCHS epochs on the CPU (AdamW, lr 1e-3, batch 32, pad = eos while training;
    saved without a pad token, as tests/models.py's decoders, so the job pads with eos). Its held-out
    accuracy is printed and written to training.json. Built once under build/."""
    import os
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from scorekeeper.demo_data import TOPICS, generate
    from scorekeeper.demo_model import default_threads
    from tests.models import build_tiny_classifier

    out = ROOT / "build" / "bench-representation" / "qwen2-trained"
    if (out / "training.json").exists():
        return out
    started = time.perf_counter()
    train = generate(DECODER_TRAIN_ROWS, seed=10_000, split="train", id_prefix="t")
    held_out = generate(1_000, seed=0, split="test")  # the demo's own held-out rows (demo/data), not the pool's
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    texts = [r["text"] for r in train]
    build_tiny_classifier(tmp, "qwen2", labels=list(TOPICS), texts=texts + english_words(), vocab_size=8_000, hidden_size=128,
                          num_layers=2, initializer_range=0.02, seed=5)  # fmt: skip
    torch.manual_seed(5)
    torch.set_num_threads(default_threads())
    tokenizer = AutoTokenizer.from_pretrained(str(tmp))
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp))
    tokenizer.pad_token = tokenizer.eos_token  # while training only: the texts never hold eos
    model.config.pad_token_id = tokenizer.eos_token_id
    label2id = model.config.label2id

    def encode(rows):
        enc = tokenizer([r["text"] for r in rows], padding=True, truncation=True, max_length=128, return_tensors="pt")
        return enc, torch.tensor([label2id[r["label"]] for r in rows])

    enc, labels = encode(train)
    batch, steps = 32, DECODER_EPOCHS * ((len(train) + 31) // 32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min((k + 1) / (steps // 10), max(0.0, (steps - k) / (steps - steps // 10))))
    generator = torch.Generator().manual_seed(5)
    losses = []
    for _ in range(DECODER_EPOCHS):
        model.train()
        total = 0.0
        for idx in torch.randperm(len(train), generator=generator).split(batch):
            width = int(enc["attention_mask"][idx].sum(1).max())
            loss = model(**{k: v[idx, :width] for k, v in enc.items()}, labels=labels[idx]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            total += float(loss.detach()) * len(idx)
        losses.append(round(total / len(train), 4))
    model.eval()
    test_enc, test_labels = encode(held_out)
    with torch.no_grad():
        predicted = model(**test_enc).logits.argmax(-1)
    accuracy = float((predicted == test_labels).double().mean())
    model.config.pad_token_id = None
    model.save_pretrained(str(tmp))
    record = {"train_rows": len(train), "epochs": DECODER_EPOCHS, "train_loss": losses, "held_out_rows": len(held_out),
              "held_out_accuracy": accuracy, "seconds": round(time.perf_counter() - started, 1), "threads": torch.get_num_threads()}  # fmt: skip
    (tmp / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(f"decoder-trained: {json.dumps(record)}", flush=True)
    return out


MODELS = {"demo": (str(ROOT / "demo" / "model"), str(ROOT / "demo" / "adapter")), "demo-base": (str(ROOT / "demo" / "model"), None)}


def scorekeeper_run(input_csv: Path, model: str, adapter: str | None, output: Path, name: str, *extra: str) -> Path:
    """One real `scorekeeper run` (the flow, the accelerate worker, the gather, the evaluation) of a
    CSV of `id`, `text` rows, scoring only; its run folder."""
    import subprocess

    command = [str(Path(sys.executable).parent / "scorekeeper"), "run", "--input-uri", str(input_csv), "--model-uri", model,
               "--output-uri", str(output), "--run-name", name, "--id-column", "id", "--label-column", "none", *extra]  # fmt: skip
    if adapter:
        command += ["--adapter-uri", adapter]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return output / name


def texts_of() -> tuple[list[str], list[str]]:
    """The held-out pool's texts and the new subject's: NEW_POOL texts of NEW_CLAUSES, then
    ASPECT_POOL of ASPECT_CLAUSES (seeds fixed)."""
    from scorekeeper.demo_data import generate

    return [r["text"] for r in generate(POOL, seed=101, split="test")], new_topic_rows(NEW_POOL, seed=202) + new_topic_rows(
        ASPECT_POOL, seed=303, aspects=True
    )


def write_input(path: Path, ids: list[str], texts: list[str]) -> Path:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        writer.writerows(zip(ids, texts, strict=True))
    return path


def model_of(name: str, texts: list[str]) -> tuple[str, str | None]:
    """(model, adapter) of a bench model: the demo's (with its adapter, or its base alone) or the decoder."""
    if name == "decoder-trained":
        return str(trained_decoder()), None
    return MODELS[name] if name in MODELS else (str(decoder_model(texts)), None)


def job_pool(name: str) -> Path:
    """Both pools (held-out reviews `r…`, then new-subject texts `n…`) scored once by the job with
    embedding_rows covering every row: each row's embedding, predicted label, score and lengths are
    the job's own (a row's do not depend on the run it is in). Cached under build/."""
    reviews, new = texts_of()
    out = ROOT / "build" / "bench-representation" / "runs"
    run = out / f"pool-{name}"
    if not (run / "complete.json").exists():
        model, adapter = model_of(name, reviews + new)
        source = write_input(ROOT / "build" / "bench-representation" / "pool" / "input.csv",
                             [f"r{i:05d}" for i in range(len(reviews))] + [f"n{i:05d}" for i in range(len(new))], reviews + new)  # fmt: skip
        start = time.perf_counter()
        scorekeeper_run(source, model, adapter, out, run.name, "--embedding-rows", str(len(reviews) + len(new)))
        print(f"{name}: the job scored the pool of {len(reviews) + len(new):,} texts in {time.perf_counter() - start:.0f} s", flush=True)
    return run


def pools(name: str) -> tuple[dict, dict, list[str]]:
    """The held-out pool and the new-subject pool as the job scored them (job_pool): embeddings,
    predicted label, score, tokens and unknown tokens from its files; each row's content tokens by
    the worker's own function (windows.content_tokens), checked to sum to the job's token_counts."""
    import pyarrow.parquet as pq

    from scorekeeper.representation import count_tokens
    from scorekeeper.worker.model import load_tokenizer
    from scorekeeper.worker.windows import content_tokens

    reviews, new_texts = texts_of()
    run = job_pool(name)
    predictions_ = pq.read_table(run / "predictions.parquet").sort_by("row_index")
    embeddings = pq.read_table(run / "embeddings.parquet").sort_by("row_index")
    n = len(reviews) + len(new_texts)
    if predictions_.num_rows != n or embeddings.column("row_index").to_pylist() != list(range(n)):
        raise SystemExit(f"{run}: the pool run does not cover its {n:,} rows")
    matrix = np.asarray(embeddings.column("embedding").combine_chunks().flatten()).reshape(n, -1)
    tokenizer = load_tokenizer(model_of(name, reviews + new_texts)[0], False)
    contents = content_tokens(tokenizer, reviews + new_texts)
    counts = pq.read_table(run / "report" / "token_counts.parquet").sort_by("token_id")
    ids, sums = count_tokens(contents)
    if ids.tolist() != counts.column("token_id").to_pylist() or sums.tolist() != counts.column("count").to_pylist():
        raise SystemExit(f"{run}: the content tokens counted here differ from the job's token_counts.parquet")
    vocab = dict(zip(counts.column("token_id").to_pylist(), counts.column("token").to_pylist(), strict=True))
    labels = json.loads((run / "plan.json").read_text())["labels"]
    columns = {
        "embedding": matrix,
        "predicted": predictions_.column("predicted_id").to_numpy(),
        "score": predictions_.column("score").to_numpy(),
        "tokens": predictions_.column("tokens").to_numpy(),
        "unknown": predictions_.column("unknown_tokens").to_numpy(),
    }
    cut = len(reviews)
    pool = {k: v[:cut] for k, v in columns.items()} | {"content": contents[:cut], "vocab": vocab, "labels": labels}
    new = {k: v[cut:] for k, v in columns.items()} | {"content": contents[cut:]}
    return pool, new, reviews + new_texts


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


SCORE_GAP = 0.02  # a new-subject row replaces a row only within this distance of its score


NARROW = np.arange(NEW_POOL)  # the new-subject rows of NEW_CLAUSES (the `shifts` measurements)
WIDE = np.arange(NEW_POOL + ASPECT_POOL)  # and those of ASPECT_CLAUSES (`matched`)


def matched_shift(
    pool: dict,
    new: dict,
    current: np.ndarray,
    share: float,
    rng: np.random.Generator,
    gap: float | None = SCORE_GAP,
    candidates: np.ndarray = NARROW,
) -> dict[int, int]:
    """Positions of `current` replaced by new-subject rows: each by an unused one of the same
    predicted label and the same token count whose score is the nearest, within SCORE_GAP; a
    position with no such row keeps its own. So the run's predicted label mix and lengths stay
    exactly as they were and its scores within SCORE_GAP: section 12's signals have nothing to see.
    With `gap` None the score is not matched (the nearest is taken however far): the demo model
    files NEW_CLAUSES' subject under two of its five labels, so a matched share stops near 20%.
    `candidates`: the new-subject rows drawn from (NARROW, or WIDE with ASPECT_CLAUSES' too)."""
    want = int(round(share * len(current)))
    free: dict[tuple[int, int], list[int]] = {}
    for k in candidates[rng.permutation(len(candidates))]:
        free.setdefault((int(new["predicted"][k]), int(new["tokens"][k])), []).append(int(k))
    out: dict[int, int] = {}
    for position in rng.permutation(len(current)):
        if len(out) == want:
            break
        row = current[position]
        candidates = free.get((int(pool["predicted"][row]), int(pool["tokens"][row])))
        if not candidates:
            continue
        distance = np.abs(new["score"][candidates] - pool["score"][row])
        best = int(np.argmin(distance))
        if gap is None or distance[best] <= gap:
            out[int(position)] = candidates.pop(best)
    return out


def replays(name: str, count: int) -> dict:
    pool, new, _ = pools(name)
    labels, vocab = pool["labels"], pool["vocab"]
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


def shift_setting(
    name: str, pool: dict, new: dict, n: int, share: float, gap: float | None, count: int, rng: np.random.Generator, candidates=NARROW
) -> dict:
    """`count` replays of a new subject in `share` of n rows (matched_shift): the representation
    signal's alarms beside section 12's, the new-subject texts among its examples, the moved tokens
    never in the reference."""
    labels, vocab = pool["labels"], pool["vocab"]
    alarms, old, shown, new_words, replaced, aucs, aspect = 0, 0, [], [], [], [], []
    old_signals: dict[str, int] = {}  # section 12's signals that drifted, in how many replays
    for _ in range(count):
        rows = rng.choice(len(pool["predicted"]), 2 * n, replace=False)
        new_rows = matched_shift(pool, new, rows[n:], share, rng, gap, candidates)
        drift, moved, _ = replay(pool, new, labels, vocab, rows[:n], rows[n:], new_rows)
        rep = drift.signals["representation"]
        alarms += bool(rep.drifted)
        old += any(v.drifted for k, v in drift.signals.items() if k != "representation")
        for k, v in drift.signals.items():
            if v.drifted and k != "representation":
                old_signals[k] = old_signals.get(k, 0) + 1
        shown.append(sum(e.row_index in new_rows for e in rep.examples))
        new_words.append(sum(t.reference_count == 0 for t in moved))
        replaced.append(len(new_rows) / n)
        aspect.append(sum(k >= NEW_POOL for k in new_rows.values()) / max(1, len(new_rows)))
        aucs.append(rep.auc)
    wide = len(candidates) > NEW_POOL
    out = {"replays": count, "representation_alarms": alarms, "old_alarms": old, "examples_new_min": min(shown),
           "examples_new_mean": float(np.mean(shown)), "moved_new_mean": float(np.mean(new_words)),
           "replaced_share": float(np.mean(replaced)), "replaced_share_min": float(np.min(replaced)), "auc_mean": float(np.mean(aucs)),
           "auc_min": float(np.min(aucs)), "aspect_share_of_replaced": float(np.mean(aspect)), "old_signals": old_signals}  # fmt: skip
    print(
        f"{name} new topic in {100 * share:.0f}% ({100 * np.mean(replaced):.1f}% matched, least {100 * np.min(replaced):.1f}%"
        f"{'' if gap is not None else ', score not matched'}{', wide pool: ' + format(100 * np.mean(aspect), '.0f') + '% of them ASPECT_CLAUSES' if wide else ''}) "
        f"of {n:,} rows: representation alarmed in {alarms} of {count} (section 12's signals {old}: {old_signals}); mean auc {np.mean(aucs):.3f} "
        f"(least {np.min(aucs):.3f}); new-topic texts among the 20 examples: min {min(shown)}, mean {np.mean(shown):.1f}; moved tokens "
        f"never in the reference: mean {np.mean(new_words):.1f} of 20",
        flush=True,
    )
    if share == 0.2 and n == SHIFT_SIZES[0] and gap is not None:
        print("   moved tokens (last replay):", ", ".join(f"{t.token} {t.log_ratio:+.1f}" for t in moved[:12]), flush=True)
    return out


def shifts(name: str, count: int) -> dict:
    pool, new, _ = pools(name)
    rng = np.random.default_rng(2)
    out = {}
    for n in SHIFT_SIZES:
        for share, gap in [(share, SCORE_GAP) for share in SHARES] + [(SHARES[-1], None)]:
            key = f"{n}@{share}" + ("" if gap is not None else " score not matched")
            out[key] = shift_setting(name, pool, new, n, share, gap, count, rng)
    return out


def label_mix(name: str, pool: dict, new: dict) -> dict:
    """Each pool's predicted label mix and its rows' scores by label (quartiles): whether the new
    subject can stand in for 40% of a run's rows label by label, length by length, score by score."""
    out = {}
    parts = {"held-out reviews": (pool, np.arange(POOL)), "NEW_CLAUSES": (new, NARROW), "ASPECT_CLAUSES": (new, WIDE[NEW_POOL:])}
    for part, (table, rows) in parts.items():
        predicted, score = table["predicted"][rows], table["score"][rows]
        mix = {
            label: {
                "share": float(np.mean(predicted == k)),
                "score_quartiles": np.quantile(score[predicted == k], [0.25, 0.5, 0.75]).round(3).tolist(),
            }
            for k, label in enumerate(pool["labels"])
            if (predicted == k).any()
        }
        out[part] = mix
        print(f"{name} {part} ({len(rows):,} rows), predicted label: share, score quartiles: "
              + "; ".join(f"{label} {v['share']:.3f} {v['score_quartiles']}" for label, v in mix.items()), flush=True)  # fmt: skip
    return out


def matched(name: str, count: int) -> dict:
    """A new subject in 40% of 1,000 and 5,000 rows with the predicted label, the token count
    and the score (within SCORE_GAP) of every replaced row kept, drawn from the wide pool (NEW_CLAUSES'
    texts and ASPECT_CLAUSES', which the model files under every label)."""
    pool, new, _ = pools(name)
    out: dict = {"label_mix": label_mix(name, pool, new)}
    rng = np.random.default_rng(3)
    for n in SHIFT_SIZES:
        for share in (0.4,):
            out[f"{n}@{share} wide"] = shift_setting(name, pool, new, n, share, SCORE_GAP, count, rng, WIDE)
    return out


def examples_audit(name: str = "demo", count: int = 40, n: int = 1_000, share: float = 0.2) -> dict:
    """Which current texts that are not new-subject texts reach the 20 examples, and why: the
    `shifts` replays of a new subject in `share` of n rows (the same seeds: the 10% replays at n are
    drawn first, as `shifts` draws them), each checked four ways.

    - definition: the examples, auc and p recomputed from SPEC 14 by tests/representation_reference.py
      (an implementation written from the SPEC alone) on the replay's two runs written as
      embeddings.parquet: the same rows in the same order?
    - ranking: the new-subject rows among the current test rows, the AUC of the decision function
      between the new and the old current test rows, and for each old text among the 20 its rank,
      predicted label and text;
    - a larger fit (replays with fewer than 20 new texts only): the same test rows scored by the same
      procedure fitted on the replay's fit rows plus BIG + BIG rows more of the same two runs'
      distributions (pool rows the replay does not use, a matched shift of the same share): the
      new texts among the 20 then;
    - separability: the same logistic regression fitted on half of the held-out pool against half of
      the new-subject pool (NARROW), its AUC on the other halves: how far the model's representation
      tells the subject apart at all."""
    import tempfile

    import pyarrow.parquet as pq
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from scorekeeper.evaluation.representation import fit_rows, measure
    from scorekeeper.representation import embeddings_table
    from tests.representation_reference import representation as reference_representation

    big = 2_000
    pool, new, texts = pools(name)
    labels = pool["labels"]
    rng = np.random.default_rng(2)
    for _ in range(count):  # the shifts' 10% replays at n, drawn first there
        rows = rng.choice(len(pool["predicted"]), 2 * n, replace=False)
        matched_shift(pool, new, rows[n:], 0.1, rng)
    replays_, tmp = [], Path(tempfile.mkdtemp())
    for r in range(count):
        rows = rng.choice(len(pool["predicted"]), 2 * n, replace=False)
        new_rows = matched_shift(pool, new, rows[n:], share, rng)
        ref, _ = run_of(pool, new, rows[:n], {})
        cur, _ = run_of(pool, new, rows[n:], new_rows)
        measured = measure(ref, cur)
        assert not isinstance(measured, str)
        for side, emb in (("reference", ref), ("current", cur)):
            pq.write_table(embeddings_table(emb.row_index, emb.ids, emb.matrix), tmp / f"{side}.parquet")
        independent = reference_representation(tmp / "reference.parquet", tmp / "current.parquet", {})
        shown = [e["row_index"] for e in measured.examples]
        # the decision function of every test row, as measure computes it (the fit refitted here to read it)
        fit_ref, fit_cur = fit_rows(ref.row_index), fit_rows(cur.row_index)
        x = np.vstack([ref.matrix[fit_ref], cur.matrix[fit_cur]]).astype(np.float64)
        mean, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1.0
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit(
            (x - mean) / sd, np.r_[np.zeros(fit_ref.sum()), np.ones(fit_cur.sum())]
        )
        test = np.flatnonzero(~fit_cur)
        scores = model.decision_function((cur.matrix[test].astype(np.float64) - mean) / sd)
        is_new = np.array([int(t) in new_rows for t in test])
        order = np.lexsort((test, -scores))
        record = {
            "replay": r,
            "examples_new": sum(t in new_rows for t in shown),
            "same_examples_as_reference_implementation": shown == [e["row_index"] for e in independent["examples"]],
            "auc": measured.auc,
            "auc_reference_implementation": independent["auc"],
            "current_test_rows": len(test),
            "new_test_rows": int(is_new.sum()),
            "auc_new_vs_old_current_test": float(roc_auc_score(is_new, scores)),
            "old_among_20": [
                {
                    "rank": int(k + 1),
                    "score": round(float(scores[order[k]]), 3),
                    "label": labels[int(pool["predicted"][rows[n:][test[order[k]]]])],
                    "text": texts[int(rows[n:][test[order[k]]])][:100],
                }
                for k in range(20)
                if not is_new[order[k]]
            ],  # fmt: skip
            "first_new_ranks_after_20": [int(k + 1) for k in np.flatnonzero(is_new[order])[:25] if k >= 20][:5],
        }
        if record["examples_new"] < 20:
            # a larger fit: BIG more rows of each run's distribution, from pool rows and new rows the replay does not use
            unused = np.setdiff1d(np.arange(len(pool["predicted"])), rows)
            extra = rng.choice(unused, 2 * big, replace=False)
            left = np.setdiff1d(NARROW, np.array(list(new_rows.values())))
            extra_new = matched_shift(pool, new, extra[big:], share, rng, SCORE_GAP, left)
            extra_cur = pool["embedding"][extra[big:]].copy()
            for position, k in extra_new.items():
                extra_cur[position] = new["embedding"][k]
            xb = np.vstack([ref.matrix[fit_ref], pool["embedding"][extra[:big]], cur.matrix[fit_cur], extra_cur]).astype(np.float64)
            yb = np.r_[np.zeros(fit_ref.sum() + big), np.ones(fit_cur.sum() + big)]
            mb, sb = xb.mean(0), xb.std(0)
            sb[sb == 0] = 1.0
            bigger = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit((xb - mb) / sb, yb)
            sc = bigger.decision_function((cur.matrix[test].astype(np.float64) - mb) / sb)
            top = np.lexsort((test, -sc))[:20]
            record["larger_fit"] = {"fit_rows": len(yb), "examples_new": int(is_new[top].sum()),
                                    "auc_new_vs_old_current_test": float(roc_auc_score(is_new, sc))}  # fmt: skip
        replays_.append(record)
        print(json.dumps(record), flush=True)
    # separability of the subject in the model's representation
    half = POOL // 2  # held-out reviews against as many new-subject texts, the rest of each pool to test
    permuted_pool, permuted_new = rng.permutation(POOL), rng.permutation(NEW_POOL)
    xs = np.vstack([pool["embedding"][permuted_pool[:half]], new["embedding"][permuted_new[:half]]]).astype(np.float64)
    ms, ss = xs.mean(0), xs.std(0)
    ss[ss == 0] = 1.0
    sep = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit((xs - ms) / ss, np.r_[np.zeros(half), np.ones(half)])
    xt = np.vstack([pool["embedding"][permuted_pool[half:]], new["embedding"][permuted_new[half:]]])
    yt = np.r_[np.zeros(POOL - half), np.ones(NEW_POOL - half)]
    separability = float(roc_auc_score(yt, sep.decision_function((xt.astype(np.float64) - ms) / ss)))
    shown_counts = [r["examples_new"] for r in replays_]
    failing = [r for r in replays_ if r["examples_new"] < 20]
    old_labels: dict[str, int] = {}
    for r in replays_:
        for e in r["old_among_20"]:
            old_labels[e["label"]] = old_labels.get(e["label"], 0) + 1
    summary = {
        "replays": count,
        "examples_new_mean": float(np.mean(shown_counts)),
        "examples_new_min": min(shown_counts),
        "replays_below_20": len(failing),
        "replays_below_18": sum(c < 18 for c in shown_counts),
        "examples_equal_reference_implementation": sum(r["same_examples_as_reference_implementation"] for r in replays_),
        "auc_max_difference_reference_implementation": max(abs(r["auc"] - r["auc_reference_implementation"]) for r in replays_),
        "auc_new_vs_old_current_test_mean": float(np.mean([r["auc_new_vs_old_current_test"] for r in replays_])),
        "auc_new_vs_old_current_test_failing_mean": float(np.mean([r["auc_new_vs_old_current_test"] for r in failing]))
        if failing
        else None,
        "larger_fit_examples_new": [r["larger_fit"]["examples_new"] for r in failing],
        "larger_fit_auc_new_vs_old_mean": float(np.mean([r["larger_fit"]["auc_new_vs_old_current_test"] for r in failing]))
        if failing
        else None,
        "old_examples_by_predicted_label": old_labels,
        "new_label_mix": {labels[k]: float(np.mean(new["predicted"][NARROW] == k)) for k in range(len(labels))},
        "separability_auc": separability,
    }
    print(f"{name} examples at {n:,} rows, {100 * share:.0f}% new: " + json.dumps(summary), flush=True)
    return summary


def fit(rows: int = 20_000) -> dict:
    """representation.measure at rows + rows of width 768, real features: each row's embedding by the
    demo model with its adapter (job_pool "demo") beside the same model's without it ("demo-base"),
    both as the job wrote them; the runs drawn from the held-out reviews (with replacement), once
    without drift and once with a fifth of the current rows new-subject texts. CPU time and wall
    time of each measure, the machine's load average beside them."""
    import os
    import resource

    from scorekeeper.evaluation.representation import Embeddings, measure

    adapted, base = pools("demo"), pools("demo-base")
    pool = np.hstack([adapted[0]["embedding"], base[0]["embedding"]])
    new = np.hstack([adapted[1]["embedding"], base[1]["embedding"]])
    rng = np.random.default_rng(4)
    drawn = rng.choice(len(pool), 2 * rows)
    reference = Embeddings(np.arange(rows, dtype=np.int64), pa.array(np.arange(rows)), pool[drawn[:rows]])
    shifted = pool[drawn[rows:]].copy()
    shifted[rng.choice(rows, rows // 5, replace=False)] = new[rng.choice(len(new), rows // 5)]
    out = {}
    for label, current in (("no drift", pool[drawn[rows:]]), ("a new subject in 20% of the rows", shifted)):
        run = Embeddings(np.arange(rows, dtype=np.int64), pa.array(np.arange(rows)), np.ascontiguousarray(current))
        wall, cpu = time.perf_counter(), time.process_time()
        measured = measure(reference, run)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        load = os.getloadavg()[0]
        out[label] = {"cpu_s": cpu, "wall_s": wall, "load": load, "auc": measured.auc}
        print(f"fit at {rows:,} + {rows:,} rows of width {pool.shape[1]}, {label}: {cpu:.1f} s CPU, {wall:.1f} s wall "
              f"(load average {load:.1f} on 2 cores); auc {measured.auc:.3f}", flush=True)  # fmt: skip
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def check(name: str = "demo", n: int = 1_000, share: float = 0.2) -> dict:
    """An assembled replay against real job runs: a reference and a current run (a new subject in
    `share` of its rows, matched as in `shifts`) of n rows each, scored by `scorekeeper run` (the
    current one with --drift-reference), against the same pair assembled from the pool run
    (run_of, predictions, replay): embeddings, predictions, token counts, the drift signals, the
    representation signal and its examples, the moved tokens; and how far the assembled auc moves
    when its embeddings are jittered by as much as the job's differ from them (8 draws)."""
    import tempfile

    import pyarrow.parquet as pq

    from scorekeeper.evaluation.representation import Embeddings, Measured, measure, read_embeddings
    from scorekeeper.storage import Location

    pool, new, texts = pools(name)
    rng = np.random.default_rng(9)
    rows = rng.choice(len(pool["predicted"]), 2 * n, replace=False)
    new_rows = matched_shift(pool, new, rows[n:], share, rng)
    drift, moved, _ = replay(pool, new, pool["labels"], pool["vocab"], rows[:n], rows[n:], new_rows)
    model, adapter = model_of(name, texts)
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = {}
        for side, picked, replaced in (("reference", rows[:n], {}), ("current", rows[n:], new_rows)):
            ids = [f"n{replaced[k]:05d}" if k in replaced else f"r{r:05d}" for k, r in enumerate(picked)]
            body = [texts[POOL + replaced[k]] if k in replaced else texts[r] for k, r in enumerate(picked)]
            extra = ("--drift-reference", "reference") if side == "current" else ()
            runs[side] = scorekeeper_run(write_input(root / f"{side}.csv", ids, body), model, adapter, root / "runs", side, *extra)
        for side, picked, replaced in (("reference", rows[:n], {}), ("current", rows[n:], new_rows)):
            emb, counts = run_of(pool, new, picked, replaced)
            real = pq.read_table(runs[side] / "embeddings.parquet").sort_by("row_index")
            matrix = np.asarray(real.column("embedding").combine_chunks().flatten()).reshape(real.num_rows, -1)
            assembled = predictions(pool, new, picked, replaced, pool["labels"])
            job = pq.read_table(runs[side] / "predictions.parquet").sort_by("row_index")
            tokens = pq.read_table(runs[side] / "report" / "token_counts.parquet")
            out[side] = {
                "rows": real.column("row_index").to_pylist() == emb.row_index.tolist(),
                "embedding_max_abs_difference": float(np.abs(matrix - emb.matrix).max()),
                "predicted_label_equal": job.column("predicted_label").to_pylist() == assembled.column("predicted_label").to_pylist(),
                "score_max_abs_difference": float(np.abs(job.column("score").to_numpy() - assembled.column("score").to_numpy()).max()),
                "lengths_equal": job.column("tokens").to_pylist() == assembled.column("tokens").to_pylist()
                and job.column("unknown_tokens").to_pylist() == assembled.column("unknown_tokens").to_pylist(),
                "token_counts_equal": dict(zip(tokens.column("token_id").to_pylist(), tokens.column("count").to_pylist(), strict=True))
                == counts,
            }
        job_drift = json.loads((runs["current"] / "report" / "metrics.json").read_text())["drift"]
        # the bench's measurement on the real runs' own files: the same code as the job's drift step
        on_files = measure(
            read_embeddings(Location.from_uri(str(runs["reference"]))), read_embeddings(Location.from_uri(str(runs["current"])))
        )
    rep, job_rep = drift.signals["representation"], job_drift["signals"]["representation"]
    assert isinstance(on_files, Measured)
    # how far the fit's auc moves when the assembled embeddings move by as much as the job's differ
    # from them (batch composition): each value jittered by a uniform draw within that distance
    scale = max(out[side]["embedding_max_abs_difference"] for side in ("reference", "current"))
    ref_emb, cur_emb = run_of(pool, new, rows[:n], {})[0], run_of(pool, new, rows[n:], new_rows)[0]
    jitter_rng, jittered = np.random.default_rng(10), []
    for _ in range(8):
        moved_ = [Embeddings(e.row_index, e.ids, (e.matrix + jitter_rng.uniform(-scale, scale, e.matrix.shape)).astype(np.float32))
                  for e in (ref_emb, cur_emb)]  # fmt: skip
        measured_ = measure(*moved_)
        assert isinstance(measured_, Measured)
        jittered.append(measured_.auc - rep.auc)
    shown = [e.row_index for e in rep.examples]
    out["drift"] = {
        "drifted_equal": {k: v.drifted for k, v in drift.signals.items()} == {k: v["drifted"] for k, v in job_drift["signals"].items()},
        "auc_assembled_job": [rep.auc, job_rep["auc"]],
        "p_assembled_job": [rep.p, job_rep["p"]],
        "examples_same_order": shown == [e["row_index"] for e in job_rep["examples"]],
        "examples_in_both": len(set(shown) & {e["row_index"] for e in job_rep["examples"]}),
        "moved_tokens_equal": [t.token for t in moved] == [t["token"] for t in job_drift["moved_tokens"]],
        "job_files_remeasured_auc_difference": abs(on_files.auc - job_rep["auc"]),
        "job_files_remeasured_examples_equal": [e["row_index"] for e in on_files.examples] == [e["row_index"] for e in job_rep["examples"]],
        "assembled_auc_jittered_by_that_difference": {"scale": scale, "min": min(jittered), "max": max(jittered)},
    }
    print(f"{name}: a {n:,}-row replay ({100 * share:.0f}% new subject) assembled from the pool run against two real runs: "
          + json.dumps(out), flush=True)  # fmt: skip
    return out


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


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    count = int(argv[1]) if len(argv) > 1 and what in ("replays", "shifts", "matched", "examples", "all") else 40
    models = argv[2:] or ["demo", "decoder"]
    results: dict = {}
    if what == "check":
        for name in argv[1:] or ["demo"]:
            results[f"{name}_check"] = check(name)
    if what == "examples":
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):  # as the signal's own fit (representation.FIT_THREADS)
            for name in argv[2:] or ["demo"]:
                results[f"{name}_examples"] = examples_audit(name, count)
    if what == "train":
        results["decoder_trained"] = str(trained_decoder())
    for name in models if what not in ("check", "examples", "train") else []:
        if what in ("replays", "all"):
            results[f"{name}_replays"] = replays(name, count)
        if what in ("shifts", "all"):
            results[f"{name}_shifts"] = shifts(name, count)
        if what in ("matched", "all"):
            results[f"{name}_matched"] = matched(name, count)
    if what in ("fit", "all"):
        results["fit"] = fit()
    if what in ("memory", "all"):
        results["memory"] = memory(int(argv[1]) if what == "memory" and len(argv) > 1 else 3_000_000)
    print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

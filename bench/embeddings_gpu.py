"""SPEC 14's worker-side cost on a GPU, with torch, transformers and pyarrow only (the lent machine
has no pydantic, which the worker's replica path imports through its long-text counts).

    python bench/embeddings_gpu.py [--model bert-base,qwen2-0.5b-like] [--rows 20000] [--repeats 3]
                                   [--tokens-per-batch 65536] [--work DIR] [--json OUT]

The corpus and models of bench/run.py (built and cached in --work). Every range (4,096 rows) is
tokenised, sorted by length, cut into batches of at most --tokens-per-batch padded tokens and put
on the device before anything is timed (a perfect loader: the smallest denominator, so the ratio
is the largest it can be). Then, alternating, the scoring loop without and with what the worker adds
(scorekeeper/worker/embeddings.py, the same code): the forward hook on the base model and the
pooled rows read off each batch on the device; per range, one copy of the logits (and of the
vectors) to the host, the sha256 sample of the rows, the windows' vectors put in row order, the
embeddings table and the range's token counts (the tokenizer's strings for its ids), both encoded
as Parquet in a writer thread, as the worker's commit thread does. Every row is sampled (N <=
embedding_rows, the default 20,000): the most expensive case per row; 2,000 (a tenth) is what a run
ten times larger keeps. The cost is the ratio of the loops' medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

RANGE_ROWS = 4096


def batches_of(lengths: np.ndarray, budget: int) -> list[np.ndarray]:
    """Length-sorted positions cut into batches of at most `budget` padded tokens (as cut_batches)."""
    order = np.argsort(lengths, kind="stable")
    out, current, longest = [], [], 0
    for p in order:
        longest_next = max(longest, int(lengths[p]))
        if current and longest_next * (len(current) + 1) > budget:
            out.append(np.array(current))
            current, longest_next = [], int(lengths[p])
        current.append(int(p))
        longest = longest_next
    if current:
        out.append(np.array(current))
    return out


def prepare(tokenizer, texts: list[str], budget: int, device, pad_id: int):
    """Per range: its rows (row_index, id), content tokens, and its batches on the device."""
    import torch

    ranges = []
    for start in range(0, len(texts), RANGE_ROWS):
        chunk = texts[start : start + RANGE_ROWS]
        ids = tokenizer(chunk, truncation=True, max_length=512)["input_ids"]
        contents = tokenizer(chunk, add_special_tokens=False)["input_ids"]
        lengths = np.array([len(x) for x in ids])
        batches = []
        for positions in batches_of(lengths, budget):
            width = int(lengths[positions].max())
            input_ids = np.full((len(positions), width), pad_id, dtype=np.int64)
            for k, p in enumerate(positions):
                input_ids[k, : lengths[p]] = ids[p]
            mask = (np.arange(width)[None, :] < lengths[positions][:, None]).astype(np.int64)
            batches.append((positions, torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)))
        row_index = np.arange(start, start + len(chunk), dtype=np.int64)
        rows = pa.table({"row_index": row_index, "id": row_index})
        ranges.append((rows, contents, batches))
    return ranges


def loop(model, ranges, labels: int, representation, tokenizer, device) -> float:
    import torch

    from scorekeeper.representation import EMBEDDINGS_PARQUET, count_tokens
    from scorekeeper.worker.embeddings import token_counts_table

    def encode(*tables):
        for t in tables:
            if t is not None:
                sink = pa.BufferOutputStream()
                pq.write_table(t, sink, **(EMBEDDINGS_PARQUET if "embedding" in t.column_names else {"compression": "zstd"}))

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) as writer, ThreadPoolExecutor(max_workers=1) as preparer, torch.inference_mode():
        writes = []
        for rows, contents, batches in ranges:
            sample = counting = None
            if representation is not None:
                # the worker counts a range's tokens while preparing it, in the thread ahead of the model (GPU)
                counting = preparer.submit(count_tokens, contents)
                sample = representation.sample(rows.column("row_index").to_numpy(), np.ones(rows.num_rows, dtype=np.int64))
            logits, pooled = [], []
            for positions, input_ids, mask in batches:
                logits.append(model(input_ids=input_ids, attention_mask=mask).logits)
                if representation is not None and sample is not None:
                    keep = sample.keep(positions)
                    pooled.append((positions[keep], representation.pooled(input_ids, mask, keep)))
            order = np.concatenate([b[0] for b in batches])
            probabilities = np.empty((rows.num_rows, labels))
            probabilities[order] = torch.softmax(torch.cat(logits).double(), -1).cpu().numpy()
            if sample is not None and counting is not None:
                kept = [(p, v) for p, v in pooled if v is not None]
                if kept:
                    sample.add(np.concatenate([p for p, _ in kept]), torch.cat([v for _, v in kept]).float().cpu().numpy())
                counts = token_counts_table(tokenizer, *counting.result())
                writes.append(writer.submit(encode, sample.table(rows), counts))
        for w in writes:
            w.result()
    return time.perf_counter() - began


def measure(model_name: str, model_dir: Path, data: Path, args) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from scorekeeper.worker.embeddings import Representation

    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=dtype).to(device).eval()
    texts = pq.read_table(data, columns=["text"]).column("text").to_pylist()[: args.rows]
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    ranges = prepare(tokenizer, texts, args.tokens_per_batch, device, pad_id)
    labels = model.config.num_labels
    loop(model, ranges[:1], labels, None, tokenizer, device)  # warm-up: kernels, allocator
    variants = [int(v) for v in args.embedding_rows.split(",")]
    times: dict[int, list[float]] = {0: [], **{v: [] for v in variants}}
    for _ in range(args.repeats):
        times[0].append(loop(model, ranges, labels, None, tokenizer, device))
        for v in variants:
            representation = Representation(model, v, len(texts), model.config.pad_token_id)
            times[v].append(loop(model, ranges, labels, representation, tokenizer, device))
            representation.remove()
    without = statistics.median(times[0])
    tokens = sum(int(m.sum()) for _, _, batches in ranges for _, _, m in batches)
    result = dict(
        model=model_name, device=str(device), dtype=str(dtype).removeprefix("torch."), rows=len(texts), useful_tokens=tokens,
        tokens_per_batch=args.tokens_per_batch, loop_s={str(k): v for k, v in times.items()}, tokens_per_s_without=tokens / without,
        cost={str(v): statistics.median(times[v]) / without - 1 for v in variants},
    )  # fmt: skip
    costs = ", ".join(f"embedding_rows {v:,}: {statistics.median(times[v]):.2f} s, {result['cost'][str(v)]:+.1%}" for v in variants)
    print(
        f"{model_name} on {device} ({result['dtype']}), {len(texts):,} rows, {tokens / without:,.0f} useful tokens/s: loop "
        f"{without:.2f} s without embeddings and token counts; {costs}",
        flush=True,
    )
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/embeddings_gpu.py", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert-base,qwen2-0.5b-like")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--embedding-rows", default="20000,2000", help="the settings measured against none (comma list)")
    ap.add_argument("--tokens-per-batch", type=int, default=65_536)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=str(BENCH / ".work"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import corpus
    import models

    work = Path(args.work).resolve()
    tok = corpus.train_tokenizer(work / "tokenizer.json")
    data = work / f"corpus-{args.rows}.parquet"
    corpus.make_corpus(data, args.rows, tok)
    results = [measure(name, models.build_model(name, work / "models" / name, tok), data, args) for name in args.model.split(",")]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The reference loops scorekeeper is measured against, as plain functions and as a command.

(a) notebook_loop: the seed question's code, unchanged in spirit: fp32, pad every row to 512,
    fixed batches of 10, torch.no_grad, softmax, .tolist(). What people actually run.
(b) sorted_loop: the obvious fix anyone can write in ten lines: tokenize everything, sort by
    length, cut batches by a padded-token budget, pad to the longest row in each batch with
    plain Python lists. fp32 on CPU, bf16 on CUDA. scorekeeper has to beat this too.
(e) dense_loop: not a way to score rows, a ceiling: the same useful tokens cut into one dense
    shape (128 x 512), no padding and no mask, bf16 on CUDA, batches already on the device.

Each function takes a model folder, the texts and a device, and returns one result dict:
rows, useful_tokens (non-pad tokens after truncation to 512), padded_tokens (positions the model
computed), wall_s and first_batch_s (both from function start, model load included; first batch
= its probabilities on the host), load_s, batches, dtype, threads, and probs (float32 array,
rows x labels, input order) so methods can be cross-checked against each other.

As a command (one method per fresh process, so run.py can measure its peak memory):
    python bench/baselines.py {a,b,e} --model DIR --input PARQUET --json OUT [--probs OUT.npz]
        [--device cpu|cuda] [--sample N] [--tokens-per-batch N] [--max-batch-rows N] [--dtype D]
"""

from __future__ import annotations

import time

import torch

MAX_LENGTH = 512


def _dtype(name: str | None, device: str, default_cuda=torch.bfloat16) -> torch.dtype:
    if name:
        return getattr(torch, name)
    return default_cuda if device.startswith("cuda") else torch.float32


def _load(model_dir, device: str, dtype: torch.dtype):
    """Tokenizer and model as a user would load them; quiet, in eval mode, on `device`."""
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=dtype)
    return tok, model.to(device).eval()


def _result(method, t0, t_first, t_load, rows, useful, padded, batches, probs, dtype, device, **extra):
    return dict(
        method=method,
        rows=rows,
        useful_tokens=int(useful),
        padded_tokens=int(padded),
        wall_s=time.perf_counter() - t0,
        first_batch_s=t_first,
        load_s=t_load,
        batches=batches,
        dtype=str(dtype).replace("torch.", ""),
        device=device,
        threads=torch.get_num_threads(),
        probs=probs,
        **extra,
    )


def notebook_loop(model_dir, texts: list[str], device: str = "cpu", batch_size: int = 10) -> dict:
    """(a) The seed question's loop: fp32, padding="max_length" (512), batches of 10."""
    import numpy as np

    t0 = time.perf_counter()
    tokenizer, model = _load(model_dir, device, torch.float32)
    t_load = time.perf_counter() - t0
    probs, useful, t_first = [], 0, None
    for i in range(0, len(texts), batch_size):
        inputs = tokenizer(texts[i : i + batch_size], truncation=True, max_length=MAX_LENGTH, padding="max_length", return_tensors="pt").to(
            device
        )
        with torch.no_grad():
            logits = model(**inputs).logits
        probs.extend(torch.softmax(logits, dim=-1).tolist())
        useful += int(inputs["attention_mask"].sum())
        if t_first is None:
            t_first = time.perf_counter() - t0
    return _result(
        "a",
        t0,
        t_first,
        t_load,
        len(texts),
        useful,
        len(texts) * MAX_LENGTH,
        -(-len(texts) // batch_size),
        np.asarray(probs, dtype=np.float32),
        torch.float32,
        device,
        batch_size=batch_size,
    )


def _cut_batches(lengths: list[int], order: list[int], tokens_per_batch: int, max_rows: int):
    """Batches of indices (in `order`, longest first) whose padded size fits the token budget."""
    batches, cur, cur_max = [], [], 0
    for i in order:
        new_max = max(cur_max, lengths[i])
        if cur and ((len(cur) + 1) * new_max > tokens_per_batch or len(cur) == max_rows):
            batches.append(cur)
            cur, new_max = [], lengths[i]
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    return batches


def sorted_loop(
    model_dir,
    texts: list[str],
    device: str = "cpu",
    tokens_per_batch: int | None = None,
    max_batch_rows: int = 1024,
    dtype: str | None = None,
) -> dict:
    """(b) Length-sorted, token-budget batches, dynamic padding, plain Python collation.

    Longest batches first, so a budget too big for the device fails at once, not at the end.
    """
    import numpy as np

    t0 = time.perf_counter()
    dt = _dtype(dtype, device)
    tokenizer, model = _load(model_dir, device, dt)
    t_load = time.perf_counter() - t0
    budget = tokens_per_batch or (65_536 if device.startswith("cuda") else 2_048)
    ids = tokenizer(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    lengths = [len(x) for x in ids]
    order = sorted(range(len(ids)), key=lambda i: -lengths[i])
    batches = _cut_batches(lengths, order, budget, max_batch_rows)
    pad = tokenizer.pad_token_id
    n_labels = model.config.num_labels
    probs = np.zeros((len(texts), n_labels), dtype=np.float32)
    padded, t_first = 0, None
    for batch in batches:
        width = max(lengths[i] for i in batch)
        input_ids = torch.tensor([ids[i] + [pad] * (width - lengths[i]) for i in batch])
        mask = torch.tensor([[1] * lengths[i] + [0] * (width - lengths[i]) for i in batch])
        with torch.inference_mode():
            logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits
        probs[batch] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        padded += width * len(batch)
        if t_first is None:
            t_first = time.perf_counter() - t0
    return _result(
        "b",
        t0,
        t_first,
        t_load,
        len(texts),
        sum(lengths),
        padded,
        len(batches),
        probs,
        dt,
        device,
        tokens_per_batch=budget,
        max_batch_rows=max_batch_rows,
    )


def dense_loop(
    model_dir, texts: list[str], device: str = "cpu", seq_len: int = 128, batch_rows: int = 512, dtype: str | None = None
) -> dict:
    """(e) Ceiling: the corpus's useful tokens as full (batch_rows x seq_len) batches, no mask.

    Batches are built and moved to the device before timing starts; one warm-up batch runs
    first; wall_s covers the model loop only (first_batch_s still counts from the start).
    probs are of the dense chunks, not of the rows: not comparable with other methods.
    """

    t0 = time.perf_counter()
    dt = _dtype(dtype, device)
    tokenizer, model = _load(model_dir, device, dt)
    t_load = time.perf_counter() - t0
    ids = tokenizer(texts, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    flat = torch.tensor([t for row in ids for t in row])
    n_batches = len(flat) // (seq_len * batch_rows)
    if n_batches < 1:
        raise ValueError(f"{len(flat)} tokens are fewer than one {batch_rows}x{seq_len} batch")
    chunks = flat[: n_batches * batch_rows * seq_len].view(n_batches, batch_rows, seq_len).to(device)
    outs, t_first = [], None
    with torch.inference_mode():
        model(input_ids=chunks[0]).logits.float().softmax(-1).cpu()  # warm-up, not timed
        t_loop = time.perf_counter()
        for b in range(n_batches):
            outs.append(model(input_ids=chunks[b]).logits.float().softmax(-1))
            if t_first is None:
                outs[0] = outs[0].cpu()
                t_first = time.perf_counter() - t0
        probs = torch.cat([o.cpu() for o in outs]).numpy()
    loop_s = time.perf_counter() - t_loop
    res = _result(
        "e",
        t0,
        t_first,
        t_load,
        n_batches * batch_rows,
        chunks.numel(),
        chunks.numel(),
        n_batches,
        probs,
        dt,
        device,
        seq_len=seq_len,
        batch_rows=batch_rows,
    )
    res["total_s"], res["wall_s"] = res["wall_s"], loop_s
    return res


def main(argv=None) -> int:
    import argparse
    import json
    from pathlib import Path

    import numpy as np
    import pyarrow.parquet as pq

    ap = argparse.ArgumentParser(description="Run one reference loop and write its result as JSON.")
    ap.add_argument("method", choices=["a", "b", "e"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True, help="Parquet file with a 'text' column")
    ap.add_argument("--json", required=True, help="where to write the result (without probs)")
    ap.add_argument("--probs", help="where to write probs and row index (.npz)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sample", type=int, help="score only N evenly spaced rows (deterministic)")
    ap.add_argument("--tokens-per-batch", type=int)
    ap.add_argument("--max-batch-rows", type=int, default=1024)
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    texts = pq.read_table(a.input, columns=["text"]).column("text").to_pylist()
    total = len(texts)
    index = np.arange(total)
    if a.sample and a.sample < total:
        index = np.unique(np.linspace(0, total - 1, a.sample).round().astype(np.int64))
        texts = [texts[i] for i in index]
    read_s = time.perf_counter() - t0
    if a.method == "a":
        res = notebook_loop(a.model, texts, a.device)
    elif a.method == "b":
        res = sorted_loop(a.model, texts, a.device, a.tokens_per_batch, a.max_batch_rows, a.dtype)
    else:
        res = dense_loop(a.model, texts, a.device, dtype=a.dtype)
        index = np.arange(res["rows"])
    probs = res.pop("probs")
    res.update(read_s=read_s, input_rows=total, sampled=len(texts) < total)
    if a.probs:
        np.savez(a.probs, probs=probs, index=index)
        res["probs_path"] = str(a.probs)
    Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The peers' side of bench/peers.py: what a person writes by hand to score a Parquet file.

    python bench/plain_loop.py sorted   --model DIR --input PARQUET --out NPY [--dtype bfloat16] [--tokens-per-batch 2048]
    python bench/plain_loop.py pipeline --model DIR --input PARQUET --out NPY [--batch-size 32]

`sorted` is the ten-line loop: tokenize everything, sort by length, cut batches by a padded-token
budget, pad each to its longest row, softmax. `pipeline` is transformers' `pipeline`
("text-classification", every label's score). Both write the probabilities (rows x labels, input
order) with numpy: the run's whole job, timed from outside as a process by peers.py.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow.parquet as pq
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline


def sorted_loop(model_dir: str, texts: list[str], dtype: torch.dtype, budget: int) -> np.ndarray:
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=dtype).eval()
    ids = tok(texts, truncation=True, max_length=512)["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    probs = np.zeros((len(texts), model.config.num_labels), dtype=np.float32)
    start = 0
    while start < len(order):
        rows = order[start : start + max(1, budget // len(ids[order[start]]))]
        batch = tok.pad({"input_ids": [ids[i] for i in rows]}, return_tensors="pt")
        with torch.inference_mode():
            probs[rows] = torch.softmax(model(**batch).logits.float(), -1).numpy()
        start += len(rows)
    return probs


def hf_pipeline(model_dir: str, texts: list[str], batch_size: int) -> np.ndarray:
    classify = pipeline("text-classification", model=model_dir, device="cpu", top_k=None)
    labels = classify.model.config.id2label
    out = classify(texts, batch_size=batch_size, truncation=True, max_length=512)
    return np.array([[{d["label"]: d["score"] for d in row}[labels[j]] for j in range(len(labels))] for row in out], dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("how", choices=["sorted", "pipeline"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--tokens-per-batch", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    texts = pq.read_table(args.input, columns=["text"]).column("text").to_pylist()
    if args.how == "sorted":
        probs = sorted_loop(args.model, texts, getattr(torch, args.dtype), args.tokens_per_batch)
    else:
        probs = hf_pipeline(args.model, texts, args.batch_size)
    np.save(args.out, probs)


if __name__ == "__main__":
    main()

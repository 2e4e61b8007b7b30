"""scorekeeper's scoring step alone, for the throughput benchmark (bench/README.md, method c).

    python bench/step.py --model DIR --input PARQUET --json OUT [--device cpu|cuda]
        [--probs OUT.npz] [--tokens-per-batch N] [--rows-per-range N] [--max-batch-rows N] [--dtype D]
        [--max-rows N] [--embedding-rows N [--embeddings-out PARQUET]]

The worker's own code path in one process: `load_model`, ranges cut by `cut_ranges`, each
range prepared and scored by the replica runner's functions (`prepare_range`, `scored_ranges`),
and its prediction table built and encoded as a Parquet shard in a background thread, as the
worker does. Left out: the flow, Prefect, staging, and the shard's commit to a run folder (the
encoded shard is dropped). The input is read one range at a time (`iter_batches`), so the
process never holds more than a range or two of rows: this is what the memory check measures.
Imports neither Prefect nor DuckDB.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch


def read_ranges(path: str, rows_per_range: int) -> Iterator[tuple[object, pa.Table]]:
    """(IndexRange, rows) for consecutive ranges of the file, streamed, with the staged input's columns."""
    from scorekeeper.run_folder import IndexRange

    source = pq.ParquetFile(path)
    columns = [c for c in ("text", "text_pair") if c in source.schema_arrow.names]
    pending: list[pa.RecordBatch] = []
    held = start = index = 0

    def cut(n: int) -> tuple[IndexRange, pa.Table]:
        nonlocal pending, held, start, index
        table = pa.Table.from_batches(pending).combine_chunks()
        rows, rest = table.slice(0, n), table.slice(n)
        pending, held = rest.to_batches(), rest.num_rows
        r = IndexRange(index, start, start + n)
        index, start = index + 1, start + n
        rows = rows.append_column("row_index", pa.array(np.arange(r.start, r.end, dtype=np.int64)))
        return r, rows.append_column("id", rows.column("row_index"))

    for batch in source.iter_batches(batch_size=rows_per_range, columns=columns):
        pending.append(batch)
        held += batch.num_rows
        while held >= rows_per_range:
            yield cut(rows_per_range)
    if held:
        yield cut(held)


def encode_shard(rows: pa.Table, probabilities: np.ndarray, labels: list[str], parts: tuple[pa.Table | None, ...] = ()) -> int:
    """What the worker does with a scored range before its commit: the table (and the files committed
    with it: the sampled rows' embeddings, the token counts), encoded as Parquet."""
    from scorekeeper.representation import EMBEDDINGS_PARQUET
    from scorekeeper.worker.shards import parquet_bytes, prediction_table

    tables = [t for t in (prediction_table(rows, probabilities, labels), *parts) if t is not None]
    return sum(len(parquet_bytes(t, **(EMBEDDINGS_PARQUET if "embedding" in t.column_names else {}))) for t in tables)


def request_default(name: str):
    """A ScoreRequest field's default: params.py is the one place defaults live. Imported only when
    an option is left out, so the step also runs where pydantic is not installed (the GPU machine)."""
    from scorekeeper.params import ScoreRequest

    return ScoreRequest.model_fields[name].default


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/step.py", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True, help="Parquet file with a 'text' column (and optionally 'text_pair')")
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--probs", help="write probs (float32) and index (int64) to this .npz")
    ap.add_argument("--tokens-per-batch", type=int, help="default: the worker's default for the device")
    ap.add_argument("--rows-per-range", type=int, help="default: ScoreRequest's")
    ap.add_argument("--max-batch-rows", type=int, help="default: ScoreRequest's")
    ap.add_argument("--max-rows", type=int, help="stop after the range holding row N (a bounded look at a big input)")
    ap.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"], help="default: ScoreRequest's")
    ap.add_argument(
        "--embedding-rows",
        type=int,
        default=0,
        help="keep the representation of this many sampled rows and count the tokens, as the worker does (SPEC 14); 0: neither",
    )
    ap.add_argument("--embeddings-out", help="with --embedding-rows: write the sampled rows' embeddings here, as the gather joins them")
    a = ap.parse_args(argv)
    for name in ("rows_per_range", "max_batch_rows", "dtype"):
        if getattr(a, name) is None:
            setattr(a, name, request_default(name))

    t0 = time.perf_counter()
    from scorekeeper.worker.device import default_tokens_per_batch, tune_allocator
    from scorekeeper.worker.first_token import first_token_last_layer
    from scorekeeper.worker.model import load_model, resolve_dtype
    from scorekeeper.worker.replica import prepare_range, scored_ranges

    tune_allocator()  # as the worker does at its start

    device = torch.device(a.device)
    dtype = resolve_dtype(a.dtype, device)
    loaded = load_model(a.model, None, merge_adapter=False, dtype=dtype, device=device, trust_remote_code=False, max_length=None)
    first_token = first_token_last_layer(loaded.model)  # as run_replica does
    load_s = time.perf_counter() - t0
    load_cpu_s = time.process_time()  # every thread's CPU time: on a shared machine, steadier than the wall clock
    budget = a.tokens_per_batch or default_tokens_per_batch(device)

    first: list[float] = []

    def first_batch(module, inputs, output) -> None:  # time to the first batch's logits on the host
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        first.append(time.perf_counter() - t0)
        hook.remove()

    hook = loaded.model.register_forward_hook(first_batch)
    if a.embedding_rows:  # the sample is drawn over the rows scored (N), as the worker draws it over the run's
        from scorekeeper.representation import EMBEDDINGS_PARQUET
        from scorekeeper.worker.embeddings import Representation, token_counts_table

        total = pq.ParquetFile(a.input).metadata.num_rows
        if a.max_rows:
            total = min(total, -(-a.max_rows // a.rows_per_range) * a.rows_per_range)
        loaded.representation = Representation(loaded.model, a.embedding_rows, total, loaded.model_pad_token_id)
    gathered: pq.ParquetWriter | None = None
    embedded = 0
    source = read_ranges(a.input, a.rows_per_range)
    if a.max_rows:
        source = itertools.takewhile(lambda item: item[0].start < a.max_rows, source)
    prepared = (prepare_range(r, table, loaded, budget, a.max_batch_rows, pin=device.type == "cuda") for r, table in source)
    rows = useful = padded = batches = ranges = 0
    probs: list[np.ndarray] = []
    writes: list[Future] = []
    first_range_s = None
    with ThreadPoolExecutor(max_workers=1) as writer:
        for p, probabilities in scored_ranges(prepared, loaded, device):
            parts: tuple[pa.Table | None, ...] = ()
            if a.embedding_rows:
                counts = token_counts_table(loaded.tokenizer, p.rows_lengths.token_ids, p.rows_lengths.token_counts)
                parts = (p.embeddings, counts)
                if p.embeddings is not None:
                    embedded += p.embeddings.num_rows
                    if a.embeddings_out:
                        gathered = gathered or pq.ParquetWriter(a.embeddings_out, p.embeddings.schema, **EMBEDDINGS_PARQUET)
                        gathered.write_table(p.embeddings)
            writes.append(writer.submit(encode_shard, p.rows, probabilities, loaded.labels, parts))
            rows, ranges, batches = rows + p.range.rows, ranges + 1, batches + len(p.batches)
            useful, padded = useful + p.useful_tokens, padded + p.padded_tokens
            first_range_s = first_range_s or time.perf_counter() - t0
            if a.probs:
                probs.append(probabilities.astype(np.float32))
            writes = [w for w in writes if not (w.done() and w.result())]  # result() raises a failure here
        for w in writes:
            w.result()
    wall_s = time.perf_counter() - t0
    if gathered is not None:
        gathered.close()
    # The loop alone (after the model load): on a GPU, 20,000 rows take seconds, and the load
    # would dominate wall_s; the device targets are about the steady state.
    loop_s = wall_s - load_s
    loop_cpu_s = time.process_time() - load_cpu_s

    result = dict(
        method="c", rows=rows, useful_tokens=useful, padded_tokens=padded, wall_s=wall_s,
        first_batch_s=first[0] if first else None, first_range_s=first_range_s, load_s=load_s,
        loop_s=loop_s, loop_cpu_s=loop_cpu_s, loop_tokens_per_s=useful / loop_s if loop_s > 0 else None,
        batches=batches, ranges=ranges, rows_per_range=a.rows_per_range, tokens_per_batch=budget,
        max_batch_rows=a.max_batch_rows, dtype=str(dtype).replace("torch.", ""), device=str(device),
        threads=torch.get_num_threads(), attn=getattr(loaded.model.config, "_attn_implementation", None),
        first_token_last_layer=first_token, embedding_rows=a.embedding_rows, embedded_rows=embedded,
    )  # fmt: skip
    if a.probs:
        np.savez(
            a.probs,
            probs=np.concatenate(probs) if probs else np.zeros((0, len(loaded.labels)), np.float32),
            index=np.arange(rows, dtype=np.int64),
        )
        result["probs_path"] = a.probs
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What SPEC 14's worker side costs: the scoring step with and without the representation and the
token counts, alternated in one run, and the size of embeddings.parquet.

    python bench/embeddings.py [--device cpu|cuda] [--model NAME] [--rows N] [--max-rows N]
                               [--embedding-rows 20000] [--repeats 3] [--work DIR] [--json OUT]

Builds (cached in --work, as bench/run.py does) the corpus and the model, then runs the scoring
step (bench/step.py: the worker's own replica path in one process, each range's shard and its
parts encoded as Parquet) `--repeats` times each way, alternating (without, with, without, ...), in
fresh processes. The cost is the ratio of the medians of the scoring loop's time (`loop_s`, the
model load left out), measured against the baseline in the same run: on a shared machine only a
ratio means something; and of its CPU time (every thread's), which other processes on the machine
move less than the wall clock. The last run with the representation also writes the gathered
embeddings.parquet, whose size is reported (float32 vectors compress little: about 4 bytes per
value).

On a run of N rows every row is sampled while N <= embedding_rows: these runs (N up to 20,000)
are the most expensive case per row, every row's vector kept and written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run as bench_run  # noqa: E402


def step(model_dir: Path, data: Path, out: Path, args, embedding_rows: int, embeddings_out: Path | None) -> dict:
    cmd = [
        sys.executable, str(BENCH / "step.py"), "--model", str(model_dir), "--input", str(data), "--json", str(out),
        "--device", args.device, "--embedding-rows", str(embedding_rows),
        "--rows-per-range", str(args.rows_per_range), "--max-batch-rows", "1024", "--dtype", args.dtype,
    ]  # fmt: skip
    if args.max_rows:
        cmd += ["--max-rows", str(args.max_rows)]
    if args.tokens_per_batch:
        cmd += ["--tokens-per-batch", str(args.tokens_per_batch)]
    if embeddings_out is not None:
        cmd += ["--embeddings-out", str(embeddings_out)]
    began = time.perf_counter()
    done = subprocess.run(cmd, env=bench_run.child_env(), cwd=bench_run.REPO, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode:
        raise SystemExit(f"step failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(out.read_text())
    result["process_s"] = time.perf_counter() - began
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/embeddings.py", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=None, help="default: bert-tiny-bench on cpu, bert-base on cuda")
    ap.add_argument("--rows", type=int, default=20_000, help="corpus rows (N)")
    ap.add_argument("--max-rows", type=int, default=None, help="score only the ranges up to this row (a bounded look)")
    ap.add_argument("--embedding-rows", type=int, default=20_000)
    ap.add_argument("--rows-per-range", type=int, default=4096)
    ap.add_argument("--tokens-per-batch", type=int, default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--work", default=str(BENCH / ".work"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    model = args.model or ("bert-base" if args.device == "cuda" else "bert-tiny-bench")
    work = Path(args.work).resolve()
    data, meta, model_dir = bench_run.prepare(work, args.rows, model)
    results = work / "results"
    results.mkdir(parents=True, exist_ok=True)
    embeddings = work / f"embeddings-{model}.parquet"
    runs: dict[int, list[dict]] = {0: [], args.embedding_rows: []}
    for k in range(args.repeats):
        for rows in (0, args.embedding_rows):
            last = k == args.repeats - 1 and rows
            r = step(model_dir, data, results / f"emb-{model}-{rows}-{k}.json", args, rows, embeddings if last else None)
            runs[rows].append(r)
            print(
                f"  {model} embedding_rows={rows:>6} loop {r['loop_s']:8.2f} s  ({r['rows']} rows, {r['embedded_rows']} kept)", flush=True
            )
    without = statistics.median(r["loop_s"] for r in runs[0])
    with_ = statistics.median(r["loop_s"] for r in runs[args.embedding_rows])
    cpu_without = statistics.median(r["loop_cpu_s"] for r in runs[0])
    cpu_with = statistics.median(r["loop_cpu_s"] for r in runs[args.embedding_rows])
    kept = runs[args.embedding_rows][-1]["embedded_rows"]
    size = embeddings.stat().st_size
    import pyarrow.parquet as pq

    width = len(pq.read_table(embeddings).column("embedding")[0].as_py()) if kept else 0
    summary = dict(
        model=model, device=args.device, dtype=runs[0][0]["dtype"], rows=runs[0][0]["rows"], useful_tokens=runs[0][0]["useful_tokens"],
        embedding_rows=args.embedding_rows, embedded_rows=kept, width=width, repeats=args.repeats,
        loop_s_without=[r["loop_s"] for r in runs[0]], loop_s_with=[r["loop_s"] for r in runs[args.embedding_rows]],
        cost=with_ / without - 1, loop_cpu_s_without=[r["loop_cpu_s"] for r in runs[0]],
        loop_cpu_s_with=[r["loop_cpu_s"] for r in runs[args.embedding_rows]], cpu_cost=cpu_with / cpu_without - 1, embeddings_bytes=size, bytes_per_row=size / kept if kept else None,
        bytes_at_20000_rows=size / kept * 20_000 if kept else None,
    )  # fmt: skip
    print(
        f"{model} on {args.device} ({summary['dtype']}), {summary['rows']:,} rows: scoring loop {without:.2f} s without, "
        f"{with_:.2f} s with embeddings ({kept:,} rows, width {width}) and token counts: cost {summary['cost']:+.1%} "
        f"(CPU time {cpu_without:.1f} s and {cpu_with:.1f} s: {summary['cpu_cost']:+.1%}); "
        f"embeddings.parquet {size / 1e6:.1f} MB ({summary['bytes_per_row'] or 0:,.0f} bytes a row, "
        f"{(summary['bytes_at_20000_rows'] or 0) / 1e6:.1f} MB at 20,000 rows)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""scorekeeper against its peers, whole processes interleaved, with the median of pair ratios.

    python bench/peers.py                                   # the full measurement (about 15 minutes on 2 quiet cores)
    python bench/peers.py --rounds 1 --rows 2000 --small-rows 400    # a quick look
    python bench/peers.py --fixed-only --rounds 6                   # the fixed cost alone (about a minute)

On the bench BERT (bert-tiny-bench: 4 layers, hidden 256) and the bench corpus, every method is
one process timed from outside, start-up, model load and writing its output included:

    sk-fp32 / sk-bf16      `scorekeeper run --dtype float32|bfloat16` (bf16 with its default precision check)
    loop-fp32 / loop-bf16  the ten-line length-sorted torch loop (bench/plain_loop.py sorted)
    pipeline-fp32          transformers' `pipeline` (bench/plain_loop.py pipeline), on the small input only:
                           on 20,000 rows it would take most of the budget by itself
    fixed cost             `scorekeeper run` on a 1-row input: what any run pays before and after its rows

Each round runs every pair back to back, in alternating order (AB, then BA), so that a drift of
the machine's speed hits both sides of a pair alike; a pair's ratio is the peer's wall over
scorekeeper's (above 1: scorekeeper is faster), and the table shows the median over the rounds.
ONNX Runtime is not a dependency of the project and is left out (see bench/README.md, Peers).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run  # noqa: E402  (bench/run.py: the corpus, the model, a timed child process)

MODEL = "bert-tiny-bench"
# (scorekeeper's method, the peer's, the input, the target ratio or None)
PAIRS = [
    ("sk-bf16", "loop-bf16", "large", 1.3),
    ("sk-fp32", "loop-fp32", "small", 1.0),
    ("sk-bf16", "loop-bf16", "small", None),
    ("sk-fp32", "pipeline-fp32", "small", None),
]
FIXED_COST_TARGET_S = 6.0


def command(method: str, data: Path, model_dir: Path, out: Path) -> list[str]:
    kind, _, dtype = method.partition("-")
    dtype = {"fp32": "float32", "bf16": "bfloat16"}[dtype]
    if kind == "sk":
        shutil.rmtree(out, ignore_errors=True)  # a leftover run would be resumed, not scored
        cli = run.cli_command()
        assert cli, "scorekeeper is not installed in this environment (./setup.sh)"
        return cli + ["run", "--input-uri", str(data), "--model-uri", str(model_dir), "--output-uri", str(out), "--dtype", dtype]
    how = "sorted" if kind == "loop" else "pipeline"
    peer = [sys.executable, str(BENCH / "plain_loop.py"), how, "--model", str(model_dir), "--input", str(data), "--out", str(out) + ".npy"]
    return peer + (["--dtype", dtype] if kind == "loop" else [])


def timed(method: str, data: Path, model_dir: Path, work: Path, tag: str, timeout: float) -> dict:
    out = work / "peers" / f"{method}-{tag}"
    cmd = command(method, data, model_dir, out)
    result = run.run_child(cmd, work / "logs" / f"peers-{method}-{tag}.log", timeout)
    if result["rc"] != 0:
        raise SystemExit(f"{method} on {tag} failed (rc {result['rc']}): {result['last_line']} (see {result['log']})")
    print(f"    {method:14s} {tag:6s} {result['proc_s']:7.1f} s  other cores {result['other_cores'] or 0:.2f}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="the large input (default 20,000 rows)")
    ap.add_argument("--small-rows", type=int, default=2_000, help="the small input, a prefix of the large one (default 2,000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--work", type=Path, default=BENCH / ".work")
    ap.add_argument("--timeout", type=float, default=900.0, help="per process, seconds")
    ap.add_argument("--fixed-only", action="store_true", help="measure only the fixed cost (a 1-row run per round)")
    args = ap.parse_args(argv)

    import pyarrow.parquet as pq

    large, meta, model_dir = run.prepare(args.work, args.rows, MODEL)
    inputs = {"large": (large, args.rows)}
    for name, rows in (("small", args.small_rows), ("1-row", 1)):
        path = args.work / f"corpus-{args.rows}-prefix-{rows}.parquet"
        if not path.exists():
            pq.write_table(pq.read_table(large).slice(0, rows), path)
        inputs[name] = (path, rows)

    walls: dict[tuple[str, str], list[float]] = {}
    ratios: dict[int, list[float]] = {i: [] for i in range(len(PAIRS))}
    busy: list[float] = []
    pairs = [] if args.fixed_only else PAIRS
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", flush=True)
        for i, (ours, peer, size, _) in enumerate(pairs):
            data, _rows = inputs[size]
            order = (ours, peer) if r % 2 == 0 else (peer, ours)
            got = {m: timed(m, data, model_dir, args.work, size, args.timeout) for m in order}
            for m, res in got.items():
                walls.setdefault((m, size), []).append(res["proc_s"])
                busy.append(res["other_cores"] or 0.0)
            ratios[i].append(got[peer]["proc_s"] / got[ours]["proc_s"])
        fixed = timed("sk-fp32", inputs["1-row"][0], model_dir, args.work, "1-row", args.timeout)
        walls.setdefault(("sk-fp32", "1-row"), []).append(fixed["proc_s"])

    print()
    print(f"peers on {MODEL}, {args.rounds} interleaved round(s); large = {args.rows:,} rows, small = its first {args.small_rows:,}")
    print(
        "| comparison | input | scorekeeper wall s (median) | peer wall s (median) | ratio peer/scorekeeper (median of pairs) | target | verdict |"
    )
    print("|---|---|---|---|---|---|---|")
    for i, (ours, peer, size, target) in enumerate(pairs):
        ratio = statistics.median(ratios[i])
        verdict = "-" if target is None else ("PASS" if ratio >= target else "FAIL")
        print(
            f"| {ours} vs {peer} | {size} ({inputs[size][1]:,} rows) | {statistics.median(walls[(ours, size)]):.1f} | "
            f"{statistics.median(walls[(peer, size)]):.1f} | {ratio:.2f} ({', '.join(f'{x:.2f}' for x in ratios[i])}) | "
            f"{'>= ' + str(target) if target else '-'} | {verdict} |"
        )
    fixed = walls[("sk-fp32", "1-row")]
    fixed_s = statistics.median(fixed)
    print(
        f"| fixed cost: `scorekeeper run` on 1 row | 1-row | {fixed_s:.1f} ({', '.join(f'{x:.1f}' for x in fixed)}) | - | - | <= {FIXED_COST_TARGET_S:.0f} s | "
        f"{'PASS' if fixed_s <= FIXED_COST_TARGET_S else 'FAIL'} |"
    )
    worst = max(busy, default=0.0)
    if worst > 0.2:
        print(f"\nWARNING: other processes used up to {worst:.2f} cores during a method: the machine was shared; rerun on a quiet one.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The worker's GPU path checked on a GPU machine: bf16 against fp32, with throughput.

    python bench/gpu_path_check.py [--device cuda] [--models bert-base,qwen2-0.5b-like] [--rows 20000]
                                   [--out DIR] [--timeout 150]

For each model (random weights, bench/models.py) on the benchmark corpus (bench/corpus.py), runs
scorekeeper's scoring step (bench/step.py: the replica worker's own functions, GPU path: ranges
prepared ahead by a thread, pinned memory, logits kept on the device per range) twice, in float32
and in bfloat16, each in its own process, and reports:
- useful tokens/s of each (the figure next to bench/gpu_check.sh's table);
- the largest difference of any probability between the two (expected <= 1e-2);
- whether the predicted label agrees on every "clear" row (fp32's top two probabilities more than
  0.1 apart): a bf16 flip there would be a wrong answer, not rounding.
Needs torch, transformers, pyarrow, numpy, tokenizers: what the lent GPU machine has (no Prefect,
DuckDB or s3fs). Exits 1 when a check fails. On CPU (--device cpu --models bert-tiny-bench --rows
300) it runs the same code, as a quick check of the script itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import corpus  # noqa: E402
import models  # noqa: E402

CLEAR_MARGIN = 0.1
TOLERANCE = 1e-2


def step(model_dir: Path, data: Path, out: Path, device: str, dtype: str, timeout: float) -> dict:
    """bench/step.py in its own process; its JSON and its probabilities (row order)."""
    json_out, probs_out = out / f"{model_dir.name}-{dtype}.json", out / f"{model_dir.name}-{dtype}.npz"
    cmd = [sys.executable, str(BENCH / "step.py"), "--model", str(model_dir), "--input", str(data), "--json", str(json_out)]
    cmd += ["--device", device, "--dtype", dtype, "--probs", str(probs_out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{model_dir.name} {dtype}: bench/step.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(json_out.read_text())
    saved = np.load(probs_out)
    probs = np.empty_like(saved["probs"])
    probs[saved["index"]] = saved["probs"]
    return {"result": result, "probs": probs.astype(np.float64)}


def compare(fp32: np.ndarray, bf16: np.ndarray) -> dict:
    top2 = np.sort(fp32, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > CLEAR_MARGIN
    same = fp32.argmax(axis=1) == bf16.argmax(axis=1)
    return {
        "max_abs_diff": float(np.abs(fp32 - bf16).max()),
        "rows": int(len(fp32)),
        "clear_rows": int(clear.sum()),
        "clear_rows_argmax_differs": int((clear & ~same).sum()),
        "all_rows_argmax_differs": int((~same).sum()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="bert-base,qwen2-0.5b-like")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--work", default=str(BENCH / ".work"))
    ap.add_argument("--out", default=str(BENCH / ".work" / "gpu-path"))
    ap.add_argument("--timeout", type=float, default=150, help="seconds per scoring process")
    args = ap.parse_args(argv)
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = corpus.train_tokenizer(work / "tokenizer.json")
    data = work / f"corpus-{args.rows}.parquet"
    corpus.make_corpus(data, args.rows, tok)
    report, ok = [], True
    for name in [m for m in args.models.split(",") if m]:
        model_dir = models.build_model(name, work / "models" / name, tok)
        fp32 = step(model_dir, data, out, args.device, "float32", args.timeout)
        bf16 = step(model_dir, data, out, args.device, "bfloat16", args.timeout)
        row = {"model": name, "device": args.device} | compare(fp32["probs"], bf16["probs"])
        for dtype, run in (("fp32", fp32), ("bf16", bf16)):
            r = run["result"]
            row[f"{dtype}_useful_tokens_per_s"] = r.get("loop_tokens_per_s")  # after the model load
            row[f"{dtype}_rows_per_s"] = r["rows"] / r["loop_s"] if r.get("loop_s") else None
        row["passed"] = row["max_abs_diff"] <= TOLERANCE and row["clear_rows_argmax_differs"] == 0
        ok &= row["passed"]
        report.append(row)
        print(json.dumps(row), flush=True)
    (out / "gpu_path.json").write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

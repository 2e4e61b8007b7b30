#!/usr/bin/env bash
# The GPU half of the throughput benchmark, as one short script for a lent H200 (not run in CI).
#
#   bash bench/gpu_check.sh            # results under $OUT (default bench/.work/gpu-out)
#
# Runs (a) notebook loop, (b) sorted loop, (c) scorekeeper's scoring step and (e) the dense
# ceiling for bert-base and qwen2-0.5b-like on 20,000 rows, then (c) again for bert-base with a
# 256k-token budget, then the GPU path's bf16-vs-fp32 check (bench/gpu_path_check.py). Needs only torch, transformers, pyarrow (and numpy, tokenizers, which they
# bring); no Prefect, DuckDB or s3fs: (d) is not run. Planned to finish in under 5 minutes:
# corpus and models ~1 min, (a) on a 2,000-row sample, every method bounded by --timeout.
# The lent machine has no pydantic, which the worker imports: run `bash bench/gpu_pylib.sh` here first
# (its wheels unpacked into bench/.work/pylib, put on PYTHONPATH below) and carry bench/.work with the
# run. To save the corpus build, build bench/.work/tokenizer.json and bench/.work/corpus-20000.parquet
# (.json, .lengths.npy) here too (bench/run.py's prepare, or bench/corpus.py) and carry them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/.work/gpu-out}
PY=${PYTHON:-python}
WORK=${BENCH_WORK:-bench/.work}
mkdir -p "$OUT" "$WORK"
# The repository itself (bench/step.py imports scorekeeper, which is not installed there) and pydantic.
export PYTHONPATH="$PWD:$(cd "$WORK" && pwd)/pylib${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY - <<'PY'
import platform, torch, transformers, pyarrow
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "pyarrow", pyarrow.__version__, "cuda", torch.cuda.is_available(), "bf16", torch.cuda.is_bf16_supported())
for m in ("pydantic", "fsspec", "prefect", "duckdb"):
    try:
        __import__(m); print(m, "present")
    except ImportError:
        print(m, "absent")
PY
} 2>&1 | tee "$OUT/env.txt"

# One table per model; each method in its own process, each at most 90 s.
timeout 240 $PY bench/run.py --device cuda --model bert-base,qwen2-0.5b-like --methods a,b,c,e \
    --baseline-rows 2000 --timeout 90 --work "$WORK" --json "$OUT/results.json" 2>&1 | tee "$OUT/table.txt"
rc=$?

# bert-base's step with the budget the perfect-loader run found best (docs/facts.md: 256k tokens).
timeout 60 $PY bench/run.py --device cuda --model bert-base --methods c --tokens-per-batch 262144 \
    --timeout 50 --work "$WORK" --json "$OUT/results-256k.json" 2>&1 | tee "$OUT/table-256k.txt"

# The worker's GPU path, bf16 against fp32 (probabilities within 1e-2, no flip on a clear row).
timeout 200 $PY bench/gpu_path_check.py --device cuda --models bert-base,qwen2-0.5b-like --work "$WORK" \
    --out "$OUT/gpu-path" --timeout 90 2>&1 | tee "$OUT/gpu-path.txt"
rc=$(( rc | $? ))

cp "$WORK"/logs/*-c.log "$OUT/" 2>/dev/null || true
exit $rc

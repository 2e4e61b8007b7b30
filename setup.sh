#!/usr/bin/env bash
# One command from a fresh clone: a .venv in the repo root with everything installed, then the job
# run once on the embedded demo (demo data and model built locally, output in ./runs, Prefect's
# embedded API). `./setup.sh --no-demo` stops after the install (CI uses it).
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "setup: Python >= 3.11 is required (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# torch first: without a GPU take the CPU build (torch==2.13.0 lies on these machines' disk), so
# the project's open torch range accepts it instead of pulling a multi-GB CUDA build (docs/facts.md).
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        "${PIP[@]}" install "${TORCH_SPEC:-torch}"
    else
        "${PIP[@]}" install "${TORCH_SPEC:-torch==2.13.0}"
    fi
fi
"${PIP[@]}" install -e ".[test]"

if [ "${1:-}" = "--no-demo" ]; then
    exit 0
fi
export PREFECT_SERVER_ANALYTICS_ENABLED=false
.venv/bin/python -m scorekeeper.demo build demo
.venv/bin/scorekeeper run \
    --input-uri demo/data/reviews.csv \
    --model-uri demo/model \
    --output-uri runs \
    --id-column review_id \
    --slice-columns category \
    --run-name demo
echo "setup: done. The demo run's report: runs/demo/report/report.html"

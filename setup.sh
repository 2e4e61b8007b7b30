#!/usr/bin/env bash
# One command from a fresh clone: a .venv in the repo root with everything installed, then the demo:
# generated reviews, the real all-MiniLM-L6-v2 encoder fine-tuned with a LoRA adapter (once, cached
# in demo/), scored twice into ./runs through Prefect's embedded API: first with the adapter after its
# first epoch, then with the final adapter compared to that first run. `./setup.sh --no-demo` stops
# after the install.
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
"${PIP[@]}" install -e ".[test,demo]"

# Headless Chromium for the report's browser tests (tests/test_report_browser.py), which skip,
# saying so, where it is missing: Debian's package, when this runs as root with apt-get.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium for the report's browser tests"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
        || echo "setup: chromium could not be installed; the browser tests will skip" >&2
fi

if [ "${1:-}" = "--no-demo" ]; then
    exit 0
fi
export PREFECT_SERVER_ANALYTICS_ENABLED=false
.venv/bin/scorekeeper demo demo
# The demo's runs are scored afresh each time: a run name that already exists would resume, and a
# rebuilt demo (another recipe) is another model, which a resume refuses.
rm -rf runs/demo-1 runs/demo-2
DEMO_RUN=(.venv/bin/scorekeeper run
    --input-uri demo/data/reviews.csv
    --model-uri demo/model
    --output-uri runs
    --id-column review_id
    --slice-columns category,sentiment,length)
"${DEMO_RUN[@]}" --adapter-uri demo/adapter-epoch1 --run-name demo-1
"${DEMO_RUN[@]}" --adapter-uri demo/adapter --run-name demo-2 --compare-to previous
echo "setup: done. Reports: runs/demo-2/report/report.html (final adapter, compared with demo-1), runs/demo-1/report/report.html (after one epoch)"

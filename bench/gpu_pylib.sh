#!/usr/bin/env bash
# pydantic for the lent GPU machine. It has torch, transformers, accelerate, peft and pyarrow but no
# pydantic, which the worker's typed settings and summaries need (scorekeeper/scoring_summary.py):
# this downloads pydantic's wheels for that machine's Python (3.12 by default) and unpacks them into
# bench/.work/pylib, which bench/gpu_check.sh puts on PYTHONPATH. Carry bench/.work with the run.
#
#   bash bench/gpu_pylib.sh [PYTHON_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
.venv/bin/python -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "$version" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    pydantic -d "$wheels"
mkdir -p bench/.work/pylib
for wheel in "$wheels"/*.whl; do
    .venv/bin/python -m zipfile -e "$wheel" bench/.work/pylib
done
echo "bench/.work/pylib: $(ls "$wheels" | tr '\n' ' ')"

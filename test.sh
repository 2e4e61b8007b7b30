#!/usr/bin/env bash
# The whole check: lint (ruff check, ruff format --check), types (scripts/typecheck.sh), then the test suite, every tier. Arguments go to pytest.
# The suite runs on two pytest-xdist workers, a test file per worker at a time (--dist loadfile keeps
# a module's fixtures in one process): most of its wall time is subprocesses starting and servers
# answering, which two workers overlap on 2 cores. SCOREKEEPER_TEST_WORKERS=0 runs it in one process.
set -euo pipefail
cd "$(dirname "$0")"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
scripts/typecheck.sh
# Every tier: pyproject's addopts keep bare `pytest` to the fast one; a -m among the arguments wins.
every_tier=(-m "integration or slow or not (integration or slow)")
workers=${SCOREKEEPER_TEST_WORKERS:-2}
if [ "$workers" = 0 ]; then
    exec .venv/bin/python -m pytest "${every_tier[@]}" "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "${every_tier[@]}" "$@"

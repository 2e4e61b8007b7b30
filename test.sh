#!/usr/bin/env bash
# The whole check: lint (ruff check, ruff format --check), types (scripts/typecheck.sh), then the test suite. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
scripts/typecheck.sh
exec .venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# The whole check: lint (ruff check, ruff format --check), then the test suite. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"

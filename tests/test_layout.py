"""The import rules of the layout (docs/layout.md), checked in fresh interpreters.

* `scorekeeper.worker` (every module under it) is what `accelerate launch` runs: it imports
  neither Prefect nor DuckDB, so it runs anywhere torch runs.
* The library modules of `scorekeeper/` import no Prefect when imported (the CLI imports it once
  its temporary server is on the way): only `scorekeeper.tasks` and `scorekeeper.flows` do.
* The flow and its tasks import no torch: it loads in the scoring processes.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import scorekeeper
import scorekeeper.worker

pytestmark = pytest.mark.slow  # each check imports the whole package in a fresh interpreter

# Prefect's own layer: installed as scorekeeper.tasks / scorekeeper.flows from the top-level folders.
PREFECT_LAYER = {"tasks", "flows"}


def _modules(package) -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."))


def _imported_after_each(modules: list[str], watched: tuple[str, ...]) -> dict[str, list[str]]:
    """Import `modules` one after another in a fresh interpreter; for each, which of `watched` had
    been imported once it was (the first module that pulls one in is the one named)."""
    code = (
        "import importlib, json, sys\n"
        f"watched = {watched!r}\n"
        "seen = {}\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    seen[name] = [w for w in watched if w in sys.modules]\n"
        "print(json.dumps(seen))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_worker_imports_no_prefect_and_no_duckdb():
    modules = _modules(scorekeeper.worker)
    assert "scorekeeper.worker.families" in modules and "scorekeeper.worker.__main__" in modules
    seen = _imported_after_each(["scorekeeper.worker", *modules], ("prefect", "duckdb"))
    assert {name: found for name, found in seen.items() if found} == {}


def test_the_library_imports_no_prefect():
    outside = tuple(f"scorekeeper.{name}" for name in PREFECT_LAYER | {"worker"})
    modules = [m for m in _modules(scorekeeper) if not m.startswith(outside)]
    assert {"scorekeeper.params", "scorekeeper.storage", "scorekeeper.cli"} <= set(modules)
    seen = _imported_after_each(["scorekeeper", *modules], ("prefect",))
    assert {name: found for name, found in seen.items() if found} == {}


def test_the_flow_and_its_tasks_import_no_torch():
    """The flow process only plans and follows: torch and transformers load in the scoring
    processes, so the flow starts fast and never holds a CUDA context."""
    import scorekeeper.flows
    import scorekeeper.tasks

    modules = _modules(scorekeeper.tasks) + _modules(scorekeeper.flows)
    assert "scorekeeper.flows.score" in modules and "scorekeeper.tasks.plan" in modules
    seen = _imported_after_each(modules, ("torch", "transformers"))
    assert {name: found for name, found in seen.items() if found} == {}

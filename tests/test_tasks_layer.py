"""The Prefect layer's typing: every task that takes the run's context says it is a RunContext,
and mypy checks the bodies of unannotated functions too (check_untyped_defs)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_tasks_context_is_a_run_context():
    seen = []
    for path in sorted((ROOT / "tasks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(a.arg == "context" for a in node.args.args):
                (arg,) = [a for a in node.args.args if a.arg == "context"]
                seen.append(node.name)
                assert arg.annotation is not None and ast.unparse(arg.annotation) == "RunContext", f"{path.name}: {node.name}"
    assert {"evaluate_task", "report_task", "read_inputs_task", "gather_task"} <= set(seen)


def test_mypy_checks_untyped_function_bodies():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["check_untyped_defs"] is True

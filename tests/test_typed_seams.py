"""The DuckDB connection is typed once (scorekeeper/evaluation/duck.py `Connection`) and every function
of production code that takes one says so: no untyped `con` for mypy (scripts/typecheck.sh) to pass
over unchecked."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _connections_not_typed() -> list[str]:
    found = []
    for path in sorted(p for folder in ("scorekeeper", "tasks", "flows") for p in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                    if arg.arg == "con" and (arg.annotation is None or ast.unparse(arg.annotation) != "Connection"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return found


def test_every_function_taking_a_connection_types_it_as_duck_connection():
    assert not _connections_not_typed()

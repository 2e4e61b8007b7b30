"""The project's import graph, read from the source with `ast`: every import statement counts,
function-local and `TYPE_CHECKING` ones included. A cycle hidden behind a function-local import
works until someone hoists that import, and then the package stops importing; so none may exist.

Pure and fast: nothing is imported, the files are parsed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# One import namespace, three folders (pyproject.toml's package-dir).
FOLDERS = {"scorekeeper": ROOT / "scorekeeper", "scorekeeper.tasks": ROOT / "tasks", "scorekeeper.flows": ROOT / "flows"}

# None allowed: an entry here would name a cycle or a worker import still being broken.
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_WORKER_IMPORTS: set[tuple[str, str]] = set()


def project_modules() -> dict[str, Path]:
    """Every module of the project by its import name."""
    modules = {}
    for prefix, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if prefix == "scorekeeper" and parts[0] in ("tasks", "flows"):
                continue  # not installed from there
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((prefix, *parts))] = path
    return modules


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that importing `name` may import, wherever in the file the import is.

    `from a.b import c` imports the module a.b.c when there is one, else a.b; importing a module
    imports its packages first, except those `name` lies in (they are already being imported)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    found = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]  # `import a.b.c` where c is a name, or outside the project
        if not target:
            continue
        found.add(target)
        found.update(a for a in _ancestors(target) if a in modules)
    own = {name, *_ancestors(name)}
    return found - own


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_local_imports():
    """The reader is not blind to the imports the test is about: a function-local one is an edge."""
    graph = import_graph()
    assert "scorekeeper.worker.replica" in graph["scorekeeper.worker.__main__"]  # imported inside main()
    assert "scorekeeper.params" in graph["scorekeeper.tasks.plan"]


def test_a_cycle_is_found():
    a = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(a) == [["p.a", "p.b", "p.c"]]
    assert cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_no_import_cycle_among_the_projects_modules():
    found = [c for c in cycles(import_graph()) if frozenset(c) not in KNOWN_CYCLES]
    assert found == [], "import cycles (break each by moving what both sides need to where it belongs):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_prefect_layer_never_imports_the_worker():
    """tasks/ and flows/ speak to the scoring processes through the boundary records
    (scorekeeper/boundary.py, scorekeeper/run_folder.py) only; the worker package is torch's side."""
    known = KNOWN_WORKER_IMPORTS | {(name, a) for name, target in KNOWN_WORKER_IMPORTS for a in _ancestors(target)}
    offending = sorted(
        (name, target)
        for name, targets in import_graph().items()
        if name.startswith(("scorekeeper.tasks", "scorekeeper.flows"))
        for target in targets
        if (target == "scorekeeper.worker" or target.startswith("scorekeeper.worker.")) and (name, target) not in known
    )
    assert offending == []

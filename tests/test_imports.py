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


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module importing `start` may import, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# The model families' registry: torch-free data the flow checks a model folder's config with
# (scorekeeper/model_folder.py); it lives beside the worker that uses the families' torch side.
FAMILY_REGISTRY = {
    "scorekeeper.worker",
    "scorekeeper.worker.families",
    "scorekeeper.worker.families.base",
    "scorekeeper.worker.families.encoders",
    "scorekeeper.worker.families.decoders",
}


def test_the_prefect_layer_never_imports_the_worker():
    """tasks/ and flows/ speak to the scoring processes through the boundary records
    (scorekeeper/boundary.py, scorekeeper/run_folder.py) only; the worker package is torch's side.
    Not directly, and not through any module they import, but for the families' registry."""
    known = KNOWN_WORKER_IMPORTS | {(name, a) for name, target in KNOWN_WORKER_IMPORTS for a in _ancestors(target)}
    graph = import_graph()
    worker = ("scorekeeper.worker", "scorekeeper.worker.")
    layer = [name for name in graph if name.startswith(("scorekeeper.tasks", "scorekeeper.flows"))]
    direct = sorted((n, t) for n in layer for t in graph[n] if t == worker[0] or t.startswith(worker[1]))
    through = sorted(
        (n, t) for n in layer for t in reachable(graph, n) if (t == worker[0] or t.startswith(worker[1])) and t not in FAMILY_REGISTRY
    )
    assert [d for d in direct if d not in known] == [] and through == []


def test_reachable_follows_imports_of_imports():
    assert reachable({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set()}, "p.a") == {"p.b", "p.c"}


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of every module `path` imports, function-local ones included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_duckdb_is_imported_only_by_the_evaluation_package():
    """The evaluation package (scorekeeper/evaluation/) owns DuckDB: the connection and its settings
    are duck.py's; the read step's duplicate-id check and the retries reach it through duck.py."""
    users = sorted(name for name, path in project_modules().items() if "duckdb" in third_party_imports(path))
    assert users and all(name.startswith("scorekeeper.evaluation.") for name in users), users


def test_the_evaluation_and_the_report_import_no_prefect_no_torch_and_no_task():
    graph = import_graph()
    for name, path in project_modules().items():
        if name.startswith(("scorekeeper.evaluation", "scorekeeper.report")):
            assert not third_party_imports(path) & {"prefect", "torch", "transformers"}, name
            assert not {t for t in graph[name] if t.startswith(("scorekeeper.tasks", "scorekeeper.flows", "scorekeeper.worker"))}, name


def test_at_most_four_modules_of_tasks_never_import_prefect():
    """tasks/ is the Prefect layer: its @task wrappers and the few I/O helpers they share."""
    plain = sorted(p.name for p in FOLDERS["scorekeeper.tasks"].glob("*.py") if "prefect" not in third_party_imports(p))
    assert len(plain) <= 4, plain


def test_the_document_imports_nothing_of_the_evaluation():
    """The metrics document and registry (scorekeeper/metrics/) lie beneath the evaluation that fills
    them: the vocabulary they record (how the truth was matched: metrics/truth_matching.py) lives with
    them, so no package cycle runs metrics -> evaluation -> metrics."""
    graph = import_graph()
    into = sorted(
        (n, t) for n in graph if n.startswith("scorekeeper.metrics") for t in reachable(graph, n) if t.startswith("scorekeeper.evaluation")
    )
    assert into == []

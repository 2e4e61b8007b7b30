"""The house's numbers (issue 34) of the source tree at one or more commits, read from `git archive`
into a temporary folder (no checkout), with `ast` and regular expressions; nothing of the tree is
imported or run.

    .venv/bin/python bench/house.py 7e31e3b HEAD       # one column per commit
    .venv/bin/python bench/house.py --list HEAD        # and every place each number counts

What each row counts (production code is scorekeeper/, flows/ and tasks/):

- kind comparisons: places that name a kind of head (a `HeadKind` member, `HeadKind("...")`, a kind's
  spelling compared with, used as a dict key, looked up, or matched: tests/test_kind_spec.py's
  definition) in evaluation/, report/, tasks/ and flows/, outside the three kind modules
  (evaluation/<kind>.py) and the kind registry (evaluation/kinds.py).
- private cross-module imports: names starting with one underscore imported by a module of
  scorekeeper/ from another module of scorekeeper/ (`from .x import _y`,
  `from scorekeeper.x import _y`), plus `module._y` attribute reads on a scorekeeper module imported
  whole.
- tables made in Python: `CREATE [OR REPLACE] [TEMP] TABLE|VIEW|MACRO` inside a string constant of
  a .py file of scorekeeper/evaluation/, scorekeeper/report/ and tasks/ (each occurrence once).
- SQL folders under the order check: the folders of scorekeeper/evaluation/sql/ whose every file
  tests/test_sql_files.py's run-time check requires to have run (its `DRIVER_FOLDERS`; `ORDER_CHECKED`
  when that names every folder), of all the folders.
- functions over 60 / over 80 lines: every `def` (methods and nested ones included) of production
  code whose span, `def` line to last line (decorators left out), is longer than 60 / 80 lines.
- string-key reads: `x["key"]` (read, not assigned) and `x.get("key", ...)` with a string literal key
  in production code, where `x`'s root name holds the run's facts, a recorded reference or the
  gather's result as a dict: one of CARRIERS below. The total of literal-key reads in production
  code is printed beside it for scale.
- typed seams: `evaluate_run`'s parameters; methods of the kind protocol (`HeadEvaluation`) whose
  return annotation is an untyped dict (a bare `dict`, or one holding `Any`); parameters named `con`
  not annotated `Connection` (evaluation/duck.py's); in scorekeeper/worker/, parameters and fields
  named `head` annotated `str`.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("scorekeeper", "flows", "tasks")
KIND_SCOPE = ("scorekeeper/evaluation", "scorekeeper/report", "tasks", "flows")
KIND_MEMBERS = {"SINGLE_LABEL": "single_label", "MULTI_LABEL": "multi_label", "REGRESSION": "regression"}
KIND_MODULES = {f"scorekeeper/evaluation/{name}.py" for name in (*KIND_MEMBERS.values(), "kinds")}
TABLE_SCOPE = ("scorekeeper/evaluation", "scorekeeper/report", "tasks")
CREATE = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO)\b", re.IGNORECASE)
# The names that hold, as a dict, the run's facts (run_info, the request's public dict and the
# gather's figures), a recorded reference run's metrics (recorded, reference, ref) or the gather's
# result (gathered).
# A return annotation that leaves the values untyped: a bare `dict`, or one holding `Any`.
UNTYPED_DICT = re.compile(r"\bdict\b(?!\[)|\bAny\b")
CARRIERS = {"run_info", "facts", "gathered", "recorded", "reference", "ref", "reference_metrics"}


def tree_at(commit: str, into: Path) -> Path:
    """The commit's files under `into` (git archive, no checkout)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def sources(root: Path, folders: tuple[str, ...]) -> Iterator[tuple[str, ast.Module]]:
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            yield rel, ast.parse(path.read_text(), rel)


def _kind_constants(node: ast.AST) -> list[str]:
    spellings = set(KIND_MEMBERS.values())
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in spellings]


def kind_names(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for every place the module names a kind of head: a `HeadKind` member (through
    any alias), `HeadKind("...")`, or a kind's spelling compared with, used as a key, looked up or
    matched. tests/test_kind_spec.py holds the evaluation to it, and this bench counts it."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in KIND_MEMBERS:
            found.append((node.lineno, f"HeadKind.{node.attr}"))
        elif isinstance(node, ast.Call) and _called(node) == "HeadKind" and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, f"HeadKind({node.args[0].value!r})"))
        elif isinstance(node, ast.Compare):
            found += [(node.lineno, f"a comparison with {c!r}") for side in (node.left, *node.comparators) for c in _kind_constants(side)]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, f"a key {c!r}") for key in node.keys if key is not None for c in _kind_constants(key)]
        elif isinstance(node, ast.Subscript):
            found += [(node.lineno, f"a lookup of {c!r}") for c in _kind_constants(node.slice)]
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, f"a case {c!r}") for c in _kind_constants(node.pattern)]
    return sorted(found)


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _module_of(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _imported_module(rel: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = _module_of(rel).split(".")
    if not rel.endswith("__init__.py"):
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(rel: str, tree: ast.Module, modules: set[str]) -> list[tuple[int, str]]:
    """`_name`s this scorekeeper module takes from another scorekeeper module."""
    found: list[tuple[int, str]] = []
    whole: dict[str, str] = {}  # local name -> scorekeeper module imported whole
    me = _module_of(rel)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _imported_module(rel, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    whole[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif source in modules and source != me and alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((node.lineno, f"from {source} import {alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    whole[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in whole
            and whole[node.value.id] != me
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append((node.lineno, f"{whole[node.value.id]}.{node.attr}"))
    return sorted(found)


def tables_in_python(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(node.lineno, " ".join(m.group(0).split())) for m in CREATE.finditer(node.value)]
    return sorted(found)


def long_functions(tree: ast.Module) -> list[tuple[int, str, int]]:
    return [
        (node.lineno, node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def key_reads(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, root name, key) of every literal-key read."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.append((node.lineno, _root(node.value) or "?", node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, _root(node.func.value) or "?", first.value))
    return sorted(found)


def order_checked(root: Path) -> tuple[set[str], set[str]]:
    """(folders under the run-time order check, every folder of evaluation/sql/)."""
    sql = root / "scorekeeper" / "evaluation" / "sql"
    folders = {p.parent.name for p in sql.rglob("*.sql")}
    test = root / "tests" / "test_sql_files.py"
    for node in ast.walk(ast.parse(test.read_text())):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("DRIVER_FOLDERS", "ORDER_CHECKED") for t in node.targets
        ):
            try:
                return set(ast.literal_eval(node.value)) & folders, folders
            except ValueError:
                return folders, folders  # computed from the folders themselves: every one
    return set(), folders


def seams(rel: str, tree: ast.Module) -> dict[str, list[str]]:
    """The typed seams' places: evaluate_run's parameters, kind protocol methods returning a dict,
    `con` parameters not typed as duck.Connection, the worker's head kinds held as strings."""
    found: dict[str, list[str]] = {"evaluate_run": [], "protocol": [], "con": [], "head": []}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if node.name == "evaluate_run":
                found["evaluate_run"] += [f"{rel}:{node.lineno}: {a.arg}" for a in arguments]
            found["con"] += [f"{rel}:{node.lineno}: {node.name}" for a in arguments if a.arg == "con" and _annotation(a) != "Connection"]
            if rel.startswith("scorekeeper/worker/"):
                found["head"] += [
                    f"{rel}:{node.lineno}: {node.name}({a.arg})" for a in arguments if a.arg == "head" and _annotation(a) == "str"
                ]
        if isinstance(node, ast.ClassDef) and node.name == "HeadEvaluation":
            found["protocol"] += [
                f"{rel}:{f.lineno}: {f.name}"
                for f in node.body
                if isinstance(f, ast.FunctionDef) and f.returns is not None and UNTYPED_DICT.search(ast.unparse(f.returns))
            ]
        if isinstance(node, ast.AnnAssign) and rel.startswith("scorekeeper/worker/") and ast.unparse(node.target) == "head":
            if ast.unparse(node.annotation) == "str":
                found["head"].append(f"{rel}:{node.lineno}: head field")
    return found


def _annotation(arg: ast.arg) -> str | None:
    return ast.unparse(arg.annotation) if arg.annotation is not None else None


def measure(root: Path) -> dict[str, tuple[str, list[str]]]:
    """Each row's figure and the places it counts."""
    modules = {_module_of(rel) for rel, _ in sources(root, ("scorekeeper",))}
    kinds, private, tables, lengths, carried, all_reads = [], [], [], [], [], 0
    typed: dict[str, list[str]] = {"evaluate_run": [], "protocol": [], "con": [], "head": []}
    for rel, tree in sources(root, PRODUCTION):
        if rel.startswith(KIND_SCOPE) and rel not in KIND_MODULES:
            kinds += [f"{rel}:{line}: {what}" for line, what in kind_names(tree)]
        if rel.startswith("scorekeeper/"):
            private += [f"{rel}:{line}: {what}" for line, what in private_imports(rel, tree, modules)]
        if rel.startswith(TABLE_SCOPE):
            tables += [f"{rel}:{line}: {what}" for line, what in tables_in_python(tree)]
        lengths += [(n, f"{rel}:{line}: {name} ({n} lines)") for line, name, n in long_functions(tree)]
        reads = key_reads(tree)
        all_reads += len(reads)
        carried += [f"{rel}:{line}: {name}[{key!r}]" for line, name, key in reads if name in CARRIERS]
        for seam, places in seams(rel, tree).items():
            typed[seam] += places
    checked, folders = order_checked(root)
    over60 = [text for n, text in sorted(lengths, reverse=True) if n > 60]
    over80 = [text for n, text in sorted(lengths, reverse=True) if n > 80]
    return {
        "kind comparisons outside the kind modules": (str(len(kinds)), kinds),
        "files naming a kind outside them": (str(len({k.split(":")[0] for k in kinds})), []),
        "private cross-module imports": (str(len(private)), private),
        "tables made in Python": (str(len(tables)), tables),
        "SQL folders under the order check": (f"{len(checked)} of {len(folders)}", sorted(folders - checked)),
        "functions over 60 lines": (str(len(over60)), over60),
        "functions over 80 lines": (str(len(over80)), over80),
        "string-key reads (run facts, references, gather)": (str(len(carried)), carried),
        "literal-key reads, all production code": (str(all_reads), []),
        "evaluate_run parameters": (str(len(typed["evaluate_run"])), typed["evaluate_run"]),
        "kind protocol methods returning an untyped dict": (str(len(typed["protocol"])), typed["protocol"]),
        "`con` parameters not typed duck.Connection": (str(len(typed["con"])), typed["con"]),
        "the worker's head kinds typed `str`": (str(len(typed["head"])), typed["head"]),
    }


def main(argv: list[str]) -> int:
    listing = "--list" in argv
    commits = [a for a in argv if a != "--list"] or ["7e31e3b", "HEAD"]
    columns = {}
    for commit in commits:
        with tempfile.TemporaryDirectory() as tmp:
            columns[commit] = measure(tree_at(commit, Path(tmp)))
    rows = list(next(iter(columns.values())))
    names = [
        subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", c], capture_output=True, text=True).stdout.strip() for c in commits
    ]
    print("| | " + " | ".join(f"{c} ({n})" if c != n else c for c, n in zip(commits, names, strict=True)) + " |")
    print("|---|" + "---|" * len(commits))
    for row in rows:
        print(f"| {row} | " + " | ".join(columns[c][row][0] for c in commits) + " |")
    if listing:
        for commit in commits:
            for row in rows:
                if columns[commit][row][1]:
                    print(f"\n## {commit}: {row}")
                    print("\n".join(columns[commit][row][1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

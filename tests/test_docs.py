"""The documentation held to the code: the generated pages, the failure-modes page's tests, every path
the README and docs/ name, and the README's size. Fast: files and imports only, no servers."""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import subprocess
from pathlib import Path

import pytest

from scorekeeper import docs

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted((REPO / "docs").glob("*.md"))
README = REPO / "README.md"


@pytest.mark.parametrize("page", sorted(docs.PAGES))
def test_a_generated_page_is_what_the_code_gives(page):
    expected = docs.PAGES[page]()
    committed = (REPO / page).read_text() if (REPO / page).is_file() else ""
    assert committed == expected, f"{page} differs from the code: run `{docs.REGENERATE}` and commit the page"


def test_the_check_command_names_a_stale_page(tmp_path):
    for page, build in docs.PAGES.items():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(build())
    assert docs.stale_pages(tmp_path) == []
    (tmp_path / "docs/parameters.md").write_text(docs.parameters_page().replace("`input_uri`", "`input_url`"))
    assert docs.stale_pages(tmp_path) == ["docs/parameters.md"]


def test_the_parameters_page_has_every_field_with_its_description_and_option():
    from scorekeeper.params import ScoreRequest

    page = docs.parameters_page()
    for name, field in ScoreRequest.model_fields.items():
        section = page.split(f"\n## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        assert f"`--{name.replace('_', '-')}" in section
        assert _rendered_text(section.strip().split("\n\n")[-1]) == " ".join((field.description or "").split())


def _rendered_text(markdown: str) -> str:
    """What a markdown viewer shows of a paragraph: the text, without tags."""
    import html

    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(markdown)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", rendered)).split())


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_table_row_has_its_headers_cells(page):
    """An unescaped `|` in a cell (a default, a delimiter) would shift the row's cells."""
    header = None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line)) - 2
        if header is None:
            header = cells
        assert cells == header, f"{page.name}:{number} has {cells} cells, its header {header}: {line[:100]}"


def test_the_metrics_page_has_every_key_metric_and_gate_name():
    from scorekeeper.gates import GATE_METRICS
    from scorekeeper.metrics.document import MetricsDocument
    from scorekeeper.metrics.registry import METRICS

    page = docs.metrics_page()
    keys = page.split("## Keys", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `([a-z_0-9]+)` \|", keys, re.M) == list(MetricsDocument.KEYS)
    table = page.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `([a-z_0-9]+)` \|", table, re.M) == [m.name for m in METRICS]
    gates = page.split("## Names a quality gate accepts", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`([a-z_0-9]+)`", gates)) >= set(GATE_METRICS)


def test_the_layout_page_lists_every_module_and_sql_file_of_the_tree():
    page = docs.layout_page()
    for folder in docs.code_folders():
        relative = folder.relative_to(REPO).as_posix() + "/"
        section = page.split(f"\n## `{relative}`\n", 1)[1].split("\n## ", 1)[0]
        listed = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
        files = {p.name for p in folder.iterdir() if p.suffix in (".py", ".sql") and p.name != "__init__.py"}
        assert files <= listed, f"{relative}: not on the page: {sorted(files - listed)}"


def test_the_layout_page_describes_the_repositorys_top_level():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    top = {name.split("/")[0] + ("/" if "/" in name else "") for name in tracked}
    described = {path for path, _ in docs.TOP_LEVEL}
    assert top <= described, f"top-level entries the layout page does not describe: {sorted(top - described)}"
    assert not described - top, f"described but not in the tree: {sorted(described - top)}"


def test_a_module_without_a_docstring_is_refused_by_the_layout_page(tmp_path):
    module = tmp_path / "bare.py"
    module.write_text("X = 1\n")
    with pytest.raises(ValueError, match="has no docstring"):
        docs._module_summary(module)


# -- the failure-modes page ---------------------------------------------------------------------------


@functools.cache
def _defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _named_tests(cell: str) -> list[tuple[str, str | None]]:
    """(file, test or None) for each `tests/x.py`, `tests/x.py::name` and `::name` (of the file before) in a cell."""
    found: list[tuple[str, str | None]] = []
    current = None
    for file, name in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+\*?))?`", cell):
        if file:
            current = file
        if file or name:
            assert current, f"`::{name}` names no file before it in: {cell}"
            found.append((current, name or None))
    return found


def test_every_failure_mode_names_tests_that_exist():
    page = (REPO / "docs" / "failure-modes.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| failure |")]
    assert len(rows) > 100
    missing = []
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert len(cells) == 3, f"a failure-modes row without three cells: {row[:120]}"
        named = _named_tests(cells[2])
        assert named, f"a failure mode without a test: {cells[0]}"
        for file, name in named:
            path = REPO / file
            if not path.is_file():
                missing.append(file)
            elif name and not fnmatch.filter(_defined_tests(path), name):
                missing.append(f"{file}::{name}")
    assert not missing, "docs/failure-modes.md names tests that do not exist: " + ", ".join(missing)


def test_a_failure_mode_naming_a_missing_test_is_found():
    assert _named_tests("`tests/test_read.py::test_a`, `::test_b`; `tests/test_faults.py`") == [
        ("tests/test_read.py", "test_a"),
        ("tests/test_read.py", "test_b"),
        ("tests/test_faults.py", None),
    ]


# -- paths, size, history --------------------------------------------------------------------------------

_PATH = re.compile(r"(?<![\w./-])((?:scorekeeper|tasks|flows|tests|bench|scripts|infra|docs)/[\w./*-]*)")


def _named_paths(text: str) -> set[str]:
    paths = set()
    for match in _PATH.findall(text):
        path = match.rstrip(".,;:)")
        if path.endswith("/") or "." in path.rsplit("/", 1)[-1]:
            paths.add(path)
    return paths


def _exists(path: str) -> bool:
    if "*" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


@pytest.mark.parametrize("page", [README, *PAGES, REPO / "tests" / "README.md"], ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page):
    missing = sorted(p for p in _named_paths(page.read_text()) if not _exists(p))
    assert not missing, f"{page.relative_to(REPO)} names paths that are not in the tree: {missing}"


def test_the_readme_is_a_guide_of_at_most_350_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 350, f"README.md has {len(lines)} lines: move reference material to docs/"
    for section in ("## Quick start", "## Running it", "## Deployments (Prefect)", "## From one machine to many"):
        assert section in lines


def test_the_quick_start_is_two_commands():
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["./setup.sh", "./test.sh"]


# Phrases that tell history rather than what is.
_HISTORY = re.compile(r"\b(it was a|used to be|so far|no longer|session \d|was fixed|we changed)\b", re.IGNORECASE)


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_a_page_says_what_is_not_its_history(page):
    found = [line.strip()[:120] for line in page.read_text().splitlines() if _HISTORY.search(line)]
    assert not found, f"{page.relative_to(REPO)} tells history: {found}"


def test_docs_readme_lists_every_page():
    index = (REPO / "docs" / "README.md").read_text()
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    assert {p.name for p in PAGES} - {"README.md"} <= listed


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", [README, *PAGES, REPO / "tests" / "README.md", REPO / "bench" / "README.md"], ids=lambda p: p.name)
def test_every_link_between_the_pages_arrives(page):
    broken = []
    text = re.sub(r"`[^`\n]*`", "", page.read_text())  # code spans hold examples, not links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        arrived = (page.parent / file).resolve() if file else page
        if not arrived.exists():
            broken.append(target)
        elif anchor and arrived.suffix == ".md" and anchor not in _anchors(arrived):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: links that arrive nowhere: {broken}"


def flow_tasks() -> list[tuple[str, str]]:
    """(task name, its module) of every Prefect task of tasks/, in the order the flows call them
    (flows/score.py, then a group's flows/score_group.py); read from the source."""
    tasks: dict[str, tuple[str, str]] = {}  # function -> (task name, module)
    for path in sorted((REPO / "tasks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            for decorator in getattr(node, "decorator_list", []):
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "task":
                    name = next(k.value.value for k in decorator.keywords if k.arg == "name" and isinstance(k.value, ast.Constant))
                    tasks[node.name] = (name, f"tasks/{path.name}")
    order: list[tuple[str, str]] = []
    for flow in ("score.py", "score_group.py"):
        calls = [n for n in ast.walk(ast.parse((REPO / "flows" / flow).read_text())) if isinstance(n, ast.Call)]
        for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            if isinstance(call.func, ast.Name) and call.func.id in tasks and tasks[call.func.id] not in order:
                order.append(tasks[call.func.id])
    assert sorted(order) == sorted(tasks.values()), f"tasks no flow calls: {sorted(set(tasks.values()) - set(order))}"
    return order


def test_the_road_lists_every_task_of_the_flows_in_their_order():
    """docs/design.md's road table: one row per Prefect task, in the order the flows call them, each
    naming the task's module (a step's condition in parentheses after its name)."""
    section = (REPO / "docs" / "design.md").read_text().split("## The road", 1)[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("| ")][1:]
    steps = [(re.sub(r" \(.*\)$", "", step), module) for step, module, _ in rows]
    tasks = flow_tasks()
    assert [step for step, _ in steps] == [name for name, _ in tasks]
    for (step, modules), (_, module) in zip(steps, tasks, strict=True):
        assert f"`{module}`" in modules, f"{step}: the row names no {module}"


def _defined_names() -> dict[str, set[str]]:
    """Every class, function and module-level or class-level name the project defines, with the names
    each class defines (`Class.name`), read from the source."""
    names: dict[str, set[str]] = {}
    for folder in ("scorekeeper", "tasks", "flows"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    own = names.setdefault(node.name, set())
                    if isinstance(node, ast.ClassDef):
                        for item in node.body:
                            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                                own.add(item.name)
                            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                                own.add(item.target.id)
                            elif isinstance(item, ast.Assign):
                                own.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(target, ast.Name):
                            names.setdefault(target.id, set())
    return names


def test_extending_names_only_symbols_the_code_defines():
    """docs/extending.md's symbols (`HeadEvaluation`, `SignalViews.view`, `KIND_SECTIONS`): every class,
    constant and `Class.member` it names is defined in the code, so its steps cannot name a moved one."""
    text = (REPO / "docs" / "extending.md").read_text()
    symbols = set(re.findall(r"`([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*(?:\.[a-z_]+)?|[A-Z][A-Z0-9_]{2,})`", text))
    assert {"HeadEvaluation", "SignalViews.view", "KIND_SECTIONS"} <= symbols  # the pattern finds them
    defined = _defined_names()
    missing = sorted(s for s in symbols if s.split(".")[0] not in defined or ("." in s and s.split(".")[1] not in defined[s.split(".")[0]]))
    assert not missing, f"docs/extending.md names symbols the code does not define: {missing}"

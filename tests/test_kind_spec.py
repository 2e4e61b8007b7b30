"""The kind of head is a spec the evaluation asks (scorekeeper/evaluation/base.HeadEvaluation): no
module of the evaluation, the report, tasks/ or flows/ but the three kind modules and the kind
registry names a kind, and docs/extending.md's "A kind of head" lists the spec's methods as the
protocol declares them, each asked by the step it names.

A kind named outside them is a branch on the kind: `HeadKind.REGRESSION` (through any alias of
HeadKind or the module holding it), `HeadKind("regression")`, or a kind's spelling compared with
or looked up as a value. Read from the source with `ast`, nothing imported; pure and fast.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from bench import house
from scorekeeper.evaluation import base
from scorekeeper.head_kind import HeadKind

ROOT = Path(__file__).resolve().parent.parent
SCOPE = [ROOT / "scorekeeper" / "evaluation", ROOT / "scorekeeper" / "report", ROOT / "tasks", ROOT / "flows"]
# The kinds' own modules and the registry that maps HeadKind to them.
KIND_MODULES = {ROOT / "scorekeeper" / "evaluation" / f"{name}.py" for name in (*(k.value for k in HeadKind), "kinds")}


def kind_names(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place `source` names a kind of head (bench/house.py's walk, which
    counts the same places in any commit's tree)."""
    return house.kind_names(ast.parse(source))


def test_the_check_finds_every_way_of_naming_a_kind():
    """The check can fail: each of these names a kind, and the kind-free lines name none."""
    named = """
from scorekeeper.metrics import registry as r
a = head == HeadKind.MULTI_LABEL
b = r.HeadKind.REGRESSION
c = HeadKind("single_label")
d = head in ("multi_label", "other")
e = {"regression": 1}
f = table["single_label"]
match head:
    case "regression":
        pass
"""
    assert [what for _, what in kind_names(named)] == [
        "HeadKind.MULTI_LABEL",
        "HeadKind.REGRESSION",
        "HeadKind('single_label')",
        "a comparison with 'multi_label'",
        "a key 'regression'",
        "a lookup of 'single_label'",
        "a case 'regression'",
    ]
    assert house.KIND_MEMBERS == {k.name: k.value for k in HeadKind}  # the walk knows every kind, spelt as HeadKind spells it
    free = 'kind = evaluation_for(head)\nsections = kind.report.sections\nlog.info("a regression head")\nx = HeadKind(head)\n'
    assert kind_names(free) == []


def test_no_module_but_the_kinds_names_a_kind_of_head():
    found = []
    for folder in SCOPE:
        for path in sorted(folder.rglob("*.py")):
            if path not in KIND_MODULES:
                found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in kind_names(path.read_text())]
    assert found == [], "kind-specific parts belong to the kind's module (evaluation/base.HeadEvaluation):\n" + "\n".join(found)


# -- the spec as docs/extending.md and base.py's docstring list it ---------------------------------------

SPEC = [name for name, member in vars(base.HeadEvaluation).items() if inspect.isfunction(member) and not name.startswith("_")]
ATTRIBUTES = [name for name in base.HeadEvaluation.__annotations__ if name != "kind"]


def _table(text: str) -> list[list[str]]:
    """The rows of the first markdown table after "## A kind of head", as cells."""
    section = text.split("## A kind of head", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip().strip("`") for c in row.strip("|").split("|")] for row in rows]
    return [row for row in cells[2:]]  # after the header and its rule


def test_extending_lists_the_spec_as_the_protocol_declares_it():
    rows = _table((ROOT / "docs" / "extending.md").read_text())
    assert [row[0] for row in rows] == SPEC + ATTRIBUTES, "docs/extending.md's table of the spec, in the protocol's order"
    for name, _, asked_by in rows:
        modules = re.findall(r"[a-z_/]+\.py", asked_by)
        assert modules, f"{name}: the table names no module that asks it"
        for module in modules:
            path = ROOT / "scorekeeper" / ("" if "/" in module else "evaluation") / module  # evaluation/'s, or scorekeeper/ path
            assert path.is_file(), f"{name}: no {module}"
            assert re.search(rf"\.{name}\b", path.read_text()), f"{name}: {module} does not ask it"


def test_the_protocols_docstring_lists_the_same_spec():
    table = (base.__doc__ or "").split("method / attribute", 1)[1].split("\n\n", 1)[0]
    lines = [line.split()[0] for line in table.splitlines()[1:]]
    assert lines == SPEC + ATTRIBUTES

"""The house's rules for production code (scorekeeper/, flows/, tasks/), read from the source with
bench/house.py's ast walks (nothing imported, fast): no function over 80 lines and at most 8 over
60 (issue 34, item 7), and no module of scorekeeper/ takes a private name (`_x`) of another."""

from __future__ import annotations

from pathlib import Path

from bench.house import PRODUCTION, _module_of, long_functions, private_imports, sources

ROOT = Path(__file__).resolve().parent.parent
LONG, LONGEST, MOST_LONG = 60, 80, 8


def _lengths() -> list[tuple[int, str]]:
    return sorted(
        ((n, f"{rel}:{line} {name} ({n} lines)") for rel, tree in sources(ROOT, PRODUCTION) for line, name, n in long_functions(tree)),
        reverse=True,
    )


def test_no_production_function_is_over_80_lines_and_at_most_8_over_60():
    lengths = _lengths()
    assert [text for n, text in lengths if n > LONGEST] == []
    over = [text for n, text in lengths if n > LONG]
    assert len(over) <= MOST_LONG, "split one of these:\n" + "\n".join(over)


def test_no_module_takes_a_private_name_of_another():
    modules = {_module_of(rel) for rel, _ in sources(ROOT, ("scorekeeper",))}
    found = [f"{rel}:{line}: {what}" for rel, tree in sources(ROOT, ("scorekeeper",)) for line, what in private_imports(rel, tree, modules)]
    assert found == [], "make the name public where it is shared, or keep it in its module:\n" + "\n".join(found)


def test_the_checks_can_fail():
    import ast

    tree = ast.parse("from scorekeeper.evaluation.base import _x\nimport scorekeeper.report.plots as p\np._title()\n")
    modules = {"scorekeeper.evaluation.base", "scorekeeper.report.plots", "scorekeeper.evaluation.drift"}
    assert [w for _, w in private_imports("scorekeeper/evaluation/drift.py", tree, modules)] == [
        "from scorekeeper.evaluation.base import _x",
        "scorekeeper.report.plots._title",
    ]
    long = ast.parse("def f():\n" + "    x = 1\n" * 80)
    assert [n for _, _, n in long_functions(long)] == [81]

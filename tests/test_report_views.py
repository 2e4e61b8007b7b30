"""The report is rendered once (scorekeeper/report/view.py): each section's view is built from the
typed document and the run's facts, and its markdown and HTML templates read that view and nothing
else. Statically: a section template names no variable but `view`, spells no path (no list or tuple
of names, no lookup by a literal key) and calls no method of the data. Dynamically: a view holds no
record of the metrics document (only numbers with their paths, texts and rows of its own), and both
templates render it under StrictUndefined (an attribute the view lacks is an error, not a blank)."""

from __future__ import annotations

import dataclasses

import pytest
from jinja2 import meta, nodes
from pydantic import BaseModel

from scorekeeper.report.report import SECTION_VIEWS
from scorekeeper.report.view import TEMPLATES, html_environment, markdown_environment, render_html_section, render_markdown_section
from scorekeeper.run_facts import RunFacts
from tests.report_fixture import document, full_metrics

PAGE = {"report.html.j2", "macros.html.j2"}  # the page that places the sections (its test is below), and the number marks
# Sections report.md does not have: the wrong labels are in its per-label section, the rest is report.html's.
HTML_ONLY = {"wrong_labels", "thresholds", "errors", "history", "facts", "curves", "calibration", "label_calibration"}


def _section_templates() -> list[str]:
    return sorted(p.name for p in TEMPLATES.glob("*.j2") if p.name not in PAGE)


def test_every_section_has_a_view_and_both_templates():
    names = {name.split(".")[0] for name in _section_templates()}
    assert names == set(SECTION_VIEWS)
    for name in names:
        assert (TEMPLATES / f"{name}.html.j2").exists(), name
        assert (TEMPLATES / f"{name}.md.j2").exists() == (name not in HTML_ONLY), name


def _spelt_paths(tree: nodes.Template) -> list[str]:
    found = []
    for node in tree.find_all((nodes.List, nodes.Tuple)):
        if any(isinstance(item, nodes.Const) and isinstance(item.value, str) for item in node.items):
            found.append(f"a literal list of names at line {node.lineno}")
    for node in tree.find_all(nodes.Const):  # the parser folds a literal list of constants into one
        if isinstance(node.value, list | tuple) and any(isinstance(item, str) for item in node.value):
            found.append(f"a literal list of names at line {node.lineno}")
    for node in tree.find_all(nodes.Getitem):
        if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            found.append(f"a lookup by the literal key {node.arg.value!r} at line {node.lineno}")
    for node in tree.find_all(nodes.Call):
        if isinstance(node.node, nodes.Getattr):
            found.append(f"a method call .{node.node.attr}() at line {node.lineno}")
    return found


@pytest.mark.parametrize("name", _section_templates())
def test_a_section_template_reads_its_view_only(name):
    env = markdown_environment() if name.endswith(".md.j2") else html_environment()
    tree = env.parse((TEMPLATES / name).read_text())
    assert meta.find_undeclared_variables(tree) <= {"view"}, name
    assert not _spelt_paths(tree), (name, _spelt_paths(tree))


def test_the_check_finds_a_template_that_reads_the_document():
    tree = html_environment().parse('{{ m.drift.binned()["x"] }}{{ num(v, ["drift", "psi"]) }}')
    assert meta.find_undeclared_variables(tree) == {"m", "num", "v"}
    assert len(_spelt_paths(tree)) == 3


def _records(value, where: str = "view") -> list[str]:
    """Where a view holds a record of the metrics document (a pydantic model)."""
    if isinstance(value, BaseModel):
        return [f"{where}: {type(value).__name__}"]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [r for f in dataclasses.fields(value) for r in _records(getattr(value, f.name), f"{where}.{f.name}")]
    if isinstance(value, list | tuple):
        return [r for i, v in enumerate(value) for r in _records(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [r for k, v in value.items() for r in _records(v, f"{where}[{k!r}]")]
    return []


def check_views(metrics, facts: RunFacts) -> set[str]:
    """Every section's view of this document: free of document records, rendered by both templates;
    returns the sections the document has."""
    shown = set()
    for name, build in SECTION_VIEWS.items():
        view = build(metrics, facts)
        if view is None:
            continue
        shown.add(name)
        assert not _records(view), (name, _records(view))
        assert render_html_section(name, view), name
        assert name in HTML_ONLY or render_markdown_section(name, view), name
    return shown


def test_the_views_of_a_full_report_hold_no_document_record():
    metrics, info = full_metrics(n=200)
    check_views(document(metrics), RunFacts.of(info))


def test_the_page_places_rendered_sections_and_reads_no_document():
    """report.html.j2 names only rendered sections (the builders' names) and the few views its
    banners and title read; no metrics document, no path."""
    tree = html_environment().parse((TEMPLATES / "report.html.j2").read_text())
    names = meta.find_undeclared_variables(tree)
    banners = {"head_view", "drift_view", "gates", "gates_section", "scoring_only"}
    assert names - banners <= set(SECTION_VIEWS) and "m" not in names, names - banners - set(SECTION_VIEWS)
    assert not _spelt_paths(tree)

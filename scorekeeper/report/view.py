"""The report rendered once: each section is a view model built once from the typed metrics document
and the run's facts, and rendered by a markdown template (`<section>.md.j2`) and an HTML template
(`<section>.html.j2`) in scorekeeper/report/templates/, both reading the same view.

A view holds every value its section shows and nothing of the document itself: numbers as `Num`
(the value, its JSON path in metrics.json, its digits: report.html marks it with `data-key` and
`data-value`, report.md shows the value), texts as str, nested rows as frozen dataclasses. A path
is spelt once, where the view is built (`at` reads the value at the path, so a number and its mark
cannot disagree); no template spells one (tests/test_report_views.py).

Escaping is the template's, by its output's one rule (scorekeeper/escape.py): report.html's
templates autoescape every value; report.md's templates pass every value from data through the
`md` filter (`md_text`) or the `code` filter (`md_code`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from scorekeeper.escape import md_code, md_text
from scorekeeper.metrics.registry import value_at
from scorekeeper.report.render import ci, fmt, signed
from scorekeeper.report.report_stats import pvalue

TEMPLATES = Path(__file__).with_name("templates")

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Num:
    """A number the report shows (or an interval: a list of two), and its place in metrics.json."""

    value: Any
    key: Path_
    digits: int = 4
    lower_is_better: bool = False  # a change's colour: down is good


def at(document: Any, *path: str | int, digits: int = 4, lower_is_better: bool = False) -> Num:
    """The number at `path` in the document (None where absent), marked with that path."""
    return Num(value_at(document, path), tuple(path), digits, lower_is_better)


def _raw(value) -> str:
    return "" if value is None else repr(value)


def _item(n: Num, index: int) -> Num:
    """An interval's end as a number of its own, its path the interval's and the index."""
    return Num(n.value[index], (*n.key, index), n.digits, n.lower_is_better)


def _filters() -> dict:
    return {
        "fmt": fmt,
        "signed": signed,
        "ci": ci,
        "pvalue": pvalue,
        "key": lambda path: json.dumps(list(path), ensure_ascii=False),
        "raw": _raw,
        "thousands": lambda value: f"{value:,}",
        "item": _item,
        "spec": format,  # {{ x | spec(".3g") }}: Python's format specification
    }


@cache
def html_environment():
    """report.html's templates: autoescaping on (markupsafe's escape: escape.html_text)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    env.filters.update(_filters())
    return env


@cache
def markdown_environment():
    """report.md's templates: no autoescaping; values from data go through `md` or `code`. Every
    line a template writes ends with a newline, the last one too (keep_trailing_newline)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    env.filters.update(_filters() | {"md": md_text, "code": md_code})
    return env


def render_markdown_section(name: str, view: object | None) -> list[str]:
    """A section of report.md as lines (none without a view): templates/<name>.md.j2."""
    if view is None:
        return []
    text = markdown_environment().get_template(f"{name}.md.j2").render(view=view)
    return text.split("\n")[:-1]  # each line ends with a newline


def render_html_section(name: str, view: object | None):
    """A section of report.html (Markup; empty without a view): templates/<name>.html.j2."""
    from markupsafe import Markup

    if view is None:
        return Markup("")
    return Markup(html_environment().get_template(f"{name}.html.j2").render(view=view))

"""Markup from data never renders: label names, slice values and columns, ground-truth values, ids,
texts and run names holding HTML, markdown links, pipes and backticks show as themselves in
report.md, report.html and every Prefect artifact. Markdown is rendered with markdown-it (HTML on,
tables on), as a viewer or Prefect's UI renders it, and the result is searched for live markup.
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from scorekeeper.escape import html_text, md_code, md_text
from tests.report_fixture import document, full_metrics

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(2)</script>",
    "[link](http://x.example/steal)",
    "a | b | c",
    "`code` and ``more``",
    "**bold** _it_ # head",
    "![pic](http://x.example/p.png)",
    "&lt;img src=x&gt;",
    "line\nbreak <b>",
]


def _render(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


class _Live(HTMLParser):
    """The elements and link targets a page would make live."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.hrefs += [v for k, v in attrs if k in ("href", "src") and v]


def _live(html: str) -> _Live:
    parser = _Live()
    parser.feed(html)
    return parser


@pytest.mark.parametrize("value", HOSTILE)
def test_md_text_shows_the_value_itself_even_in_a_table_cell(value):
    cell = md_text(value)
    rendered = _render(f"| head |\n|---|\n| {cell} |\n")
    live = _live(rendered)
    assert set(live.tags) <= {"table", "thead", "tbody", "tr", "th", "td"} and not live.hrefs, rendered
    assert rendered.count("<td>") == 1  # one cell: a pipe in the value does not split it
    shown = rendered.split("<td>")[1].split("</td>")[0]
    from html import unescape

    assert unescape(shown) == value.replace("\n", " ")


@pytest.mark.parametrize("value", HOSTILE)
def test_md_code_and_html_text_show_the_value_itself(value):
    rendered = _render(f"run {md_code(value)} done")
    live = _live(rendered)
    assert set(live.tags) == {"p", "code"} and not live.hrefs, rendered
    assert set(_live(f"<p>{html_text(value)}</p>").tags) == {"p"}


def _hostile_report():
    metrics, run_info = copy.deepcopy(full_metrics(n=300, labels=["<img src=x>", "[link](http://x.example)", "a|b", "`tick`", "ok"]))
    evil_value, evil_column = "<script>alert(1)</script>", "[col](http://x.example)|`c`"
    metrics["slices"] = {evil_column: {evil_value: next(iter(next(iter(metrics["slices"].values())).values()))}}
    metrics["unknown_labels"] = {"<b>truth</b>": 2, "[t](http://x.example)": 1}
    metrics["comparison"]["run"] = "<img src=y>"
    run_info |= {"run_id": "run-<img src=r>", "input_uri": "s3://b/`x`<img src=i>", "model_uri": "[m](http://x.example)"}
    return metrics, run_info


def test_report_md_and_every_artifact_render_no_markup_from_the_data():
    from scorekeeper.report.report import plot_files, render_html, render_markdown
    from scorekeeper.tasks.artifacts import comparison_rows, per_class_rows, summary_markdown

    metrics, run_info = _hostile_report()
    page = _render(render_markdown(document(metrics), run_info))
    summary = _render(summary_markdown(document(metrics), run_info["run_id"], run_info["input_uri"], {}))
    for rendered in (page, summary):
        live = _live(rendered)
        assert not {"img", "script", "a", "b", "em"} & set(live.tags) and not live.hrefs, rendered
    assert "&lt;img src=x&gt;" in page and "[link](http://x.example)" in page  # shown as text

    # Table artifacts: the UI renders each cell (and column name) as markdown.
    cells = [row["label"] for row in per_class_rows(document(metrics))]
    cells += [str(k) for row in comparison_rows(document(metrics)) for k in row]
    assert len(cells) > 5
    for cell in cells:
        live = _live(_render(f"| h |\n|---|\n| {cell} |\n"))
        assert set(live.tags) <= {"table", "thead", "tbody", "tr", "th", "td"} and not live.hrefs, cell

    html = render_html(document(metrics), run_info)
    live = _live(html)
    assert "img" not in live.tags and "script" not in live.tags
    assert all(h.startswith("#") for h in live.hrefs), live.hrefs  # only the page's own navigation
    for svg in plot_files(document(metrics)).values():
        assert not {"img", "script", "a"} & set(_live(svg).tags)

"""Markup from data never renders: the one escaping function for HTML and the one for markdown.

Every value that comes from the data or the model (label names, slice values, ground-truth values,
column names, texts, ids, run names, URIs) goes through one of them on its way into report.html,
the plots, report.md or a Prefect artifact; Prefect's UI renders markdown and table artifacts as
markdown with HTML, so an `<img>` or a `[link](...)` there would be live for every viewer.

- `html_text`: `&`, `<`, `>`, `"` and `'` as entities: markupsafe's escape, the very function
  Jinja's autoescape applies to every value report.html.j2 shows.
- `md_text`: one line (newlines become spaces) with each character that could start inline markup
  backslash-escaped, which CommonMark and GitHub-flavoured markdown read as the character itself:
  no HTML, no entity, no link or image, no emphasis, no code, no table cell break, and no
  auto-link (`http\\://`).
- `md_code`: a code span that holds any text, backticks included (a fence longer than any run of
  backticks in it); nothing inside a code span renders.
"""

from __future__ import annotations

import re

from markupsafe import escape

# The characters that start markup inside a line (HTML, entities, links and images, emphasis, code,
# strike-through, table cells, auto-links' `://`); each is an ASCII punctuation character, which
# CommonMark lets a backslash turn into itself. A value never starts a line here, so block markup
# (`#`, `-`, `+`, `1.`) cannot begin inside one, and those stay as typed.
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>&|~!:])")
_LINE_BREAKS = re.compile(r"[\r\n\t\f\v\u2028\u2029]+")


def html_text(value) -> str:
    """A value as HTML text (element content or a quoted attribute)."""
    return str(escape(value if isinstance(value, str) else str(value)))


def md_text(value) -> str:
    """A value as markdown text, also inside a table cell: shown as itself, never rendered."""
    return _PUNCTUATION.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(value)))


def md_code(value) -> str:
    """A value as a markdown code span (for URIs and run names, shown as typed); not for table cells."""
    text = _LINE_BREAKS.sub(" ", str(value))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"

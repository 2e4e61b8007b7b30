"""Text for people from a metrics document: number formats and markdown cells. Shared by report.md,
report.html (tasks/report.py), the paired tests' sections (tasks/report_stats.py) and the Prefect
artifacts; pure functions, importing nothing of the flow's steps.
"""

from __future__ import annotations

import math


def fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def ci(interval, digits: int = 4) -> str:
    return f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else ""


def signed(value, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def md(text) -> str:
    """A value for a markdown table cell: pipes and newlines would break the table."""
    return str(text).replace("|", "\\|").replace("\n", " ")

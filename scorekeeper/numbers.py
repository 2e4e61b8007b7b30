"""Numbers as people read them, the same value metrics.json holds: fixed-point in the ordinary
range, scientific notation past 1e6 or below 1e-4 (where fixed-point shows 300 digits or 0.0000),
"n/a" where metrics.json holds null (NaN and the infinities included). The command's last line,
report.md and report.html print metrics through it."""

from __future__ import annotations

import math

LARGE = 1e6
SMALL = 1e-4


def readable(value, digits: int = 4) -> str:
    """A metric's value for a person: `digits` decimals, or `digits` significant digits in
    scientific notation when |value| >= 1e6 or 0 < |value| < 1e-4; integers as they are."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    value = float(value)
    if not math.isfinite(value):
        return "n/a"
    size = abs(value)
    if size >= LARGE or 0 < size < SMALL:
        return f"{value:.{max(digits - 1, 0)}e}"
    return f"{value:.{digits}f}"

"""Numbers as people read them (scorekeeper/numbers.py): what the command's last line and the
report print is the value metrics.json holds, readable at any magnitude."""

from __future__ import annotations

import math
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from scorekeeper.cli import summary_line
from scorekeeper.numbers import readable
from scorekeeper.report.render import ci, fmt, signed


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_readable_is_the_value_to_four_digits_and_never_long(value):
    shown = readable(value)
    assert len(shown) <= 12, shown  # never 300 digits
    back = float(Decimal(shown))  # exact: 1.798e+308 is past the largest double
    if abs(value) >= 1e6 or 0 < abs(value) < 1e-4:
        assert "e" in shown and math.isclose(float(Decimal(shown) / Decimal(value)), 1.0, rel_tol=1e-3)  # four significant digits
    else:
        assert "e" not in shown and abs(back - value) <= 5e-5 + 1e-12


def test_null_nan_and_infinities_read_as_metrics_json_holds_them():
    assert [readable(v) for v in (None, float("nan"), float("inf"), float("-inf"))] == ["n/a"] * 4
    assert readable(3) == "3" and fmt(None) == "n/a" and fmt(2.5e300) == "2.500e+300" and fmt(0.12345) == "0.1235"


def test_the_last_line_prints_a_regression_run_at_1e300_as_metrics_json_holds_it():
    metrics = {"evaluated": 3, "mae": 2.5e300, "rmse": None, "r2": 0.25, "pearson": 0.94, "mape": 3e-7}
    line = summary_line({"run_id": "r", "rows": 3, "run_uri": "out/r", "metrics": metrics})
    assert "mae 2.500e+300" in line and "r2 0.2500" in line and "pearson 0.9400" in line and "mape 3.000e-07" in line
    assert "inf" not in line and len(line) < 200


def test_the_last_line_of_a_resumed_run_says_what_it_scored_and_what_it_reused():
    metrics = {"evaluated": 3000, "accuracy": 0.5}
    resumed = {"run_id": "r", "rows": 3000, "run_uri": "out/r", "metrics": metrics, "throughput": {"rows_scored": 2000}}
    assert summary_line(resumed).startswith("scorekeeper: run r scored 2000 rows and reused 1000 committed earlier (3000 rows);")
    fresh = resumed | {"throughput": {"rows_scored": 3000}}
    assert summary_line(fresh).startswith("scorekeeper: run r scored 3000 rows;")


def test_intervals_and_changes_in_the_report_read_as_their_values_do():
    """report.md's interval and delta cells (the slices, length_impact, comparisons) at any magnitude."""
    assert ci([2.5316e250, 3.6462e250]) == "[2.532e+250, 3.646e+250]" and ci([0.25, 0.75]) == "[0.2500, 0.7500]"
    assert ci([1e-9, 3e-9]) == "[1.000e-09, 3.000e-09]" and ci(None) == ""
    assert signed(0.0123) == "+0.0123" and signed(-0.0123) == "-0.0123" and signed(0.0) == "+0.0000"
    assert signed(2e250) == "+2.000e+250" and signed(-3e-9) == "-3.000e-09" and signed(None) == "n/a"
    assert signed(float("inf")) == "n/a"

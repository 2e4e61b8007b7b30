"""What the length costs: metrics.json `length_impact`, the headline metric over the evaluated rows
within the window and over it (docs/long_text.md). The split is shared; the metric per side is the kind's
(`HeadEvaluation.length_sides`), from the helpers here.

A row is over when its L content tokens exceed the window W = max_length - s, i.e. when its
`tokens` column (L + s, written by the worker for every run) exceeds max_length. Per side, the
head's metric and its 95% interval as the slices compute them:

- single_label: `accuracy`, Wilson's interval (sql/shared/wilson.sql);
- multi_label: `micro_f1`, the slices' percentile bootstrap of sum(2TP) / sum(2TP + FP + FN) over
  the side's rows (slices.ratio_interval);
- regression: `mae`, the same bootstrap of the mean of the rows' absolute errors.

Present only when a run with ground truth has evaluated rows over the window; a side without
evaluated rows has rows 0 and null values. Computed in SQL over the evaluated rows: no per-row Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scorekeeper.evaluation.base import Evaluation, HeadEvaluation, LengthSide
from scorekeeper.evaluation.duck import sql
from scorekeeper.evaluation.slices import SLICE_UNITS, ratio_interval
from scorekeeper.metrics.registry import length_metric

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

SIDES = {False: "within", True: "over"}


def has_lengths(con: Connection) -> bool:
    """Whether the run's predictions carry the `tokens` column (runs scored before it do not)."""
    names = [row[0] for row in con.execute("DESCRIBE predictions").fetchall()]
    return "tokens" in names


def length_impact(ev: Evaluation, kind: HeadEvaluation, max_length: int) -> dict | None:
    """{"within": {...}, "over": {...}} for the evaluated rows (the kind's metrics have run), or
    None when no evaluated row is over the window."""
    if not has_lengths(ev.con):
        return None
    ev.con.execute(sql("length_rows.sql"), {"max_length": max_length})
    metric = length_metric(kind.kind)
    found = kind.length_sides(ev)
    if not found.get(True):
        return None
    return {
        SIDES[over]: {"rows": side.rows, metric: side.value, f"{metric}_ci": side.ci}
        if side
        else {"rows": 0, metric: None, f"{metric}_ci": None}
        for over, side in ((over, found.get(over)) for over in (False, True))
    }


def proportion_sides(con: Connection) -> dict[bool, LengthSide]:
    """A share of right rows per side (single-label accuracy) over the `evaluated` rows, with
    Wilson's interval (sql/shared/wilson.sql), as the slices compute it."""
    con.execute(sql("wilson.sql"))
    return {
        over: LengthSide(int(rows), correct / rows, ci) for over, rows, correct, ci in con.execute(sql("length_accuracy.sql")).fetchall()
    }


def ratio_sides(con: Connection, rows_query: str) -> dict[bool, LengthSide]:
    """A ratio of sums per side over the kind's slice rows (`rows_query` makes head_slice_rows: num
    and den per row), with the slices' percentile bootstrap interval (slices.ratio_interval)."""
    con.execute(sql(rows_query))
    con.execute(sql("length_head_units.sql"), {"units": SLICE_UNITS})
    units = con.execute("SELECT over, rows, num, den FROM length_units ORDER BY over, unit").fetchall()
    found = {}
    for over in (False, True):
        mine = np.array([(r, n, d) for o, r, n, d in units if o == over], dtype=np.float64).reshape(-1, 3)
        rows = int(mine[:, 0].sum())
        if rows:
            num, den = mine[:, 1], mine[:, 2]
            value = num.sum() / den.sum() if den.sum() else 0.0
            found[over] = LengthSide(rows, float(value), ratio_interval(num, den) if rows > 1 else None)
    return found

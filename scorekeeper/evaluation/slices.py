"""Slices of multi-label and regression runs: per value of each slice column, its rows and the head's
slice metrics with 95% intervals (metrics.json `slices`, as a single-label run's; docs/evaluation.md
says the keys). The breakdown is shared; each kind gives its rows (a query making
`head_slice_rows`: num, den and exact per evaluated row) and its group's fields from their sums:

- multi_label: `micro_f1` with `micro_f1_ci`, `subset_accuracy` with `subset_accuracy_ci`;
- regression: `mae` with `mae_ci` (several outputs: the mean of the outputs' MAE, the rule of the
  top-level `mae`; every evaluated row has every output, so it is the mean over the slice's rows of
  each row's mean absolute error).

Groups are the slice column's values over the evaluated rows, exactly as scorekeeper/evaluation/single_label.py's
single-label slices: null is its own group (keyed `∅ (null)`), a value whose rows have no ground
truth has no group, the SLICE_GROUPS largest groups are kept and `slices_truncated` counts the rest.

Intervals:
- subset accuracy is a proportion of rows: Wilson's 95% interval (scorekeeper/evaluation/sql/wilson.sql), as
  single-label accuracy's;
- micro-F1 and MAE are ratios of sums over rows (sum 2TP / sum (2TP + FP + FN); sum |e| / rows):
  a percentile bootstrap (SLICE_RESAMPLES resamples, fixed seed) that resamples the slice's rows
  with replacement, so it stays inside the metric's range and needs no normal limit at small
  slices, and counts the labels of one row together. Its cost is bounded at any row count: a slice
  of more than SLICE_UNITS rows is resampled as SLICE_UNITS blocks of its rows (hashed by
  row_index; each block's sums come from SQL), a cluster bootstrap of random rows. An interval
  needs two rows (null for a slice of one); it is a single point when every row of the slice has
  the same outcome (no spread to resample), where Wilson's still has width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from scorekeeper.evaluation.duck import SLICE_GROUPS, null_group_key, sql
from scorekeeper.evaluation.statistics.paired_tests import CHUNK, SEED
from scorekeeper.metrics.document import SliceGroupPart, SliceGroups

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

SLICE_UNITS = 1_000  # resampling units of a slice: its rows up to this many, else this many blocks of rows
SLICE_RESAMPLES = 2_000

# A kind's slice group from its sums: (rows, num, den, exact rows, Wilson interval of exact, interval of num / den) -> fields
GroupFields = Callable[[int, float, float, int, list[float] | None, list[float] | None], dict]


def head_slices(con: Connection, rows_query: str, group_fields: GroupFields, slice_columns: list[str]) -> tuple[dict, dict]:
    """Per slice column: {value: group} and the group counts of columns with more groups than were
    kept, over the kind's evaluated rows (`rows_query` makes head_slice_rows) and the `staged` slice columns."""
    con.execute(sql("wilson.sql"))
    if slice_columns:  # no column, no group: the rows are not made (the length split makes its own)
        con.execute(sql(rows_query))
    slices, truncated = {}, {}
    for i, column in enumerate(slice_columns):
        con.execute(sql("heads_slice_groups.sql", column=f"slice_{i}"), {"limit": SLICE_GROUPS})
        con.execute(sql("heads_slice_units.sql", column=f"slice_{i}"), {"units": SLICE_UNITS})
        groups = con.execute(
            "SELECT group_id, value IS NULL, value, rows, num, den, exact, wilson(exact, rows), groups FROM head_slice_groups ORDER BY group_id"
        ).fetchall()
        units: dict[int, tuple[list, list]] = {}
        for group_id, num, den in con.execute("SELECT group_id, num, den FROM head_slice_units ORDER BY group_id, unit").fetchall():
            sums = units.setdefault(group_id, ([], []))
            sums[0].append(num)
            sums[1].append(den)
        null_key = null_group_key({value for _, is_null, value, *_ in groups if not is_null})
        slices[column] = {
            (null_key if is_null else value): group_fields(int(rows), num, den, int(exact), wilson, _interval(int(rows), units[group_id]))
            for group_id, is_null, value, rows, num, den, exact, wilson, _ in groups
        }
        total = groups[0][-1] if groups else 0
        if total > len(groups):
            truncated[column] = int(total)
    return slices, truncated


def as_parts(slices: dict[str, dict[str, dict]], part: type[SliceGroupPart]) -> SliceGroups:
    """head_slices' groups as the kind's part of metrics.json `slices` (its group fields validated once)."""
    return {column: {value: part.model_validate(fields) for value, fields in groups.items()} for column, groups in slices.items()}


def _interval(rows: int, units: tuple[list, list]) -> list[float] | None:
    return ratio_interval(np.array(units[0], dtype=np.float64), np.array(units[1], dtype=np.float64)) if rows > 1 else None


def ratio_interval(num: np.ndarray, den: np.ndarray, resamples: int = SLICE_RESAMPLES) -> list[float] | None:
    """The percentile bootstrap 95% interval of sum(num) / sum(den) (0 where the sum of den is 0)
    when the units (rows, or blocks of rows, with their sums) are drawn with replacement."""
    k = len(num)
    if k == 0:
        return None
    rng = np.random.default_rng(SEED)
    draws = []
    for start in range(0, resamples, CHUNK):
        picked = rng.integers(0, k, size=(min(CHUNK, resamples - start), k))
        top, bottom = num[picked].sum(1), den[picked].sum(1)
        draws.append(np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0))
    low, high = np.percentile(np.concatenate(draws), [2.5, 97.5])
    return [float(low), float(high)]

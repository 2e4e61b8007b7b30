"""The precision check of a reduced-precision run: a sample of rows scored again in float32.

bfloat16 (and float16) move a classifier's probabilities a little; how much depends on the model
and the rows. A run in a reduced dtype therefore scores a seeded sample of its rows a second time
with the model loaded in float32 from the same folder, and reports the largest difference and how
many decisions changed (scoring_summary.PrecisionCheck), so that the figures of every such run say what
the dtype cost, and a bound can fail the run (ScoreRequest.precision_max_difference).

The sample is a function of the plan alone: each range contributes rows in proportion to its size,
spread evenly over its rows' token lengths (short and long rows alike; the offset is seeded by the
range's index), and the float32 reference scores each range's sample in batches cut from that
sample alone. However many processes score the ranges, the same rows are checked against the same
references. The values compared are the ones committed for those rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import threshold_vector
from scorekeeper.run_folder import IndexRange
from scorekeeper.scoring_summary import PrecisionCheck

SAMPLE_SEED = 20261201


def rows_to_check(check_rows: int, range_rows: int, total_rows: int) -> int:
    """A range's share of the sample: in proportion to its rows, at least one, never more than it has."""
    if check_rows <= 0 or range_rows <= 0:
        return 0
    return min(range_rows, max(1, math.ceil(check_rows * range_rows / max(total_rows, 1))))


def sample_positions(lengths: np.ndarray, wanted: int, range_index: int) -> np.ndarray:
    """`wanted` positions of a range, evenly spaced over its rows ordered by token length (ties by
    position), from a seeded offset: a pure function of the range's rows and its index."""
    n = len(lengths)
    wanted = min(wanted, n)
    if wanted <= 0:
        return np.empty(0, dtype=np.int64)
    by_length = np.lexsort((np.arange(n), lengths))
    offset = np.random.default_rng([SAMPLE_SEED, range_index]).random()
    picks = np.minimum(((np.arange(wanted) + offset) * n / wanted).astype(np.int64), n - 1)
    return np.sort(by_length[np.unique(picks)])


def compare(head: HeadKind, reduced: np.ndarray, reference: np.ndarray, thresholds: np.ndarray | None = None) -> dict:
    """The check's figures for rows scored in both dtypes (rows x outputs, the head's values)."""
    rows = len(reference)
    if not rows:
        return {"rows": 0}
    largest = float(np.max(np.abs(reduced - reference)))
    if head == HeadKind.SINGLE_LABEL:
        changed = int(np.sum(np.argmax(reduced, axis=1) != np.argmax(reference, axis=1)))
        return {"rows": rows, "max_probability_difference": largest, "changed_predictions": changed}
    if head == HeadKind.MULTI_LABEL:
        t = thresholds[np.newaxis, :] if thresholds is not None else 0.5
        changed = int(np.sum((reduced > t) != (reference > t)))
        return {"rows": rows, "max_probability_difference": largest, "changed_label_decisions": changed}
    return {"rows": rows, "max_prediction_difference": largest}


@dataclass
class PrecisionSample:
    """The sampled rows of the ranges this process scored, with the values it committed for them."""

    check_rows: int
    total_rows: int
    ranges: list[tuple[IndexRange, pa.Table, np.ndarray]] = field(default_factory=list)

    def keep(self, r: IndexRange, rows: pa.Table, lengths: np.ndarray, values: np.ndarray) -> None:
        positions = sample_positions(lengths, rows_to_check(self.check_rows, r.rows, self.total_rows), r.index)
        if len(positions):
            self.ranges.append((r, rows.take(pa.array(positions)), values[positions]))

    def check(self, dtype: str, head: HeadKind, labels: list[str], thresholds, reference: list[np.ndarray]) -> PrecisionCheck:
        """The kept rows' committed values against `reference`, the float32 model's values for
        the same rows (one array per kept range, in order)."""
        reduced = [values for _, _, values in self.ranges]
        vector = np.asarray(threshold_vector(thresholds, labels), dtype=np.float64) if head == HeadKind.MULTI_LABEL else None
        stacked = [np.concatenate(v) if v else np.empty((0, len(labels))) for v in (reduced, reference)]
        return PrecisionCheck(dtype=dtype, **compare(head, stacked[0], stacked[1], vector))

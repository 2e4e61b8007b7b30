"""The interface every kind of head is evaluated through, and what the driver hands it.

A kind's module (single_label.py, multi_label.py, regression.py) implements `HeadEvaluation` over
one open connection (`Evaluation.con`, holding the `predictions` and `staged` views and the
`labels` table): its `truth` table, its metrics (with its `evaluated` rows), its slice breakdown
and its comparison with another run. kinds.py registers them by HeadKind; driver.py runs them in
one order for every kind.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from scorekeeper.evaluation.matching import ColumnKind
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import Comparison, GroundTruthSource, MetricsDocument, RecordedMetrics
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.labelling import LabelFreeModel

Logger = logging.Logger | logging.LoggerAdapter

# Shared by the kinds: the calibration bins, the log loss's clipping, the rows and text shown.
ECE_BINS = 15
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)  # scikit-learn clips probabilities by the dtype's eps
CONFIDENT_ERRORS = 20
EXCERPT_CHARS = 200


@dataclass
class Evaluation:
    """One run's evaluation in progress: its connection and what the request says about it."""

    con: Any  # a DuckDB connection (duck.connect_run)
    run: RunFolder
    labels: list[str]
    manifest: StagedManifest
    slice_columns: list[str]
    thresholds: float | dict[str, float]
    truth_column: str  # the user's name of the ground-truth column (for messages)
    log: Logger


@dataclass(frozen=True)
class Coverage:
    """Which rows have a prediction and which a ground truth (coverage.sql), and where the truth came from."""

    source: GroundTruthSource | None
    column: ColumnKind | None  # the kind of the ground-truth column's values (None: no rule to decide)
    truth_rows: int
    missing: int
    unmatched: int
    scored: int


class HeadEvaluation(Protocol):
    """How one kind of head is evaluated."""

    kind: HeadKind

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        """The temp table `truth` (and the kind's own truth tables); where the truth came from and
        the kind of its column's values."""
        ...

    def metrics(self, ev: Evaluation, coverage: Coverage) -> dict[str, Any]:
        """The kind's fields of metrics.json (`evaluated` among them), over its evaluated rows."""
        ...

    def slices(self, ev: Evaluation) -> tuple[dict, dict]:
        """Per slice column {value: group}, and the group counts of columns with more groups than were kept."""
        ...

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        """The comparison with the completed run `baseline` on the rows both scored."""
        ...

    # SPEC section 13 (docs/labelling.md): the per-row targets and label-free predictions of the
    # prediction-powered metrics; labelling.py draws the plan and estimates from them.
    def label_free(self, ev: Evaluation, reference: RecordedMetrics | None) -> LabelFreeModel:
        """The views pp_label_free (row_index, f, u) and pp_cells (row_index, metric, term, f) over every
        scored row, f from the `reference` run's calibration (None: the model's own outputs)."""
        ...

    def label_targets(self, ev: Evaluation) -> None:
        """The table pp_targets (row_index, metric, term, y) over the rows with ground truth (after metrics)."""
        ...

    def label_free_variance(self, ev: Evaluation, reference: RecordedMetrics | None, rows: int) -> float | None:
        """The headline label-free estimate's own variance (estimate_bias's v_lf); None: no estimate_bias."""
        ...


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _number(value) -> float | None:
    """A SQL result as a metric: None for NULL, NaN and the infinities (a value that overflowed is
    not a number the metric has)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None

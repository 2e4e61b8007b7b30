"""The interface every kind of head is evaluated through (its spec), and what the driver hands it.

A kind's module (single_label.py, multi_label.py, regression.py) implements `HeadEvaluation` over
one open connection (`Evaluation.con`, holding the `predictions` and `staged` views and the
`labels` table) and owns the tables it makes there. Everything of the evaluation that depends on
the kind is a method or attribute of it, asked by a kind-free step:

    method / attribute   returns                                       asked by
    truth_table          the `truth` table; its source, column kind    driver.evaluate_run, driver.check_truth
    check_truth          the truth's rule (TruthMatching) or None      driver.check_truth (the read step)
    metrics              the kind's fields of metrics.json (KindMetrics) driver.evaluate_run
    reference_records    what a later run's estimate reads of this run driver.evaluate_run
    slices               per slice column {value: group}, truncated    driver.evaluate_run
    length_sides         the headline metric within/over the window    length_impact.length_impact
    comparison           metrics.json `comparison`                     driver.evaluate_run
    drift_signals        the kind's own drift signals (as views)       drift.signal_views
    estimate             the kind's fields of `estimated`              estimate.estimate
    label_free           SPEC 13's label-free f_i and u_i (views)      labelling.draw_plan
    label_targets        SPEC 13's per-row targets Y_i (a table)       labelling.prediction_powered
    label_free_variance  the label-free headline estimate's variance   labelling.prediction_powered
    report               the report's slice metrics and own sections   report/report.py

kinds.py registers them by HeadKind; driver.py runs them in one order for every kind; no other
module of the evaluation, the report, tasks/ or flows/ names a kind (tests/test_kind_spec.py).
docs/extending.md ("A kind of head") lists the same steps, held to this protocol by that test.

SPEC section 13 (prediction-powered evaluation) is asked of the kind through label_free,
label_targets and label_free_variance (labelling.py); section 14 (the representation and the words)
has no part that depends on the kind: the `representation` signal and `moved_tokens` are shared
(drift.py), as tokens, the unknown-token share and the slices are.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import (
    Comparison,
    Drift,
    Estimated,
    GroundTruthSource,
    KindMetrics,
    MetricsDocument,
    RecordedMetrics,
    ReferenceRecords,
    SliceGroups,
)
from scorekeeper.metrics.registry import SliceMetric
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection
    from scorekeeper.evaluation.labelling import LabelFreeModel
    from scorekeeper.evaluation.signals import RunSide, SignalViews

Logger = logging.Logger | logging.LoggerAdapter

# Shared by the kinds: the calibration bins, the log loss's clipping, the rows and text shown.
ECE_BINS = 15
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)  # scikit-learn clips probabilities by the dtype's eps
CONFIDENT_ERRORS = 20
EXCERPT_CHARS = 200


@dataclass
class Evaluation:
    """One run's evaluation in progress: its connection and what the request says about it."""

    con: Connection  # duck.connect_run's
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


@dataclass(frozen=True)
class LengthSide:
    """One side (within or over the window) of metrics.json `length_impact`: its evaluated rows, the
    kind's length metric (metric registry: `by_length`) and its 95% interval."""

    rows: int
    value: float | None
    ci: list[float] | None


@dataclass(frozen=True)
class KindReport:
    """What the report shows of a kind beyond the sections every kind shares (report/report.py)."""

    slice_metrics: tuple[SliceMetric, ...]  # the slice tables' metrics; the first orders the groups (worst first) and is the bar
    slice_caption: str | None  # the slice note's opening words ("Accuracy"), or None: the metrics' names with their intervals
    sections: tuple[str, ...]  # the kind's own report.md sections (report.report.KIND_SECTIONS), in order
    table_metrics: tuple[str, ...] = ()  # the rows of the kind's per-output table (report.html), when it has one


class HeadEvaluation(Protocol):
    """How one kind of head is evaluated: the kind's spec (the table in this module's docstring)."""

    kind: HeadKind
    report: KindReport

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        """The temp table `truth` (and the kind's own truth tables); where the truth came from and
        the kind of its column's values (None: the truth has no rule to decide)."""
        ...

    def check_truth(self, ev: Evaluation, column: ColumnKind | None) -> TruthMatching | None:
        """The read step's check of the staged truth, once `truth_table` has run, before anything is
        scored: the rule it is matched by (a column that resolves differently by name and by id is
        refused), or None where it has none; an InputError for a truth the head cannot take."""
        ...

    def metrics(self, ev: Evaluation, coverage: Coverage) -> KindMetrics:
        """The kind's fields of metrics.json (`evaluated` among them), over its evaluated rows: its
        part of the document (metrics/document.py: SingleLabelMetrics, MultiLabelMetrics, RegressionMetrics)."""
        ...

    def reference_records(self, ev: Evaluation) -> ReferenceRecords:
        """What a later run's estimate reads of this run (metrics.json fields), once `metrics` has
        run with evaluated rows (docs/drift.md)."""
        ...

    def slices(self, ev: Evaluation) -> tuple[SliceGroups, dict[str, int]]:
        """Per slice column {value: group}, and the group counts of columns with more groups than were kept."""
        ...

    def length_sides(self, ev: Evaluation) -> dict[bool, LengthSide]:
        """The kind's length metric over the evaluated rows within the window (False) and over it
        (True), over the `length_rows` table (length_impact.py); a side without evaluated rows is absent."""
        ...

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        """The comparison with the completed run `baseline` on the rows both scored."""
        ...

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None:
        """The kind's own drift signals of its outputs (tokens, the unknown-token share and the
        slices are drift.py's), each made by `views`, or named there as skipped with the reason."""
        ...

    def estimate(self, con: Connection, estimated: Estimated, labels: list[str], reference: RecordedMetrics, drift: Drift) -> None:
        """The kind's fields of `estimated` (or `estimated.unavailable`): this run's predictions on
        `con` against the `reference` run's recorded fields (its reference_records) and this run's `drift`."""
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


def mean_known(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def finite_number(value) -> float | None:
    """A SQL result as a metric: None for NULL, NaN and the infinities (a value that overflowed is
    not a number the metric has)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None

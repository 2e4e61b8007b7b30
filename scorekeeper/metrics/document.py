"""report/metrics.json as a typed document: what the evaluation builds, the comparison, the history
and the gates fill in, the report renders and one writer serialises.

The shape is the contract of docs/contracts.md (sections 3 and 6) and docs/evaluation.md's field tables;
every key keeps its name, type and place. Presence is part of it: a field is written when the step
that owns it set it (null included: a scoring-only run has `"accuracy": null`), and absent when
nothing set it (no `comparison` without compare_to, no `roc_auc` without evaluated rows, no
single-label field in a regression run). Pydantic's "fields set" is exactly that record, so the
writer dumps with `exclude_unset`. NaN is never written: a value that is not a finite number is
null (strict JSON, `allow_nan=False`).

Every part refuses keys it does not declare (a misspelt field is a bug, not a new key): a new field
of metrics.json is declared here, once (a kind's field in its part, which the document subclasses),
named in MetricsDocument.KEYS at its place in the file, and a new metric also gets its entry in
registry.py.

Other runs' metrics.json (compare_to, the history) are read tolerantly with `RecordedMetrics`:
runs written by earlier versions lack fields this one writes.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer
from pydantic.fields import FieldInfo

from scorekeeper.metrics.registry import HeadKind, history_metrics, summary_metrics
from scorekeeper.metrics.truth_matching import TruthMatching
from scorekeeper.scoring_summary import ScoringSummary

Number = float | None
GroundTruthSource = Literal["ground_truth_uri", "label_column"]  # ground_truth_uri's files, or label_column


class Part(BaseModel):
    """A part of the document: unknown keys refused (a typo is a bug), assignment validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# -- single-label evaluation (docs/contracts.md sections 3 and 6) ------------------------------------


class ClassScores(Part):
    precision: Number
    recall: Number
    f1: Number
    support: int


class CalibrationBin(Part):
    bin: int
    lower: float
    upper: float
    rows: int
    confidence: Number
    accuracy: Number


class ClassAreas(Part):
    """roc_auc / average_precision of a single-label run: one-vs-rest per class and their macro mean."""

    macro: Number
    per_class: dict[str, Number]


class ThresholdRow(Part):
    threshold: float
    rows: int
    coverage: float
    accuracy: Number
    macro_precision: Number
    macro_recall: Number
    macro_f1: Number


class RocCurve(Part):
    """A label's ROC curve: false and true positive rates, from the highest threshold to the lowest."""

    fpr: list[float]
    tpr: list[float]


class PrCurve(Part):
    """A label's precision-recall curve, from the highest threshold to the lowest."""

    recall: list[float]
    precision: list[float]


class Curves(Part):
    """metrics.json `curves`: per label (the ones with positives, and negatives for ROC), thinned for plotting."""

    roc: dict[str, RocCurve] = {}
    pr: dict[str, PrCurve] = {}


class ScoreHistogram(Part):
    edges: list[float]
    correct: list[int]
    wrong: list[int]


class ConfidentError(Part):
    row_index: int
    id: Any  # the input id's own type
    text: str | None
    truth: str | None
    predicted: str | None
    score: Number


class SliceGroup(Part):
    rows: int
    accuracy: Number
    accuracy_ci: list[float] | None = None


class LabelSliceGroup(Part):
    """A slice group of a multi-label run (scorekeeper/evaluation/slices.py says how its intervals are made)."""

    rows: int
    micro_f1: Number
    micro_f1_ci: list[float] | None = None
    subset_accuracy: Number
    subset_accuracy_ci: list[float] | None = None


class RegressionSliceGroup(Part):
    """A slice group of a regression run: MAE (the mean of the outputs' with several) and its interval."""

    rows: int
    mae: Number
    mae_ci: list[float] | None = None


SliceGroupPart = SliceGroup | LabelSliceGroup | RegressionSliceGroup
SliceGroups = dict[str, dict[str, SliceGroupPart]]  # metrics.json `slices`: per slice column, {value: group}


# -- multi-label evaluation -----------------------------------------------------------------------------


class LabelAreas(Part):
    """roc_auc / average_precision of a multi-label run."""

    macro: Number
    micro: Number
    per_label: dict[str, Number]


class MacroMicro(Part):
    """ece of a multi-label run: averaged over the labels, over every (row, label) cell, and per label."""

    macro: Number
    micro: Number
    per_label: dict[str, Number] | None = None


class LabelScores(Part):
    """per_label: at the label's threshold, and what a threshold tuned on half the rows gives."""

    precision: Number
    recall: Number
    f1: Number
    support: int
    prevalence: Number = None
    threshold: float
    tuned_threshold: Number = None
    tuned_f1_in_sample: Number = None
    tuned_f1_heldout: Number = None
    heldout_f1_at_threshold: Number = None


class ThresholdTuning(Part):
    split: str
    tuning_rows: int
    heldout_rows: int


class LabelCardinality(Part):
    truth: Number
    predicted: Number
    rows_without_prediction: int


class LabelCalibrationBin(Part):
    bin: int
    lower: float
    upper: float
    rows: int
    confidence: Number
    frequency: Number


class WrongLabel(Part):
    """confident_wrong_labels: a (row, label) cell the model was surest of and wrong about."""

    row_index: int
    id: Any
    label: str
    truth: bool
    probability: Number


# -- regression evaluation ------------------------------------------------------------------------------


class ResidualHistogram(Part):
    edges: list[float]
    counts: list[int]


class PredictedPoints(Part):
    kind: Literal["points"]
    truth: list[float]
    prediction: list[float]


class PredictedDensity(Part):
    kind: Literal["density"]
    lo: float
    hi: float
    bins: int
    cells: list[list[int]]  # [truth bin, prediction bin, rows]


class Decile(Part):
    decile: int
    rows: int
    mean_prediction: Number
    mean_truth: Number
    min_prediction: Number
    max_prediction: Number


class LargestError(Part):
    row_index: int
    id: Any
    text: str | None
    truth: Number
    prediction: Number
    error: Number


# -- comparison, history, gates ---------------------------------------------------------------------------


class FlipCounts(Part):
    right_to_wrong: int
    wrong_to_right: int
    other: int


class FlipSample(Part):
    row_index: int
    id: Any
    truth: str | None
    before: str | None
    after: str | None
    score_before: Number
    score_after: Number


class ClassDelta(Part):
    precision: Number
    recall: Number
    f1: Number


class SliceDelta(Part):
    accuracy: Number
    rows: int


class LabelFlips(Part):
    """A multi-label comparison's flips of one label's right/wrong cells, with McNemar's exact p."""

    right_to_wrong: int
    wrong_to_right: int
    mcnemar_p: float


class ErrorChange(Part):
    """A regression comparison's paired change of MAE or RMSE: this - other, paired bootstrap 95% interval."""

    this: float
    other: float
    delta: float
    ci: list[float]


class OutputComparison(Part):
    rows_compared: int
    mae: ErrorChange
    rmse: ErrorChange
    method: str
    resamples: int


class PairedTest(Part):
    """A delta's paired test (scorekeeper/evaluation/statistics/paired_tests.py): this - other, its 95% interval, the
    two-sided p-value of "no change", the method, the paired standard error."""

    delta: Number
    ci: list[float] | None
    p: Number
    method: str
    se: Number = None


class FamilyTest(Part):
    """A test of a per-class or per-slice family, with Holm's adjusted p-value."""

    delta: Number
    ci: list[float] | None
    p: Number
    p_holm: Number
    method: str


class SignificantCounts(Part):
    """Of each family's deltas, those significant at the 5% level (per class and per slice: after Holm)."""

    metric_tests: int
    per_class_tests: int
    slice_tests: int


class TestsCounted(Part):
    """Deltas that carry a p-value, and those significant (the families: after Holm)."""

    metric_tests: int
    per_class_tests: int
    slice_tests: int
    significant: SignificantCounts


class Comparison(Part):
    """metrics.json `comparison`: this run against another on the rows both scored. Regression runs
    have no right and wrong rows: `mae`/`rmse` (one output) or `per_output` instead of flips."""

    run: str
    rows_compared: int
    matched_on: Literal["row_index", "id"] | None = None
    flipped: FlipCounts | None = None
    mcnemar_p: float | None = None
    per_label: dict[str, LabelFlips] | None = None  # multi-label: each label's flips
    mae: ErrorChange | None = None
    rmse: ErrorChange | None = None
    method: str | None = None
    resamples: int | None = None
    per_output: dict[str, OutputComparison] | None = None
    truth_matching: TruthMatching | None = None  # how the other run's predictions were judged against this truth
    accuracy_delta_paired: Number = None
    accuracy_delta_ci: list[float] | None = None
    deltas: dict[str, Number]  # registry.compared_metrics, this - other
    samples: dict[str, list[FlipSample]] = {}
    per_class_deltas: dict[str, ClassDelta] = {}
    slice_deltas: dict[str, dict[str, SliceDelta]] = {}
    metric_tests: dict[str, PairedTest] = {}
    per_class_tests: dict[str, dict[str, FamilyTest]] = {}
    slice_tests: dict[str, dict[str, FamilyTest]] = {}
    tests_counted: TestsCounted | None = None


class AuditRow(Part):
    row_index: int
    id: Any  # the input id's own type
    text: str | None
    given: str
    suggested: str
    margin: float


class LabelAudit(Part):
    """metrics.json `label_audit`: confident learning's suspected label errors (scorekeeper/evaluation/label_audit.py)."""

    method: Literal["confident_learning"]
    thresholds: dict[str, Number]
    suspected: int
    by_pair: dict[str, dict[str, int]]
    rows: list[AuditRow]
    accuracy_excluding_suspected: Number


class HistoryEntry(Part):
    """One completed run under output_uri. The metrics are registry.history_metrics (a test checks
    each is a field here); extra keys allowed for the history metrics of other head kinds."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    finished_at: str | None
    rows: int | None
    evaluated: int | None
    accuracy: Number = None
    macro_f1: Number = None
    estimated_accuracy: Number = None
    drifted_signals: Number = None
    model_fingerprint: str | None
    adapter_fingerprint: str | None = None  # the history's "model changed" marker compares both
    input_fingerprint: str | None

    def record(self) -> dict:
        """The line as a dict, a monitoring metric only when it was set (docs/drift.md)."""
        unset = {m.name for m in history_metrics(None) if m.monitoring} - self.model_fields_set
        return self.model_dump(exclude=unset)


class LeftOutRun(Part):
    """A completed run the history left out (metrics.json `history_left_out`): its files are not the
    ones its complete.json vouches for (scorekeeper/run_seal.py), and `reason` says which and how."""

    run_id: str
    reason: str


class GateResult(Part):
    """One quality gate's verdict. A comparison gate adds its metric's test (`method`, `p`, `ci` of
    the gate's value) and `detectable_change`, with a `warning` when its limit is below that; an
    `if significant` gate adds `significant` (null: its test has no p-value)."""

    gate: str
    metric: str
    value: Number
    limit: float
    method: str | None = None
    p: Number = None
    ci: list[float] | None = None
    detectable_change: Number = None
    warning: str | None = None
    significant: bool | None = None
    passed: bool


class LengthSide(Part):
    """The evaluated rows on one side of the window (length_impact.within / .over): their count and
    the head's length metric (accuracy, micro_f1 or mae) with its 95% interval."""

    rows: int
    accuracy: Number = None
    accuracy_ci: list[float] | None = None
    micro_f1: Number = None
    micro_f1_ci: list[float] | None = None
    mae: Number = None
    mae_ci: list[float] | None = None


class LengthImpact(Part):
    """What the length costs (docs/long_text.md): evaluated rows with L <= W and with L > W."""

    within: LengthSide
    over: LengthSide


# -- monitoring without labels: the reference's calibration, drift and the estimate (docs/drift.md) -----


class LabelBinCount(Part):
    """calibration_by_label: a label's probability bin over the evaluated rows: rows in it, and
    those whose truth is (multi-label: includes) the label."""

    rows: int
    truth: int


class ResidualBin(Part):
    rows: int  # evaluated rows whose prediction falls in the bin
    mae: Number  # their mean absolute error (null: none)


class ResidualBins(Part):
    """residual_bins of one output: the bins of the `prediction` drift signal (the run's own
    nearest-rank deciles of its predictions, merged) with the absolute error in each."""

    edges: list[float]
    bins: list[ResidualBin]


class DriftBin(Part):
    """One bin of a drift signal: a categorical value (`null`: the null value, `other`: the values
    past the reference's 49 most frequent), or a numeric interval (lower, upper] (null: infinite;
    `null`: the null values); both runs' rows in it and their shares of the run's rows."""

    value: str | None = None
    null: bool = False
    other: bool = False
    lower: float | None = None
    upper: float | None = None
    reference_rows: int
    current_rows: int
    reference: float
    current: float


class DriftSignal(Part):
    kind: Literal["numeric", "categorical"]
    bins: list[DriftBin]
    psi: float
    p: float
    ks: Number = None  # numeric signals only
    p_holm: float
    drifted: bool | None  # null: not judged (too few rows, `reason`)
    reason: str | None = None


class DriftRows(Part):
    reference: int
    current: int


class RepresentationRows(Part):
    fit: int
    test: int


class RepresentationSides(Part):
    reference: RepresentationRows
    current: RepresentationRows


class RepresentationExample(Part):
    """A current test row the classifier is surest is unlike the reference (the largest decision function)."""

    row_index: int
    id: int | str | None
    text: str | None  # the first 300 characters of the text column
    score: float  # the decision function


class RepresentationSignal(Part):
    """drift.signals.representation (SPEC section 14, scorekeeper/evaluation/representation.py): a
    classifier of the two runs' embeddings, its held-out AUC and the one-sided Mann-Whitney p."""

    auc: float
    auc_ci: list[float]  # Hanley-McNeil, clipped to [0, 1]
    p: float
    p_holm: float
    drifted: bool | None  # null: not judged (fewer than 100 test rows in either run, `reason`)
    reason: str | None = None
    rows: RepresentationSides
    examples: list[RepresentationExample]  # the 20 current test rows most unlike the reference, largest score first


class MovedToken(Part):
    """One of drift.moved_tokens (SPEC section 14): a token whose share moved most between the runs."""

    token_id: int
    token: str | None
    reference_count: int
    current_count: int
    reference_share: float
    current_share: float
    log_ratio: float  # ln(current_share / reference_share)


class Drift(Part):
    """metrics.json `drift` (scorekeeper/evaluation/drift.py): signals worst PSI first."""

    reference: str
    rows: DriftRows
    min_psi: float
    signals: dict[str, DriftSignal | RepresentationSignal]  # section 12's worst PSI first, then representation
    drifted: list[str]
    drifted_signals: int | None  # len(drifted): what the drifted_signals gate reads; null when no signal was judged
    alarm: bool | None  # any signal drifted; null when no signal was judged
    skipped: dict[str, str]  # signal (or moved_tokens) -> why one of the runs cannot supply it
    min_auc: float | None = None  # drift_min_auc, the representation signal's floor
    moved_tokens: list[MovedToken] | None = None  # the 20 tokens whose share moved most; null: `skipped` says why

    def binned(self) -> dict[str, DriftSignal]:
        """Section 12's signals (bins, PSI), worst PSI first: every signal but representation."""
        return {name: s for name, s in self.signals.items() if isinstance(s, DriftSignal)}

    def representation(self) -> RepresentationSignal | None:
        """SPEC section 14's representation signal, when it was measured."""
        return next((s for s in self.signals.values() if isinstance(s, RepresentationSignal)), None)


class Estimated(Part):
    """metrics.json `estimated` (docs/drift.md): this run's performance from
    the reference's calibration; `unavailable` says why a value is missing."""

    method: Literal["reference_calibration"]
    reference: str
    assumptions: str
    rows: int
    accuracy: Number = None
    accuracy_ci: list[float] | None = None
    macro_f1: Number = None
    macro_f1_ci: list[float] | None = None
    micro_f1: Number = None
    micro_f1_ci: list[float] | None = None
    mae: Number = None
    per_output: dict[str, Number] | None = None
    unavailable: str | None = None
    caveat: str | None = None  # an input signal drifted: the estimate's assumption is in doubt (names them)


class LabelPlan(Part):
    """metrics.json `label_plan` (docs/labelling.md): the Poisson sample of this run's rows to label."""

    sampling: Literal["active", "uniform"]
    budget: int
    rows: int  # rows drawn into report/label_plan.parquet
    expected_rows: float  # sum of the inclusion probabilities over every scored row
    key: str  # the run id the draws are keyed on
    reference: str | None  # the run whose calibration gave f (the drift reference), or null


class PredictionPoweredMetric(Part):
    value: Number
    ci: list[float] | None
    lam: float | list[float] | dict[str, float] = Field(alias="lambda")
    classical: Number
    classical_ci: list[float] | None

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, serialize_by_alias=True)


class EstimateBias(Part):
    metric: str
    label_free: Number
    value: Number
    ci: list[float] | None
    p: Number


class PredictionPowered(Part):
    """metrics.json `prediction_powered` (docs/labelling.md): the run's metrics from the labelled plan
    rows and the label-free predictions on every row."""

    method: Literal["prediction_powered"]
    sampling: Literal["active", "uniform"]
    rows: int
    plan_rows: int
    labelled: int
    unlabelled_plan_rows: int
    labelled_outside_plan: int
    response_rate: float
    small_sample: bool
    metrics: dict[str, PredictionPoweredMetric]
    estimate_bias: EstimateBias | None
    assumptions: str | None = None


# -- the document ----------------------------------------------------------------------------------------


# -- each kind's part of the document (HeadEvaluation.metrics, .reference_records) -----------------


class KindPart(Part):
    """A part of the document a kind's evaluation returns; MetricsDocument subclasses every part, so
    each field is declared once, here, and the fields a part sets are the ones the document gets."""

    def fields(self) -> dict[str, Any]:
        """The fields set, as the document is built from them (nothing set is nothing written)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class KindMetrics(KindPart):
    """A kind's fields of metrics.json over its evaluated rows (HeadEvaluation.metrics)."""

    evaluated: int
    truth_matching: TruthMatching | None = None  # the one rule matching the ground truth to the labels
    unknown_labels: dict[str, int] | None = None
    unknown_label_rows: int | None = None


class ClassifierMetrics(KindMetrics):
    """The fields single-label and multi-label runs share (docs/contracts.md sections 3 and 6)."""

    macro_f1: Number = None
    weighted_f1: Number = None
    log_loss: Number = None
    ece: float | MacroMicro | None = None
    ece_bins: int | None = None
    roc_auc: ClassAreas | LabelAreas | None = None
    average_precision: ClassAreas | LabelAreas | None = None
    curves: Curves | None = None


class SingleLabelMetrics(ClassifierMetrics):
    accuracy: Number = None
    log_loss_rows: int | None = None
    calibration: list[CalibrationBin] | None = None
    per_class: dict[str, ClassScores] | None = None
    confusion: dict[str, dict[str, int]] | None = None
    accuracy_ci: list[float] | None = None
    top_k_accuracy: dict[str, float] | None = None
    thresholds: list[ThresholdRow] | None = None
    score_histogram: ScoreHistogram | None = None
    confident_errors: list[ConfidentError] | None = None
    label_audit: LabelAudit | None = None


class MultiLabelMetrics(ClassifierMetrics):
    subset_accuracy: Number = None
    hamming_loss: Number = None
    micro_f1: Number = None
    micro_precision: Number = None
    micro_recall: Number = None
    samples_f1: Number = None
    lrap: Number = None
    coverage_error: Number = None
    ranking_loss: Number = None
    per_label: dict[str, LabelScores] | None = None
    threshold_tuning: ThresholdTuning | None = None
    label_cardinality: LabelCardinality | None = None
    label_calibration: dict[str, list[LabelCalibrationBin]] | None = None
    confident_wrong_labels: list[WrongLabel] | None = None


class RegressionMetrics(KindMetrics):
    """With several outputs, the mean of the outputs' values; each under per_output."""

    outputs: list[str] | None = None
    mae: Number = None
    mse: Number = None
    rmse: Number = None
    r2: Number = None
    explained_variance: Number = None
    max_error: Number = None
    median_absolute_error: Number = None
    mape: Number = None
    mape_rows: int | None = None
    wmape: Number = None
    pearson: Number = None
    spearman: Number = None
    kendall_tau_b: Number = None
    mean_truth: Number = None
    mean_prediction: Number = None
    no_truth_rows: int | None = None
    partial_truth_rows: int | None = None
    not_finite_rows: int | None = None
    per_output: dict[str, dict[str, int | float | None]] | None = None
    residual_histogram: dict[str, ResidualHistogram] | None = None
    predicted_vs_true: dict[str, PredictedPoints | PredictedDensity] | None = None
    calibration_deciles: dict[str, list[Decile]] | None = None
    largest_errors: dict[str, list[LargestError]] | None = None


class ReferenceRecords(KindPart):
    """What a later run's estimate and labelling plan read of this run, every run with ground truth
    (HeadEvaluation.reference_records; RecordedMetrics reads them back; docs/drift.md)."""

    calibration_by_label: dict[str, list[LabelBinCount]] | None = None
    residual_bins: dict[str, ResidualBins] | None = None


class MetricsDocument(SingleLabelMetrics, MultiLabelMetrics, RegressionMetrics, ReferenceRecords):
    """report/metrics.json: every kind's part (declared above, each field once) and the fields of
    the document's own. KEYS is the order of the keys in the file."""

    KEYS: ClassVar[tuple[str, ...]] = (
        *("rows", "scored", "evaluated", "ground_truth_source", "truth_matching", "scoring_only", "head"),
        # single-label scores (docs/contracts.md sections 3 and 6)
        *("accuracy", "macro_f1", "weighted_f1", "log_loss", "log_loss_rows", "ece", "ece_bins", "calibration", "per_class"),
        *("confusion", "labels", "ground_truth_rows", "missing_predictions", "unmatched_predictions", "unknown_labels"),
        *("unknown_label_rows", "null_text_rows", "slices", "slices_truncated", "finished_at", "accuracy_ci", "roc_auc"),
        *("average_precision", "top_k_accuracy", "thresholds", "curves", "score_histogram", "confident_errors"),
        # multi-label
        *("subset_accuracy", "hamming_loss", "micro_f1", "micro_precision", "micro_recall", "samples_f1", "lrap"),
        *("coverage_error", "ranking_loss", "per_label", "threshold_tuning", "label_cardinality", "label_calibration"),
        "confident_wrong_labels",
        # regression
        *("outputs", "mae", "mse", "rmse", "r2", "explained_variance", "max_error", "median_absolute_error", "mape"),
        *("mape_rows", "wmape", "pearson", "spearman", "kendall_tau_b", "mean_truth", "mean_prediction", "no_truth_rows"),
        *("partial_truth_rows", "not_finite_rows", "per_output", "residual_histogram", "predicted_vs_true"),
        *("calibration_deciles", "largest_errors"),
        # every kind; then what a later run's estimate needs of this one; then what is filled in after
        *("length_impact", "calibration_by_label", "residual_bins", "label_audit", "comparison", "drift", "estimated"),
        *("label_plan", "prediction_powered", "history", "history_left_out", "gates", "scoring"),
    )

    rows: int
    scored: int
    ground_truth_source: GroundTruthSource | None
    scoring_only: bool
    head: HeadKind
    labels: list[str] | None = None
    ground_truth_rows: int | None = None
    missing_predictions: int | None = None
    unmatched_predictions: int | None = None
    null_text_rows: int | None = None
    slices: SliceGroups | None = None
    slices_truncated: dict[str, int] | None = None
    finished_at: str | None = None
    # every kind: the head's metric within and over the window, when rows are over (docs/long_text.md)
    length_impact: LengthImpact | None = None
    # filled in after the evaluation: compare_to, the history, the gates, the scoring step's facts
    comparison: Comparison | None = None
    drift: Drift | None = None
    estimated: Estimated | None = None
    label_plan: LabelPlan | None = None
    prediction_powered: PredictionPowered | None = None
    history: list[HistoryEntry] | None = None
    history_left_out: list[LeftOutRun] | None = None  # set only when a completed run was left out
    gates: list[GateResult] | None = None
    scoring: ScoringSummary | None = None

    @field_serializer("scoring")
    def _scoring(self, scoring: ScoringSummary | None) -> dict[str, Any] | None:
        return None if scoring is None else scoring.as_dict()  # the fields that are set and not null

    def finite(self) -> MetricsDocument:
        """The document as metrics.json holds it, typed: the same fields set, NaN and infinities None.
        What the report renders, so that no page can show a number the file does not hold."""
        return type(self).model_validate(self.as_dict())

    def as_dict(self) -> dict:
        """The document as metrics.json holds it: the fields set, in KEYS' order, JSON types, NaN and
        infinities null."""
        fields = self.model_dump(mode="json", exclude_unset=True)
        return _finite({name: fields[name] for name in self.KEYS if name in fields})

    @classmethod
    def fields_in_order(cls) -> dict[str, FieldInfo]:
        """The document's fields in the file's order (pydantic's model_fields holds the parts' first)."""
        return {name: cls.model_fields[name] for name in cls.KEYS}

    def to_json_bytes(self) -> bytes:
        """metrics.json's bytes: the one writer of the document."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False).encode() + b"\n"

    def summary(self) -> dict:
        """What the flow returns about its metrics (the command's last line reads it)."""
        return (
            {"evaluated": self.evaluated}
            | {m.name: m.value(self) for m in summary_metrics(self.head)}
            | {
                "scoring_only": self.scoring_only,
                "ground_truth_source": self.ground_truth_source,
                "missing_predictions": self.missing_predictions,
                "ground_truth_rows": self.ground_truth_rows,
                "unknown_label_rows": self.unknown_label_rows,
            }
        )


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class RecordedMetrics(BaseModel):
    """Another run's metrics.json, read back for compare_to and the history. Tolerant: every field
    may be missing (older runs wrote fewer), unknown ones are kept for lookups by path; a run
    without `head` was single-label (the only kind there was)."""

    model_config = ConfigDict(extra="allow")

    head: HeadKind = HeadKind.SINGLE_LABEL
    finished_at: str | None = None
    rows: int | None = None
    evaluated: int | None = None
    # what a later run's estimate and labelling plan read of it (its kind's reference_records)
    calibration: list[CalibrationBin] | None = None
    calibration_by_label: dict[str, list[LabelBinCount]] | None = None
    residual_bins: dict[str, ResidualBins] | None = None

    @classmethod
    def parse(cls, data: Any) -> RecordedMetrics | None:
        """The parsed JSON of a metrics.json, or None when it is not a metrics document at all."""
        if not isinstance(data, dict):
            return None
        try:
            return cls.model_validate(data)
        except ValidationError:
            return None


def history_entry(run_id: str, metrics: MetricsDocument | RecordedMetrics, plan: dict | None) -> HistoryEntry:
    """A run's line in metrics.json `history`: its counts, its history metrics, what it scored."""
    plan = plan or {}
    entry: dict[str, Any] = {"run_id": run_id, "finished_at": metrics.finished_at, "rows": metrics.rows, "evaluated": metrics.evaluated}
    # a monitoring metric is in the line only when the run had a drift_reference (else the line is as before)
    entry |= {m.name: m.value(metrics) for m in history_metrics(metrics.head) if not m.monitoring or m.value(metrics) is not None}
    entry |= {k: plan.get(k) for k in ("model_fingerprint", "adapter_fingerprint", "input_fingerprint")}
    return HistoryEntry.model_validate(entry)

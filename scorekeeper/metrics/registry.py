"""Every metric of metrics.json, declared once: its name, where it lives, which way is better.

The quality gates (which names they accept and where they read them), the comparison's `deltas`,
the report's headline (cards, markdown table, the Prefect summary), the history, the command's last
line and the colours of a change in the report all read this table; none keeps a list of its own.
A metric is one `Metric` entry in METRICS; its value is computed by the evaluation of its head kind
and written at its `path` in the document (scorekeeper/metrics/document.py), which a test checks.

Lookups take the run's head kind (metrics.json `head`): a single-label run has no `hamming_loss`,
a regression run no `accuracy`. Pure data, no Prefect, no DuckDB: the parameter model validates
gates with it before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from scorekeeper.head_kind import HeadKind


class Direction(StrEnum):
    HIGHER = "higher"  # higher is better
    LOWER = "lower"  # lower is better
    NEITHER = "neither"  # a description of the data (a mean, a count of rows), not a quality


class Pairing(StrEnum):
    """How two runs' values of a metric are compared on the rows both scored: the kind of paired
    test that fits it (the tests themselves live with the comparison)."""

    COUNT = "count-based"  # a share of rows with a 0/1 outcome: discordant counts (McNemar, multinomial bootstrap)
    ROW_MEAN = "per-row mean"  # the mean of a per-row loss: paired differences of that loss
    RANKING = "ranking"  # an area under a curve over the rows' scores: DeLong, or a paired bootstrap
    RESAMPLED = "resampled"  # a statistic of all rows at once (F1, ECE, R²): a paired bootstrap of rows
    SAMPLED = "row sample"  # of ranks or order (Spearman, Kendall, a median): a paired bootstrap of a row sample


class Headline(StrEnum):
    ALWAYS = "always"  # shown in every run with ground truth, "n/a" when undefined
    IF_DEFINED = "if defined"  # shown only when it has a value (an undefined ROC-AUC, top-5 with 4 labels)


class Scope(StrEnum):
    RUN = "run"  # a field of this run's evaluation
    COMPARISON = "comparison"  # a statistic of `comparison`, present with compare_to


SINGLE = frozenset({HeadKind.SINGLE_LABEL})
MULTI = frozenset({HeadKind.MULTI_LABEL})
REGRESSION = frozenset({HeadKind.REGRESSION})
CLASSIFIERS = SINGLE | MULTI
EVERY_HEAD = frozenset(HeadKind)

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Metric:
    name: str  # the name gates, deltas and the headline use
    path: Path  # where metrics.json holds it
    direction: Direction
    heads: frozenset[HeadKind]
    compared: Pairing | None = None  # in comparison.deltas (and `_drop`/`_delta` gates), tested this way
    headline: Headline | None = None  # in the report's headline
    title: str = ""  # the headline card's name for people; default: the name with spaces
    count: bool = False  # a number of rows: in the headline table, not a card
    interval: Path | None = None  # a [low, high] interval shown with it
    history: bool = False  # recorded per run in metrics.json `history`
    summary: bool = False  # printed on the command's last line
    scope: Scope = Scope.RUN
    by_length: bool = False  # metrics.json `length_impact` splits it by the texts' length (one per head kind)
    monitoring: bool = False  # of `drift` / `estimated` (drift_reference): absent from a run's history line without it
    labelling: bool = False  # of `prediction_powered` (label_budget, labels back for the plan's rows)
    absolute: bool = False  # the gate reads the absolute value (estimate_bias)

    @property
    def label(self) -> str:
        return self.title or self.name.replace("_", " ")

    def value(self, document: Any) -> float | None:
        """This metric's number in a metrics document (typed, or another run's parsed JSON); None
        when absent, null or not a number."""
        value = number_at(document, self.path)
        return abs(value) if self.absolute and value is not None else value


def _top_k(k: int) -> Metric:
    return Metric(
        f"top_{k}_accuracy",
        ("top_k_accuracy", str(k)),
        Direction.HIGHER,
        SINGLE,
        headline=Headline.IF_DEFINED,
        title=f"top-{k} accuracy",
    )


TOP_K_MAX = 5  # top-k accuracy for k = 2..5 (fewer with fewer labels)

# The order is the order of the gates' list, of `comparison.deltas` and of the headline.
METRICS: tuple[Metric, ...] = (
    # -- single-label (docs/contracts.md sections 3 and 6), some shared with multi-label --------------
    Metric(
        "accuracy",
        ("accuracy",),
        Direction.HIGHER,
        SINGLE,
        compared=Pairing.COUNT,
        headline=Headline.ALWAYS,
        interval=("accuracy_ci",),
        history=True,
        summary=True,
        by_length=True,
    ),
    Metric(
        "subset_accuracy", ("subset_accuracy",), Direction.HIGHER, MULTI, compared=Pairing.COUNT, headline=Headline.ALWAYS, summary=True
    ),
    Metric(
        "micro_f1",
        ("micro_f1",),
        Direction.HIGHER,
        MULTI,
        compared=Pairing.RESAMPLED,
        headline=Headline.ALWAYS,
        summary=True,
        by_length=True,
    ),
    Metric(
        "macro_f1",
        ("macro_f1",),
        Direction.HIGHER,
        CLASSIFIERS,
        compared=Pairing.RESAMPLED,
        headline=Headline.ALWAYS,
        history=True,
        summary=True,
    ),
    Metric("weighted_f1", ("weighted_f1",), Direction.HIGHER, CLASSIFIERS, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS),
    Metric("samples_f1", ("samples_f1",), Direction.HIGHER, MULTI, compared=Pairing.ROW_MEAN, headline=Headline.ALWAYS),
    Metric("hamming_loss", ("hamming_loss",), Direction.LOWER, MULTI, compared=Pairing.ROW_MEAN, headline=Headline.ALWAYS),
    Metric("micro_precision", ("micro_precision",), Direction.HIGHER, MULTI, compared=Pairing.RESAMPLED),
    Metric("micro_recall", ("micro_recall",), Direction.HIGHER, MULTI, compared=Pairing.RESAMPLED),
    Metric(
        "log_loss",
        ("log_loss",),
        Direction.LOWER,
        CLASSIFIERS,
        compared=Pairing.ROW_MEAN,
        headline=Headline.ALWAYS,
        summary=True,
    ),
    Metric("ece", ("ece",), Direction.LOWER, SINGLE, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS, summary=True),
    Metric("ece_macro", ("ece", "macro"), Direction.LOWER, MULTI, compared=Pairing.RESAMPLED),
    Metric("ece_micro", ("ece", "micro"), Direction.LOWER, MULTI, compared=Pairing.RESAMPLED),
    Metric(
        "roc_auc_macro",
        ("roc_auc", "macro"),
        Direction.HIGHER,
        CLASSIFIERS,
        compared=Pairing.RANKING,
        headline=Headline.IF_DEFINED,
        title="ROC-AUC (macro)",
    ),
    Metric("roc_auc_micro", ("roc_auc", "micro"), Direction.HIGHER, MULTI, compared=Pairing.RANKING),
    Metric(
        "average_precision_macro",
        ("average_precision", "macro"),
        Direction.HIGHER,
        CLASSIFIERS,
        compared=Pairing.RANKING,
        headline=Headline.IF_DEFINED,
        title="average precision (macro)",
    ),
    Metric("average_precision_micro", ("average_precision", "micro"), Direction.HIGHER, MULTI, compared=Pairing.RANKING),
    Metric("lrap", ("lrap",), Direction.HIGHER, MULTI, compared=Pairing.ROW_MEAN, headline=Headline.ALWAYS),
    Metric("coverage_error", ("coverage_error",), Direction.LOWER, MULTI, compared=Pairing.ROW_MEAN),
    Metric("ranking_loss", ("ranking_loss",), Direction.LOWER, MULTI, compared=Pairing.ROW_MEAN),
    Metric("accuracy_ci_low", ("accuracy_ci", 0), Direction.HIGHER, SINGLE),
    Metric("accuracy_ci_high", ("accuracy_ci", 1), Direction.HIGHER, SINGLE),
    *(_top_k(k) for k in range(2, TOP_K_MAX + 1)),
    Metric("label_cardinality_truth", ("label_cardinality", "truth"), Direction.NEITHER, MULTI),
    Metric("label_cardinality_predicted", ("label_cardinality", "predicted"), Direction.NEITHER, MULTI),
    Metric("rows_without_prediction", ("label_cardinality", "rows_without_prediction"), Direction.LOWER, MULTI, count=True),
    # -- regression ----------------------------------------------------------------------------------------
    Metric("mae", ("mae",), Direction.LOWER, REGRESSION, compared=Pairing.ROW_MEAN, headline=Headline.ALWAYS, summary=True, by_length=True),
    Metric("mse", ("mse",), Direction.LOWER, REGRESSION, compared=Pairing.ROW_MEAN),
    Metric("rmse", ("rmse",), Direction.LOWER, REGRESSION, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS, summary=True),
    Metric("r2", ("r2",), Direction.HIGHER, REGRESSION, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS, summary=True),
    Metric("explained_variance", ("explained_variance",), Direction.HIGHER, REGRESSION, compared=Pairing.RESAMPLED),
    Metric("max_error", ("max_error",), Direction.LOWER, REGRESSION, compared=Pairing.RESAMPLED),
    Metric("median_absolute_error", ("median_absolute_error",), Direction.LOWER, REGRESSION, compared=Pairing.SAMPLED),
    Metric("mape", ("mape",), Direction.LOWER, REGRESSION, compared=Pairing.ROW_MEAN, headline=Headline.ALWAYS),
    Metric("mape_rows", ("mape_rows",), Direction.NEITHER, REGRESSION, count=True),
    Metric("wmape", ("wmape",), Direction.LOWER, REGRESSION, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS),
    Metric("pearson", ("pearson",), Direction.HIGHER, REGRESSION, compared=Pairing.RESAMPLED, headline=Headline.ALWAYS),
    Metric("spearman", ("spearman",), Direction.HIGHER, REGRESSION, compared=Pairing.SAMPLED, headline=Headline.ALWAYS),
    Metric("kendall_tau_b", ("kendall_tau_b",), Direction.HIGHER, REGRESSION, compared=Pairing.SAMPLED, headline=Headline.ALWAYS),
    Metric("mean_truth", ("mean_truth",), Direction.NEITHER, REGRESSION),
    Metric("mean_prediction", ("mean_prediction",), Direction.NEITHER, REGRESSION),
    # -- coverage of the evaluation, every head --------------------------------------------------------
    Metric("evaluated", ("evaluated",), Direction.HIGHER, EVERY_HEAD, count=True),
    Metric("missing_predictions", ("missing_predictions",), Direction.LOWER, EVERY_HEAD, headline=Headline.ALWAYS, count=True),
    Metric("unmatched_predictions", ("unmatched_predictions",), Direction.LOWER, EVERY_HEAD, headline=Headline.ALWAYS, count=True),
    # -- monitoring against drift_reference (docs/drift.md): present only when the run has one ---------
    Metric("drifted_signals", ("drift", "drifted_signals"), Direction.LOWER, EVERY_HEAD, count=True, history=True, monitoring=True),
    Metric(
        "estimated_accuracy",
        ("estimated", "accuracy"),
        Direction.HIGHER,
        SINGLE,
        interval=("estimated", "accuracy_ci"),
        history=True,
        monitoring=True,
    ),
    Metric(
        "estimated_macro_f1",
        ("estimated", "macro_f1"),
        Direction.HIGHER,
        CLASSIFIERS,
        monitoring=True,
        interval=("estimated", "macro_f1_ci"),
    ),
    Metric(
        "estimated_micro_f1", ("estimated", "micro_f1"), Direction.HIGHER, MULTI, monitoring=True, interval=("estimated", "micro_f1_ci")
    ),
    Metric("estimated_mae", ("estimated", "mae"), Direction.LOWER, REGRESSION, monitoring=True),
    # -- the labelled plan's prediction-powered estimates (docs/labelling.md): present once plan rows have labels
    *(
        Metric(
            f"pp_{name}",
            ("prediction_powered", "metrics", name, "value"),
            direction,
            heads,
            interval=("prediction_powered", "metrics", name, "ci"),
            labelling=True,
        )
        for name, direction, heads in (
            ("accuracy", Direction.HIGHER, SINGLE),
            ("macro_f1", Direction.HIGHER, CLASSIFIERS),
            ("micro_f1", Direction.HIGHER, MULTI),
            ("subset_accuracy", Direction.HIGHER, MULTI),
            ("mae", Direction.LOWER, REGRESSION),
        )
    ),  # fmt: skip
    Metric("estimate_bias", ("prediction_powered", "estimate_bias", "value"), Direction.LOWER, EVERY_HEAD, labelling=True, absolute=True),
    # -- statistics of the comparison with another run (compare_to) -----------------------------------
    Metric("mcnemar_p", ("comparison", "mcnemar_p"), Direction.NEITHER, SINGLE, scope=Scope.COMPARISON),
    Metric("right_to_wrong", ("comparison", "flipped", "right_to_wrong"), Direction.LOWER, SINGLE, scope=Scope.COMPARISON, count=True),
    Metric("wrong_to_right", ("comparison", "flipped", "wrong_to_right"), Direction.HIGHER, SINGLE, scope=Scope.COMPARISON, count=True),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
if len(BY_NAME) != len(METRICS):  # pragma: no cover - a mistake in the table above
    raise ValueError("scorekeeper/metrics/registry.py: a metric name is declared twice")


def metric_value(document: Any, name: str) -> float | None:
    """A metric's number in a metrics document by its name; None for a name the registry lacks."""
    metric = BY_NAME.get(name)
    return metric.value(document) if metric else None


def head_of(document: Any) -> HeadKind:
    """A metrics document's head kind; documents written before metrics.json recorded it were
    single-label (the only kind there was)."""
    return HeadKind(value_at(document, ("head",)) or HeadKind.SINGLE_LABEL)


def _heads(head: HeadKind | None) -> frozenset[HeadKind]:
    return EVERY_HEAD if head is None else frozenset({HeadKind(head)})


def metrics_of(head: HeadKind | None = HeadKind.SINGLE_LABEL, scope: Scope | None = None) -> list[Metric]:
    """The metrics a run of `head` has (None: of any head), in declaration order."""
    heads = _heads(head)
    return [m for m in METRICS if m.heads & heads and (scope is None or m.scope == scope)]


def run_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    """The metrics of a run's own evaluation (gates on them need no compare_to)."""
    return metrics_of(head, Scope.RUN)


def compared_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    """The metrics whose change between two runs `comparison.deltas` reports, in its key order."""
    return [m for m in run_metrics(head) if m.compared is not None]


def scalar_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    """The run's metrics that are one top-level number of metrics.json (not a row count): what a
    head's evaluation computes as one value each."""
    return [m for m in run_metrics(head) if len(m.path) == 1 and not m.count]


def headline_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    return [m for m in run_metrics(head) if m.headline is not None]


def history_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    return [m for m in run_metrics(head) if m.history]


def history_columns(head: HeadKind | None, history: Iterable[Any]) -> list[Metric]:
    """The history metrics a report shows for these history lines (HistoryEntry or parsed JSON): a
    monitoring one only when some line has it (a history without drift_reference reads as before)."""
    lines = list(history)
    return [m for m in history_metrics(head) if not m.monitoring or any(value_at(line, (m.name,)) is not None for line in lines)]


def summary_metrics(head: HeadKind | None = HeadKind.SINGLE_LABEL) -> list[Metric]:
    return [m for m in run_metrics(head) if m.summary]


def length_metric(head: HeadKind) -> str:
    """The metric metrics.json `length_impact` shows within and over the window for this head."""
    (metric,) = [m.name for m in run_metrics(head) if m.by_length]
    return metric


def lower_is_better(head: HeadKind | None = None) -> frozenset[str]:
    """Names of the metrics whose decrease is an improvement (the report colours changes by it)."""
    return frozenset(m.name for m in metrics_of(head) if m.direction == Direction.LOWER)


# -- reading a value at a path: typed documents and parsed JSON alike ----------------------------------


def value_at(document: Any, path: Iterable[str | int]) -> Any:
    """The value at `path` in a metrics document: a pydantic model (fields, extras), a mapping or a
    list; None where any step is missing."""
    value = document
    for key in path:
        if value is None:
            return None
        if isinstance(key, int):
            value = value[key] if isinstance(value, list | tuple) and len(value) > key else None
        elif isinstance(value, BaseModel):
            value = getattr(value, key, None)
        elif isinstance(value, Mapping):
            value = value.get(key)
        else:
            return None
    return value


def number_at(document: Any, path: Iterable[str | int]) -> float | None:
    """The number at `path` as a float; None when absent, null, not a number (or a bool)."""
    value = value_at(document, path)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- the slice tables' metrics ------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceMetric:
    """A metric of the slice tables (a kind's spec names them: evaluation/base.KindReport): the
    registry's metric (its name is the slice group's field and the document's overall value, its
    direction orders the groups), its interval's field, how that is made."""

    metric: Metric
    interval: str
    how: str

    @property
    def key(self) -> str:
        return self.metric.name

    @property
    def lower_is_better(self) -> bool:
        return self.metric.direction == Direction.LOWER

    def of(self, group: Any) -> float | None:
        return number_at(group, (self.key,))

    def interval_of(self, group: Any) -> list[float] | None:
        return value_at(group, (self.interval,))

    def overall(self, document: Any) -> float | None:
        return self.metric.value(document)

"""The report's comparison with another run: one view (`ComparisonView`, built by `comparison_view`
from the typed document) rendered by templates/comparison.md.j2 (the comparison and its paired
tests) and templates/comparison.html.j2 (scorekeeper/report/view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from scorekeeper.metrics.document import Comparison, ErrorChange, MetricsDocument
from scorekeeper.metrics.registry import lower_is_better, metric_value, value_at
from scorekeeper.report.report_stats import CLASS_TESTS, class_mark, mark, tests_sentence
from scorekeeper.report.view import Num, at

CLASS_DELTAS = ("precision", "recall", "f1")  # ClassDelta's fields, in the table's order
FLIP_SAMPLES = (("right_to_wrong", "Right before, wrong now"), ("wrong_to_right", "Wrong before, right now"))


@dataclass(frozen=True)
class ErrorChangeRow:
    """A one-output regression comparison's paired change of MAE or RMSE."""

    name: str
    delta: Num
    this: float
    other: float
    ci: Num


@dataclass(frozen=True)
class TestRow:
    """A paired test of a delta (a headline metric, a class's F1, precision or recall, a slice's accuracy)."""

    name: str
    delta: Num
    ci: Num
    p: Num
    p_holm: Num
    method: str | None
    mark: str  # the significance mark (families: by Holm's adjusted p)


@dataclass(frozen=True)
class DeltaRow:
    """A compared metric: this run's value, the other's, the change and its test (if tested)."""

    name: str
    lower_is_better: bool
    now: float | None
    other: float | None
    change: Num
    test: TestRow


@dataclass(frozen=True)
class ClassTests:
    label: str
    tests: tuple[TestRow, ...]  # CLASS_TESTS' order
    mark: str


@dataclass(frozen=True)
class ClassChanges:
    label: str
    changes: tuple[Num, ...]  # CLASS_DELTAS' order


@dataclass(frozen=True)
class SliceRow:
    column: str
    value: str
    rows: Num
    accuracy: Num  # the change without a test
    test: TestRow | None


@dataclass(frozen=True)
class SampleRow:
    row_index: int
    id: object
    truth: object
    before: object
    score_before: object
    after: object
    score_after: object


@dataclass(frozen=True)
class FlipSamples:
    title: str
    rows: tuple[SampleRow, ...]
    flipped: object  # the flips counted of that kind


@dataclass(frozen=True)
class Flips:
    right_to_wrong: Num
    wrong_to_right: Num
    other: Num


@dataclass(frozen=True)
class ComparisonView:
    """The comparison section (templates/comparison.md.j2, comparison.html.j2)."""

    run: str
    rows_compared: Num
    matched_on: str | None
    flipped: Flips | None
    mcnemar_p: Num
    error_changes: tuple[ErrorChangeRow, ...]
    accuracy_ci: Num
    accuracy_paired: float | None  # report.md: the paired change, where it is a number
    accuracy_change: Num  # report.html: the paired change, else the accuracy delta
    deltas: tuple[DeltaRow, ...]
    metric_tests: tuple[TestRow, ...]
    tests_sentence: str
    class_test_names: tuple[str, ...]
    class_tests: tuple[ClassTests, ...]
    class_changes: tuple[ClassChanges, ...]
    slice_tests: tuple[SliceRow, ...]  # report.md: slice_tests' order
    slice_rows: tuple[SliceRow, ...]  # report.html: slice_deltas' order, each with its test where tested
    slices_tested: bool
    slices_changed: bool
    samples: tuple[FlipSamples, ...]
    samples_shown: int


def error_changes(document: MetricsDocument) -> list[tuple[str, ErrorChange]]:
    """A one-output regression comparison's paired changes of MAE and RMSE, in the document's order."""
    comparison = document.comparison
    return [(name, value) for name, value in comparison if isinstance(value, ErrorChange)] if comparison else []


def _test(document: MetricsDocument, base: tuple[str, ...], name: str, holm: bool) -> TestRow:
    """The test at `base` (a PairedTest or a family's FamilyTest; absent: every number None)."""
    delta, ci, p, p_holm = (at(document, *base, k) for k in ("delta", "ci", "p", "p_holm"))
    test = value_at(document, base)
    return TestRow(name, delta, ci, p, p_holm, getattr(test, "method", None), mark(test, holm))


def comparison_view(document: MetricsDocument) -> ComparisonView | None:
    """The comparison's view (None: a run compared with no other)."""
    comparison = document.comparison
    if comparison is None:
        return None
    lower = lower_is_better(document.head)
    flipped = comparison.flipped
    flips = Flips(*(at(document, "comparison", "flipped", k) for k in ("right_to_wrong", "wrong_to_right", "other"))) if flipped else None
    paired = comparison.accuracy_delta_paired
    deltas = tuple(
        DeltaRow(
            name,
            name in lower,
            now := metric_value(document, name),
            now - d if now is not None and d is not None else None,
            at(document, "comparison", "deltas", name, lower_is_better=name in lower),
            _test(document, ("comparison", "metric_tests", name), name, False),
        )
        for name, d in comparison.deltas.items()
    )
    tested = bool(comparison.slice_tests)
    slice_tests = tuple(_slice_row(document, column, value, True) for column, groups in comparison.slice_tests.items() for value in groups)
    slice_rows = tuple(
        _slice_row(document, column, value, tested) for column, values in comparison.slice_deltas.items() for value in values
    )
    return ComparisonView(
        run=comparison.run,
        rows_compared=at(document, "comparison", "rows_compared"),
        matched_on=comparison.matched_on,
        flipped=flips,
        mcnemar_p=at(document, "comparison", "mcnemar_p"),
        error_changes=tuple(
            ErrorChangeRow(
                name,
                at(document, "comparison", name, "delta", lower_is_better=name in lower),
                d.this,
                d.other,
                at(document, "comparison", name, "ci"),
            )
            for name, d in error_changes(document)
        ),
        accuracy_ci=at(document, "comparison", "accuracy_delta_ci"),
        accuracy_paired=paired if isinstance(paired, float) else None,
        accuracy_change=at(document, "comparison", "accuracy_delta_paired", lower_is_better="accuracy" in lower)
        if paired is not None
        else at(document, "comparison", "deltas", "accuracy", lower_is_better="accuracy" in lower),
        deltas=deltas,
        metric_tests=tuple(_test(document, ("comparison", "metric_tests", name), name, False) for name in comparison.metric_tests),
        tests_sentence=tests_sentence(comparison) if comparison.metric_tests else "",
        class_test_names=CLASS_TESTS,
        class_tests=tuple(
            ClassTests(
                label, tuple(_test(document, ("comparison", "per_class_tests", label, k), k, True) for k in CLASS_TESTS), class_mark(tests)
            )
            for label, tests in comparison.per_class_tests.items()
        ),
        class_changes=tuple(
            ClassChanges(label, tuple(at(document, "comparison", "per_class_deltas", label, k) for k in CLASS_DELTAS))
            for label in comparison.per_class_deltas
        ),
        slice_tests=slice_tests,
        slice_rows=slice_rows,
        slices_tested=bool(comparison.slice_tests and comparison.slice_deltas),
        slices_changed=bool(comparison.slice_deltas),
        samples=_samples(comparison),
        samples_shown=sum(len(v) for v in comparison.samples.values()),
    )


def _slice_row(document: MetricsDocument, column: str, value: str, tested: bool) -> SliceRow:
    """A slice group's accuracy change and rows, with its test when the slices were tested."""
    base = ("comparison", "slice_deltas", column, value)
    test = _test(document, ("comparison", "slice_tests", column, value), value, True) if tested else None
    return SliceRow(column, value, at(document, *base, "rows"), at(document, *base, "accuracy"), test)


def _samples(comparison: Comparison) -> tuple[FlipSamples, ...]:
    """The flipped rows shown per direction, with the number of flips of that direction."""
    if not comparison.samples:
        return ()
    flipped = comparison.flipped
    return tuple(
        FlipSamples(
            title,
            tuple(
                SampleRow(s.row_index, s.id, s.truth, s.before, s.score_before, s.after, s.score_after)
                for s in comparison.samples.get(kind) or []
            ),
            getattr(flipped, kind) if flipped else None,
        )
        for kind, title in FLIP_SAMPLES
    )

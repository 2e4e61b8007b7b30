"""Comparison with another completed run (`compare_to`): which rows flipped, whether the difference
is more than noise, and the metric, per-class and per-slice deltas.

Rows are matched on row_index when both runs read the same input files (the same content, as
plan.json's input fingerprint records), else on the id; both runs' predictions are judged against
this run's ground truth, so the test is paired. McNemar's exact test and the paired bootstrap of
the accuracy delta need only the counts of discordant rows, so they cost nothing per row; every
other delta gets its paired test in compare_tests.py.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Literal

from scorekeeper.errors import InputError
from scorekeeper.evaluation.compare_tests import comparison_tests
from scorekeeper.evaluation.duck import SLICE_GROUPS, Fragment, null_group_key, parquet_view, sql
from scorekeeper.evaluation.paired_tests import accuracy_test, mcnemar_exact
from scorekeeper.evaluation.truth import label_table, match_truth
from scorekeeper.metrics.document import (
    ClassDelta,
    Comparison,
    FlipCounts,
    FlipSample,
    MetricsDocument,
    RecordedMetrics,
    SliceDelta,
)
from scorekeeper.metrics.registry import Metric, compared_metrics, value_at
from scorekeeper.metrics.truth_matching import TruthMatching
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location

log = logging.getLogger(__name__)

SAMPLES = 20  # flipped rows shown per direction


def paired_bootstrap_ci(right_to_wrong: int, wrong_to_right: int, rows: int) -> list[float] | None:
    """95% percentile interval of the accuracy delta (this - other) under a paired bootstrap of rows
    (scorekeeper/evaluation/paired_tests.py: a multinomial of the three per-row outcomes, fixed seed)."""
    return accuracy_test(right_to_wrong, wrong_to_right, rows)["ci"]


def same_input(plan: dict, other_plan: dict) -> bool:
    """Whether two runs read the same rows in the same order: the same files' content, in order."""
    return [f.get("fingerprint") for f in plan.get("files", [])] == [f.get("fingerprint") for f in other_plan.get("files", [])]


def open_other(con, run: Location, other: Location) -> tuple[Literal["row_index", "id"], tuple[Fragment, Fragment]]:
    """The other run's predictions as the view `other`, and how rows are matched: ("row_index" or
    "id", (other's join column, this run's staged join column)) for `o` = other, `s` = staged."""
    parquet_view(con, "other", other, RunFolder.PREDICTIONS)
    if same_input(run.read_json(RunFolder.PLAN), other.read_json(RunFolder.PLAN)):
        return "row_index", (Fragment("o.row_index"), Fragment("s.row_index"))
    types = {
        str(t) for t in con.execute("SELECT (SELECT typeof(id) FROM staged LIMIT 1), (SELECT typeof(id) FROM other LIMIT 1)").fetchone()
    }
    if len(types) > 1:
        return "id", (Fragment("o.id::VARCHAR"), Fragment("s.id::VARCHAR"))
    return "id", (Fragment("o.id"), Fragment("s.id"))


def compare(
    con,
    run: Location,
    other: Location,
    metrics: MetricsDocument,
    slice_columns: list[str],
    matching: TruthMatching,
    truth_column: str = "label",
) -> Comparison:
    """metrics.json's `comparison`, on a DuckDB connection that holds this run's `evaluated`, `staged`,
    `truth` and `labels`; `matching` is how this run's truth was matched to its labels. The other
    run must vouch for every file read here (scorekeeper/run_seal.py), checked as they are now."""
    refuse_unverified(RunFolder(other.fs, other.path), "compare_to")
    other_plan = other.read_json(RunFolder.PLAN)
    other_matching = _other_matching(con, other_plan.get("labels") or [], matching, truth_column)
    other_metrics = RecordedMetrics.parse(other.read_json(RunFolder.METRICS)) or RecordedMetrics()
    matched_on, keys = open_other(con, run, other)
    con.execute(sql("paired.sql", other_key=keys[0], this_key=keys[1]), {"other_rule": other_matching.rule.value})
    rows, right_to_wrong, wrong_to_right, other_flips = con.execute(sql("flipped.sql")).fetchone()
    samples = {}
    for direction, right_before in (("right_to_wrong", True), ("wrong_to_right", False)):
        samples[direction] = [
            FlipSample(row_index=int(i), id=row_id, truth=truth, before=before, after=after, score_before=sb, score_after=sa)
            for i, row_id, truth, before, after, sb, sa in con.execute(
                sql("flipped_samples.sql"), {"right_before": right_before, "limit": SAMPLES}
            ).fetchall()
        ]
    sides: dict[str, dict[str, dict]] = {}
    for name, side, precision, recall, f1 in con.execute(sql("paired_per_class.sql")).fetchall():
        sides.setdefault(name, {})[side] = {"precision": precision, "recall": recall, "f1": f1}
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    per_class = {
        name: ClassDelta(**{k: s.get("after", zero)[k] - s.get("before", zero)[k] for k in ("precision", "recall", "f1")})
        for name, s in sides.items()
    }
    slice_deltas, slice_counts = {}, {}
    for i, column in enumerate(slice_columns):
        groups = con.execute(sql("paired_slice.sql", column=f"slice_{i}"), {"limit": SLICE_GROUPS}).fetchall()
        null_key = null_group_key({value for is_null, value, *_ in groups if not is_null})
        slice_deltas[column] = {
            (null_key if is_null else value): SliceDelta(accuracy=delta, rows=int(n)) for is_null, value, n, delta, _, _ in groups
        }
        slice_counts[column] = {(null_key if is_null else value): (int(n), int(b), int(c)) for is_null, value, n, _, b, c in groups}
    if rows == 0:
        log.warning("no row of this run matches a row of %s on %s: nothing to compare", other.uri, matched_on)
    flipped = (int(rows), int(right_to_wrong), int(wrong_to_right))
    other_labels = value_at(other_metrics, ("labels",))
    compared = compared_metrics(metrics.head)
    assert metrics.ece_bins is not None, "a single-label evaluation records its ECE bins"
    tests = comparison_tests(con, metrics.labels or [], other_labels, flipped, slice_counts, metrics.ece_bins, compared)
    return Comparison(
        run=posixpath.basename(other.path),
        rows_compared=int(rows),
        matched_on=matched_on,
        truth_matching=other_matching,
        flipped=FlipCounts(right_to_wrong=int(right_to_wrong), wrong_to_right=int(wrong_to_right), other=int(other_flips)),
        mcnemar_p=mcnemar_exact(int(right_to_wrong), int(wrong_to_right)),
        accuracy_delta_paired=(int(wrong_to_right) - int(right_to_wrong)) / rows if rows else None,
        accuracy_delta_ci=tests["metric_tests"]["accuracy"].ci,
        deltas={m.name: _delta(metrics, other_metrics, m) for m in compared},
        samples=samples,
        per_class_deltas=per_class,
        slice_deltas=slice_deltas,
        metric_tests=tests["metric_tests"],
        per_class_tests=tests["per_class_tests"],
        slice_tests=tests["slice_tests"],
        tests_counted=tests["tests_counted"],
    )


def _other_matching(con, other_labels: list[str], matching: TruthMatching, truth_column: str) -> TruthMatching:
    """How the other run's predictions are judged against this truth: by the rule this truth column
    has against the other run's labels (the rule that run's own evaluation of it uses), so that the
    paired delta is the difference of the accuracies. A column that would resolve differently by
    name and by id against the other run's labels is paired by this run's rule (said in the log)."""
    if not other_labels:  # a plan.json that does not record its labels: taken as this run's
        con.execute("CREATE OR REPLACE TEMP TABLE other_labels AS SELECT * FROM labels")
        return matching
    label_table(con, "other_labels", other_labels)
    try:
        return match_truth(con, matching.column_type, other_labels, truth_column, "other_labels", quiet=True)
    except InputError as exc:
        log.warning(
            "compare_to: %s (against the other run's labels); its predictions are judged by this run's rule, %s", exc, matching.rule
        )
        return matching


def _delta(metrics: MetricsDocument, other_metrics: RecordedMetrics, metric: Metric) -> float | None:
    """this - other of a metric as each run reported it; None when either has no value."""
    this, other = metric.value(metrics), metric.value(other_metrics)
    return None if this is None or other is None else this - other

"""The evaluation of a single-label head: each row's truth resolved to a label by the column's one
rule, then accuracy, F1, log loss, calibration, the ranking metrics, the label audit, the slices and
the comparison with another run (compare.py).

The SQL lives in sql/single_label/ (and sql/shared/, sql/truth/). Only canonical column names
(staged by the read step) ever appear in SQL; user-supplied names never do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from scorekeeper.errors import InputError
from scorekeeper.evaluation.base import (
    CONFIDENT_ERRORS,
    ECE_BINS,
    EXCERPT_CHARS,
    LOG_LOSS_EPS,
    Coverage,
    Evaluation,
    KindReport,
    LengthSide,
    Logger,
    finite_number,
    mean_known,
)
from scorekeeper.evaluation.compare import Keys, Paired, compare, label_positions, other_labels
from scorekeeper.evaluation.duck import SLICE_GROUPS, Fragment, literal, null_group_key, number, one_row, ovr_table, sql
from scorekeeper.evaluation.estimate import (
    accuracy_estimate,
    accuracy_variance,
    bin_counts,
    calibration_by_label,
    expected_f1,
    expected_totals,
    recorded_bins,
    reference_bins,
)
from scorekeeper.evaluation.label_audit import label_audit
from scorekeeper.evaluation.labelling import LabelFreeModel, PlanMetric, set_variables
from scorekeeper.evaluation.length_impact import proportion_sides
from scorekeeper.evaluation.matching import why_nothing_evaluated
from scorekeeper.evaluation.signals import RunSide, SignalViews
from scorekeeper.evaluation.statistics import families
from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.evaluation.truth import RAW_LABEL, label_table, match_truth, truth_table
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import (
    CalibrationBin,
    ClassAreas,
    ClassDelta,
    ClassScores,
    Comparison,
    ConfidentError,
    Drift,
    Estimated,
    FamilyTest,
    FlipCounts,
    FlipSample,
    GroundTruthSource,
    MetricsDocument,
    RecordedMetrics,
    ReferenceRecords,
    ScoreHistogram,
    SingleLabelMetrics,
    SliceDelta,
    SliceGroup,
    SliceGroups,
    ThresholdRow,
)
from scorekeeper.metrics.registry import BY_NAME, TOP_K_MAX, SliceMetric
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching, TruthRule
from scorekeeper.run_folder import RunFolder, StagedGroundTruth, StagedManifest
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

log = logging.getLogger(__name__)

THRESHOLDS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
HISTOGRAM_BINS = 20


def unknownfinite_number(labels: list[str]) -> int:
    """The suffix an unknown truth value spelled like a label name is called by (evaluated.sql): 1
    for ' [unknown]' ('3' -> '3 [unknown]'), k for ' [unknown k]', the first no label name ends
    with, so that the name is never a label's (a label literally named '3 [unknown]')."""
    k = 1
    while any(name.endswith(" [unknown]" if k == 1 else f" [unknown {k}]") for name in labels):
        k += 1
    return k


class SingleLabel:
    """A softmax head: one label per row (docs/contracts.md, sections 3, 6 and 8)."""

    kind = HeadKind.SINGLE_LABEL
    report = KindReport(slice_metrics=(SliceMetric(BY_NAME["accuracy"], "accuracy_ci", "Wilson"),), slice_caption="Accuracy", sections=())

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        return truth_table(ev.con, ev.run, ev.manifest, RAW_LABEL, Fragment("raw_label VARCHAR"))

    def check_truth(self, ev: Evaluation, column: ColumnKind | None) -> TruthMatching | None:
        return match_truth(ev.con, column, ev.labels, ev.truth_column, quiet=True) if column else None

    def metrics(self, ev: Evaluation, coverage: Coverage) -> SingleLabelMetrics:
        con, labels, manifest = ev.con, ev.labels, ev.manifest
        con.execute(sql("wilson.sql"))
        matching = match_truth(con, coverage.column, labels, ev.truth_column, log=ev.log) if coverage.column else None
        con.execute(
            sql("evaluated.sql", rule=literal(matching.rule if matching else TruthRule.ID), unknown=number(unknownfinite_number(labels)))
        )
        con.execute(sql("class_counts.sql"))
        if manifest.ground_truth:
            _say_how_ids_matched(ev.log, manifest, manifest.ground_truth, coverage.truth_rows, coverage.truth_rows - coverage.missing)
        evaluated, accuracy, macro_f1, weighted_f1, log_loss, log_loss_rows = one_row(
            con.execute(sql("metrics.sql"), {"eps": LOG_LOSS_EPS})
        )
        why = why_nothing_evaluated(coverage.source, coverage.truth_rows, coverage.missing) if not evaluated else None
        if why:
            ev.log.warning("evaluated no row: %s", why)
        per_class = {
            name: ClassScores(precision=p, recall=r, f1=f1, support=int(s))
            for name, p, r, f1, s in con.execute(sql("per_class.sql")).fetchall()
        }
        confusion: dict[str, dict[str, int]] = {}
        for true_name, pred_name, n in con.execute(sql("confusion.sql")).fetchall():
            confusion.setdefault(true_name, {})[pred_name] = int(n)
        bins = con.execute(sql("calibration.sql"), {"bins": ECE_BINS}).fetchall()
        ece = sum(n * abs(acc - conf) for _, n, conf, acc in bins) / evaluated if evaluated else None
        unknown = {name: int(n) for name, n in con.execute(sql("unknown_labels.sql")).fetchall()}
        ranking = _ranking_metrics(con, labels, int(evaluated)) if evaluated else {}
        audit: dict[str, Any] = {"label_audit": label_audit(con, labels, EXCERPT_CHARS)} if evaluated else {}
        return SingleLabelMetrics(
            evaluated=int(evaluated),
            truth_matching=matching,
            accuracy=finite_number(accuracy),
            macro_f1=finite_number(macro_f1),
            weighted_f1=finite_number(weighted_f1),
            log_loss=finite_number(log_loss),
            log_loss_rows=int(log_loss_rows),
            ece=finite_number(ece),
            ece_bins=ECE_BINS,
            calibration=[
                CalibrationBin(bin=int(b), lower=b / ECE_BINS, upper=(b + 1) / ECE_BINS, rows=int(n), confidence=conf, accuracy=acc)
                for b, n, conf, acc in bins
            ],
            per_class=per_class,
            confusion=confusion,
            unknown_labels=unknown,
            unknown_label_rows=sum(unknown.values()),
            **ranking,
            **audit,
        )

    def reference_records(self, ev: Evaluation) -> ReferenceRecords:
        """calibration_by_label over the `evaluated` rows (the accuracy estimate reads `calibration`)."""
        return calibration_by_label(ev.con, "calibration_by_label.sql", ev.labels)

    def slices(self, ev: Evaluation) -> tuple[SliceGroups, dict[str, int]]:
        return _slices(ev.con, ev.slice_columns)

    def length_sides(self, ev: Evaluation) -> dict[bool, LengthSide]:
        return proportion_sides(ev.con)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        return compare(ev, baseline, document, pair)

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None:
        """The predicted label (categorical) and the top score (numeric)."""
        views.view("predicted_label", "drift_predicted_label.sql", False)
        views.view("score", "drift_score.sql", True)

    def estimate(self, con: Connection, estimated: Estimated, labels: list[str], reference: RecordedMetrics, drift: Drift) -> None:
        """Accuracy with its interval from the reference's `calibration`, macro-F1 from its calibration_by_label."""
        by_label = recorded_bins(estimated, reference)
        if by_label is None:
            return
        estimated.accuracy, estimated.accuracy_ci = accuracy_estimate(con, reference.calibration or [], estimated.rows)
        f1 = expected_f1(con, "estimate_single_label.sql", by_label, labels)
        estimated.macro_f1, estimated.macro_f1_ci = f1.macro, f1.macro_ci(con, renormalised=True)

    # -- section 13: the targets and label-free predictions of the prediction-powered metrics --------

    def label_free(self, ev: Evaluation, reference: RecordedMetrics | None) -> LabelFreeModel:
        """pp_label_free and pp_cells: accuracy's f (the reference's a_b of the row's score bin, or the
        score) and macro_f1's TP/FP/FN per label from q (the reference's calibration, renormalised, or
        the probabilities)."""
        calibration = reference.calibration if reference is not None else None
        by_label = reference.calibration_by_label if reference is not None else None
        uses = bool(calibration is not None and by_label)
        bins = reference_bins(calibration) if uses else {}
        rows, truth = bin_counts(by_label, ev.labels)
        params = {
            "reference": uses,
            "bins": ECE_BINS,
            "bin_rows": [float(bins.get(b, (0, 0))[0]) for b in range(ECE_BINS)],
            "correct": [float(bins.get(b, (0, 0))[1]) for b in range(ECE_BINS)],
            "rows": rows,
            "truth": truth,
            "names": ev.labels,
        }
        set_variables(ev.con, **params)
        ev.con.execute(sql("single_label_label_free.sql"))
        # the per-label totals: the estimate's when it ran against the same reference, else a pass of their own
        totals = "estimate_totals" if uses and expected_totals(ev.con, rows, truth) else "pp_label_totals"
        ev.con.execute(sql("single_label_cell_totals.sql", label_totals=totals))
        return LabelFreeModel(
            metrics=(PlanMetric("accuracy", "mean", "accuracy"), PlanMetric("macro_f1", "f1_macro", "macro_f1")),
            headline="accuracy",
            sample_target="accuracy",
            uses_reference=uses,
            f_target=("accuracy", ""),
        )

    def label_targets(self, ev: Evaluation) -> None:
        """pp_targets over the evaluated rows: accuracy's Y and macro_f1's TP/FP/FN per label."""
        ev.con.execute(sql("single_label_targets.sql"))

    def label_free_variance(self, ev: Evaluation, reference: RecordedMetrics | None, rows: int) -> float | None:
        """The label-free accuracy's own variance: section 12's accuracy_ci variance with a reference,
        sum f (1 - f) / N^2 without one."""
        if reference is not None:
            return accuracy_variance(ev.con, reference.calibration or [], rows)
        (total,) = one_row(ev.con.execute("SELECT sum(f * (1 - f)) FROM pp_label_free"))
        return float(total or 0.0) / rows**2


EVALUATION = SingleLabel()


def _ranking_metrics(con: Connection, labels: list[str], evaluated: int) -> dict[str, Any]:
    """The docs/contracts.md section 8 fields and the report's extra fields, over the `evaluated` table."""
    right = one_row(con.execute("SELECT count(*) FILTER (WHERE correct) FROM evaluated"))[0]
    accuracy_ci = one_row(con.execute("SELECT wilson(?, ?)", [right, evaluated]))[0]
    con.execute(ovr_table("ovr", sql("ovr.sql")))
    per_class = con.execute(sql("ranking.sql", ovr="ovr", labels="labels")).fetchall()
    roc = {name: finite_number(auc) for name, auc, _ in per_class}
    ap = {name: finite_number(value) for name, _, value in per_class}
    kmax = min(TOP_K_MAX, len(labels) - 1)
    top_k = {}
    if kmax >= 2:
        hits = dict(con.execute(sql("top_k.sql"), {"kmax": kmax}).fetchall())
        top_k = {str(k): hits.get(k, 0) / evaluated for k in range(2, kmax + 1)}
    con.execute(sql("threshold_cuts.sql"), {"thresholds": THRESHOLDS})
    thresholds = [
        ThresholdRow(
            threshold=t,
            rows=int(n),
            coverage=n / evaluated,
            accuracy=finite_number(acc),
            macro_precision=finite_number(p),
            macro_recall=finite_number(r),
            macro_f1=finite_number(f1),
        )
        for t, n, acc, p, r, f1 in con.execute(sql("thresholds.sql")).fetchall()
    ]
    curves: dict[str, dict] = {"roc": {}, "pr": {}}
    for name, curve, x, y in con.execute(sql("curves.sql", ovr="ovr", labels="labels")).fetchall():
        keys = ("fpr", "tpr") if curve == "roc" else ("recall", "precision")
        start = (0.0, 0.0) if curve == "roc" else (0.0, 1.0)
        points = curves[curve].setdefault(name, {keys[0]: [start[0]], keys[1]: [start[1]]})
        points[keys[0]].append(x)
        points[keys[1]].append(y)
    correct, wrong = [0] * HISTOGRAM_BINS, [0] * HISTOGRAM_BINS
    for b, right_n, wrong_n in con.execute(sql("score_histogram.sql")).fetchall():
        correct[b], wrong[b] = int(right_n), int(wrong_n)
    histogram = ScoreHistogram(edges=[b / HISTOGRAM_BINS for b in range(HISTOGRAM_BINS + 1)], correct=correct, wrong=wrong)
    errors = [
        ConfidentError(row_index=int(i), id=row_id, text=text, truth=truth, predicted=predicted, score=score)
        for i, row_id, text, truth, predicted, score in con.execute(
            sql("confident_errors.sql"), {"chars": EXCERPT_CHARS, "limit": CONFIDENT_ERRORS}
        ).fetchall()
    ]
    return {
        "accuracy_ci": accuracy_ci,
        "roc_auc": ClassAreas(macro=mean_known(roc.values()), per_class=roc),
        "average_precision": ClassAreas(macro=mean_known(ap.values()), per_class=ap),
        "top_k_accuracy": top_k,
        "thresholds": thresholds,
        "curves": curves,
        "score_histogram": histogram,
        "confident_errors": errors,
    }


def _slices(con: Connection, slice_columns: list[str]) -> tuple[SliceGroups, dict[str, int]]:
    """Per slice column: {value: {rows, accuracy, accuracy_ci}} worst first, and the group counts of
    columns with more groups than were kept."""
    slices: SliceGroups = {}
    truncated: dict[str, int] = {}
    for i, column in enumerate(slice_columns):
        rows = con.execute(sql("slice.sql", column=f"slice_{i}"), {"limit": SLICE_GROUPS}).fetchall()
        null_key = null_group_key({value for is_null, value, *_ in rows if not is_null})
        slices[column] = {
            (null_key if is_null else value): SliceGroup(rows=int(n), accuracy=acc, accuracy_ci=ci)
            for is_null, value, n, acc, ci, _ in rows
        }
        groups = rows[0][-1] if rows else 0
        if groups > len(rows):
            truncated[column] = int(groups)
    return slices, truncated


def _say_how_ids_matched(logger: Logger, manifest: StagedManifest, ground_truth: StagedGroundTruth, truth_rows: int, matched: int) -> None:
    """A join on ids can silently match nothing (7 is not "007"): say how many matched, and how."""
    how = ""
    if ground_truth.id_type != manifest.id_type:
        how = f"the input's ids are {manifest.id_type} and the ground truth's {ground_truth.id_type}, compared as text; "
    message = f"ground truth: {how}{matched} of {truth_rows} ground-truth rows matched an input id"
    (logger.warning if how or matched < truth_rows else logger.info)(message)


# -- the comparison of the paired rows (compare.py pairs them) --------------------------------------------

FLIP_SAMPLES = 20  # flipped rows shown per direction
PER_CLASS_METRICS = ("f1", "precision", "recall")  # each its own Holm family


def pair(ev: Evaluation, keys: Keys, metrics: MetricsDocument, other_metrics: RecordedMetrics, other: Location) -> Paired:
    """Which rows flipped (McNemar's exact test and the paired bootstrap of the accuracy delta need
    only the counts of discordant rows), the per-class and per-slice deltas, and a paired test of
    every delta (comparison_tests), over the `paired` table (paired.sql): both runs' predictions
    judged against this run's truth, the other run's by the rule this truth has against its labels."""
    con = ev.con
    assert metrics.truth_matching is not None, "evaluated rows were matched to a truth"
    other_matching = _other_matching(con, other.read_json(RunFolder.PLAN).get("labels") or [], metrics.truth_matching, ev.truth_column)
    con.execute(sql("paired.sql", other_key=keys[0], this_key=keys[1]), {"other_rule": other_matching.rule.value})
    rows, right_to_wrong, wrong_to_right, other_flips = one_row(con.execute(sql("flipped.sql")))
    samples = {}
    for direction, right_before in (("right_to_wrong", True), ("wrong_to_right", False)):
        samples[direction] = [
            FlipSample(row_index=int(i), id=row_id, truth=truth, before=before, after=after, score_before=sb, score_after=sa)
            for i, row_id, truth, before, after, sb, sa in con.execute(
                sql("flipped_samples.sql"), {"right_before": right_before, "limit": FLIP_SAMPLES}
            ).fetchall()
        ]
    slice_deltas, slice_counts = _slice_deltas(con, ev.slice_columns)
    flipped = (int(rows), int(right_to_wrong), int(wrong_to_right))
    assert metrics.ece_bins is not None, "a single-label evaluation records its ECE bins"
    tests, per_class_tests, slice_tests = comparison_tests(
        con, metrics.labels or [], other_labels(other_metrics), flipped, slice_counts, metrics.ece_bins
    )
    fields = {
        "truth_matching": other_matching,
        "flipped": FlipCounts(right_to_wrong=int(right_to_wrong), wrong_to_right=int(wrong_to_right), other=int(other_flips)),
        "mcnemar_p": pt.mcnemar_exact(int(right_to_wrong), int(wrong_to_right)),
        "accuracy_delta_paired": (int(wrong_to_right) - int(right_to_wrong)) / rows if rows else None,
        "accuracy_delta_ci": tests["accuracy"]["ci"],
        "samples": samples,
        "per_class_deltas": _per_class_deltas(con),
        "slice_deltas": slice_deltas,
    }
    return Paired(int(rows), fields, tests, {"per_class_tests": per_class_tests, "slice_tests": slice_tests})


def _per_class_deltas(con: Connection) -> dict[str, ClassDelta]:
    sides: dict[str, dict[str, dict]] = {}
    for name, side, precision, recall, f1 in con.execute(sql("paired_per_class.sql")).fetchall():
        sides.setdefault(name, {})[side] = {"precision": precision, "recall": recall, "f1": f1}
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    return {
        name: ClassDelta(**{k: s.get("after", zero)[k] - s.get("before", zero)[k] for k in ("precision", "recall", "f1")})
        for name, s in sides.items()
    }


def _slice_deltas(con: Connection, slice_columns: list[str]) -> tuple[dict, dict]:
    """Per slice column {value: SliceDelta}, and {value: (rows, right_to_wrong, wrong_to_right)}."""
    slice_deltas, slice_counts = {}, {}
    for i, column in enumerate(slice_columns):
        groups = con.execute(sql("paired_slice.sql", column=f"slice_{i}"), {"limit": SLICE_GROUPS}).fetchall()
        null_key = null_group_key({value for is_null, value, *_ in groups if not is_null})
        slice_deltas[column] = {
            (null_key if is_null else value): SliceDelta(accuracy=delta, rows=int(n)) for is_null, value, n, delta, _, _ in groups
        }
        slice_counts[column] = {(null_key if is_null else value): (int(n), int(b), int(c)) for is_null, value, n, _, b, c in groups}
    return slice_deltas, slice_counts


def _other_matching(con: Connection, other_labels: list[str], matching: TruthMatching, truth_column: str) -> TruthMatching:
    """How the other run's predictions are judged against this truth: by the rule this truth column
    has against the other run's labels (the rule that run's own evaluation of it uses), so that the
    paired delta is the difference of the accuracies. A column that would resolve differently by
    name and by id against the other run's labels is paired by this run's rule (said in the log)."""
    if not other_labels:  # a plan.json that does not record its labels: taken as this run's
        con.execute(sql("other_labels.sql"))
        return matching
    label_table(con, "other_labels", other_labels)
    try:
        return match_truth(con, matching.column_type, other_labels, truth_column, "other_labels", quiet=True)
    except InputError as exc:
        log.warning(
            "compare_to: %s (against the other run's labels); its predictions are judged by this run's rule, %s", exc, matching.rule
        )
        return matching


def comparison_tests(
    con: Connection,
    labels: list[str],
    other_labels: list[str] | None,
    flipped: tuple[int, int, int],
    slices: dict[str, dict],
    ece_bins: int,
) -> tuple[dict[str, dict], dict[str, dict[str, FamilyTest]], dict[str, dict[str, FamilyTest]]]:
    """The metric tests (by name), `per_class_tests` and `slice_tests` (Holm-adjusted families), on a
    connection holding the comparison's `paired` table. `flipped`: (rows, right_to_wrong,
    wrong_to_right); `slices`: {column: {value: (rows, right_to_wrong, wrong_to_right)}} as the
    comparison keys them; `ece_bins`: the bins of the run's ECE. The per-row work is SQL
    (sql/single_label/paired_*.sql); what comes back is a joint table, calibration cells, per-class
    strata and (for average precision) a few thousand rows at most."""
    rows, right_to_wrong, wrong_to_right = flipped
    table = pt.JointTable.from_rows(con.execute(sql("paired_joint.sql")).fetchall())
    headline, per_class = pt.count_tests(table)
    cells = pt.CalibrationCells.from_rows(ece_bins, con.execute(sql("paired_calibration.sql"), {"bins": ece_bins}).fetchall())
    metric_tests = {"accuracy": pt.accuracy_test(right_to_wrong, wrong_to_right, rows)} | headline | {"ece": pt.ece_test(cells)}
    positions = label_positions(labels, other_labels) if rows else None
    if positions is not None:
        con.execute(sql("paired_scores.sql"), {"positions": positions})
        metric_tests |= score_tests(con, len(labels), LOG_LOSS_EPS)
    else:
        metric_tests |= {"log_loss": pt.untested(pt.NORMAL), "roc_auc_macro": pt.untested(pt.DELONG)}
        metric_tests["average_precision_macro"] = pt.untested(pt.BOOTSTRAP)

    per_class_tests: dict[str, dict[str, FamilyTest]] = {name: {} for name in per_class}
    for metric in PER_CLASS_METRICS:
        for (name,), test in families.with_holm({(name,): tests[metric] for name, tests in per_class.items()}).items():
            per_class_tests[name][metric] = test
    slice_family = {(column, value): pt.accuracy_test(b, c, n) for column, groups in slices.items() for value, (n, b, c) in groups.items()}
    slice_tests: dict[str, dict[str, FamilyTest]] = {column: {} for column in slices}
    for (column, value), test in families.with_holm(slice_family).items():
        slice_tests[column][value] = test
    return metric_tests, per_class_tests, slice_tests


def score_tests(con: Connection, width: int, eps: float) -> dict:
    """log_loss, roc_auc_macro and average_precision_macro tests over a `paired_scores` table
    (row_index, true_id, before, after: both runs' probabilities in this run's label order)."""
    n, mean, variance = con.execute(sql("paired_log_loss.sql"), {"eps": eps}).fetchall()[0]
    tests = {"log_loss": pt.paired_normal(int(n), mean, variance)}
    con.execute(sql("paired_ranks.sql"))
    ranking: dict[str, dict[int, tuple]] = {}
    for side, label_id, _, _, auc, ap in con.execute(sql("paired_ranking.sql")).fetchall():
        ranking.setdefault(side, {})[int(label_id)] = (auc, ap)
    before, after = ranking.get("before", {}), ranking.get("after", {})
    defined = [k for k in sorted(after) if after[k][0] is not None and before.get(k, (None,))[0] is not None]
    strata = []
    if defined:
        strata = [(int(rows), v) for _, rows, v in con.execute(sql("paired_delong.sql"), {"classes": len(defined)}).fetchall()]
    tests["roc_auc_macro"] = pt.delong_macro([before[k][0] for k in defined], [after[k][0] for k in defined], strata)
    with_ap = [k for k in sorted(after) if after[k][1] is not None and before.get(k, (None, None))[1] is not None]
    ap_delta = float(np.mean([after[k][1] - before[k][1] for k in with_ap])) if with_ap else None
    positions_subset = pt.subset_positions(int(n), pt.ap_rows(width)).tolist()
    rows = con.execute(sql("paired_subset.sql"), {"positions": positions_subset}).fetchall()
    truth = np.array([r[0] for r in rows], dtype=np.int64)
    before_probs = np.array([r[1] for r in rows], dtype=np.float64).reshape(len(rows), width)
    after_probs = np.array([r[2] for r in rows], dtype=np.float64).reshape(len(rows), width)
    tests["average_precision_macro"] = pt.ap_test(ap_delta, truth, before_probs, after_probs, int(n))
    return tests

"""The evaluation of a single-label head: each row's truth resolved to a label by the column's one
rule, then accuracy, F1, log loss, calibration, the ranking metrics, the label audit, the slices and
the comparison with another run (compare.py).

The SQL lives in sql/single_label/ (and sql/shared/, sql/truth/). Only canonical column names
(staged by the read step) ever appear in SQL; user-supplied names never do.
"""

from __future__ import annotations

from typing import Any

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
    _mean,
    _number,
)
from scorekeeper.evaluation.compare import compare
from scorekeeper.evaluation.duck import SLICE_GROUPS, Fragment, literal, null_group_key, number, ovr_table, sql
from scorekeeper.evaluation.estimate import accuracy_estimate, accuracy_variance, calibration_by_label, expected_f1, recorded_bins
from scorekeeper.evaluation.label_audit import label_audit
from scorekeeper.evaluation.labelling import LabelFreeModel, PlanMetric, set_variables
from scorekeeper.evaluation.length_impact import proportion_sides
from scorekeeper.evaluation.matching import why_nothing_evaluated
from scorekeeper.evaluation.signals import RunSide, SignalViews
from scorekeeper.evaluation.truth import RAW_LABEL, match_truth, truth_table
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import (
    CalibrationBin,
    ClassAreas,
    ClassScores,
    Comparison,
    ConfidentError,
    Drift,
    Estimated,
    GroundTruthSource,
    MetricsDocument,
    RecordedMetrics,
    ScoreHistogram,
    SliceGroup,
    ThresholdRow,
)
from scorekeeper.metrics.registry import BY_NAME, TOP_K_MAX, SliceMetric
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching, TruthRule
from scorekeeper.run_folder import StagedGroundTruth, StagedManifest
from scorekeeper.storage import Location

THRESHOLDS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
HISTOGRAM_BINS = 20
_EMPTY_BINS = [{"rows": 0, "truth": 0}] * ECE_BINS


def unknown_number(labels: list[str]) -> int:
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

    def metrics(self, ev: Evaluation, coverage: Coverage) -> dict[str, Any]:
        con, labels, manifest = ev.con, ev.labels, ev.manifest
        con.execute(sql("wilson.sql"))
        matching = match_truth(con, coverage.column, labels, ev.truth_column, log=ev.log) if coverage.column else None
        con.execute(sql("evaluated.sql", rule=literal(matching.rule if matching else TruthRule.ID), unknown=number(unknown_number(labels))))
        con.execute(sql("class_counts.sql"))
        if manifest.ground_truth:
            _say_how_ids_matched(ev.log, manifest, manifest.ground_truth, coverage.truth_rows, coverage.truth_rows - coverage.missing)
        evaluated, accuracy, macro_f1, weighted_f1, log_loss, log_loss_rows = con.execute(
            sql("metrics.sql"), {"eps": LOG_LOSS_EPS}
        ).fetchone()
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
        return {
            "evaluated": int(evaluated),
            "truth_matching": matching,
            "accuracy": _number(accuracy),
            "macro_f1": _number(macro_f1),
            "weighted_f1": _number(weighted_f1),
            "log_loss": _number(log_loss),
            "log_loss_rows": int(log_loss_rows),
            "ece": _number(ece),
            "ece_bins": ECE_BINS,
            "calibration": [
                CalibrationBin(bin=int(b), lower=b / ECE_BINS, upper=(b + 1) / ECE_BINS, rows=int(n), confidence=conf, accuracy=acc)
                for b, n, conf, acc in bins
            ],
            "per_class": per_class,
            "confusion": confusion,
            "unknown_labels": unknown,
            "unknown_label_rows": sum(unknown.values()),
            **ranking,
            **({"label_audit": label_audit(con, labels, EXCERPT_CHARS)} if evaluated else {}),
        }

    def reference_records(self, ev: Evaluation) -> dict[str, Any]:
        """calibration_by_label over the `evaluated` rows (the accuracy estimate reads `calibration`)."""
        return calibration_by_label(ev.con, "calibration_by_label.sql", ev.labels)

    def slices(self, ev: Evaluation) -> tuple[dict, dict]:
        return _slices(ev.con, ev.slice_columns)

    def length_sides(self, ev: Evaluation) -> dict[bool, LengthSide]:
        return proportion_sides(ev.con)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        assert document.truth_matching is not None, "evaluated rows were matched to a truth"
        return compare(ev.con, ev.run, baseline, document, ev.slice_columns, document.truth_matching, ev.truth_column)

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None:
        """The predicted label (categorical) and the top score (numeric)."""
        views.view("predicted_label", "drift_predicted_label.sql", False)
        views.view("score", "drift_score.sql", True)

    def estimate(self, con, estimated: Estimated, labels: list[str], recorded: dict, drift: Drift) -> None:
        """Accuracy with its interval from the reference's `calibration`, macro-F1 from its calibration_by_label."""
        by_label = recorded_bins(estimated, recorded)
        if by_label is None:
            return
        estimated.accuracy, estimated.accuracy_ci = accuracy_estimate(con, recorded.get("calibration") or [], estimated.rows)
        f1 = expected_f1(con, "estimate_single_label.sql", by_label, labels)
        estimated.macro_f1, estimated.macro_f1_ci = f1.macro, f1.macro_ci(con, renormalised=True)

    # -- section 13: the targets and label-free predictions of the prediction-powered metrics --------

    def label_free(self, ev: Evaluation, reference: RecordedMetrics | None) -> LabelFreeModel:
        """pp_label_free and pp_cells: accuracy's f (the reference's a_b of the row's score bin, or the
        score) and macro_f1's TP/FP/FN per label from q (the reference's calibration, renormalised, or
        the probabilities)."""
        recorded = reference.model_dump() if reference is not None else {}
        calibration, by_label = recorded.get("calibration"), recorded.get("calibration_by_label")
        uses = bool(calibration is not None and by_label)
        bins = (
            {int(c["bin"]): (int(c["rows"]), round((c.get("accuracy") or 0.0) * int(c["rows"]))) for c in calibration or []} if uses else {}
        )
        params = {
            "reference": uses,
            "bins": ECE_BINS,
            "bin_rows": [float(bins.get(b, (0, 0))[0]) for b in range(ECE_BINS)],
            "correct": [float(bins.get(b, (0, 0))[1]) for b in range(ECE_BINS)],
            "rows": [[float(c["rows"]) for c in ((by_label or {}).get(name) or _EMPTY_BINS)] for name in ev.labels],
            "truth": [[float(c["truth"]) for c in ((by_label or {}).get(name) or _EMPTY_BINS)] for name in ev.labels],
            "names": ev.labels,
        }
        set_variables(ev.con, **params)
        ev.con.execute(sql("single_label_label_free.sql"))
        return LabelFreeModel(
            metrics=(PlanMetric("accuracy", "mean", "accuracy"), PlanMetric("macro_f1", "f1_macro", "macro_f1")),
            headline="accuracy",
            sample_target="accuracy",
            uses_reference=uses,
        )

    def label_targets(self, ev: Evaluation) -> None:
        """pp_targets over the evaluated rows: accuracy's Y and macro_f1's TP/FP/FN per label."""
        ev.con.execute(sql("single_label_targets.sql"))

    def label_free_variance(self, ev: Evaluation, reference: RecordedMetrics | None, rows: int) -> float | None:
        """The label-free accuracy's own variance: section 12's accuracy_ci variance with a reference,
        sum f (1 - f) / N^2 without one."""
        if reference is not None:
            return accuracy_variance(ev.con, reference.model_dump().get("calibration") or [], rows)
        (total,) = ev.con.execute("SELECT sum(f * (1 - f)) FROM pp_label_free").fetchone()
        return float(total or 0.0) / rows**2


EVALUATION = SingleLabel()


def _ranking_metrics(con, labels: list[str], evaluated: int) -> dict[str, Any]:
    """The docs/contracts.md section 8 fields and the report's extra fields, over the `evaluated` table."""
    right = con.execute("SELECT count(*) FILTER (WHERE correct) FROM evaluated").fetchone()[0]
    accuracy_ci = con.execute("SELECT wilson(?, ?)", [right, evaluated]).fetchone()[0]
    con.execute(ovr_table("ovr", sql("ovr.sql")))
    per_class = con.execute(sql("ranking.sql", ovr="ovr", labels="labels")).fetchall()
    roc = {name: _number(auc) for name, auc, _ in per_class}
    ap = {name: _number(value) for name, _, value in per_class}
    kmax = min(TOP_K_MAX, len(labels) - 1)
    top_k = {}
    if kmax >= 2:
        hits = dict(con.execute(sql("top_k.sql"), {"kmax": kmax}).fetchall())
        top_k = {str(k): hits.get(k, 0) / evaluated for k in range(2, kmax + 1)}
    con.execute("CREATE OR REPLACE TEMP TABLE cuts AS SELECT unnest(?::DOUBLE[]) AS threshold", [THRESHOLDS])
    thresholds = [
        ThresholdRow(
            threshold=t,
            rows=int(n),
            coverage=n / evaluated,
            accuracy=_number(acc),
            macro_precision=_number(p),
            macro_recall=_number(r),
            macro_f1=_number(f1),
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
        "roc_auc": ClassAreas(macro=_mean(roc.values()), per_class=roc),
        "average_precision": ClassAreas(macro=_mean(ap.values()), per_class=ap),
        "top_k_accuracy": top_k,
        "thresholds": thresholds,
        "curves": curves,
        "score_histogram": histogram,
        "confident_errors": errors,
    }


def _slices(con, slice_columns: list[str]) -> tuple[dict, dict]:
    """Per slice column: {value: {rows, accuracy, accuracy_ci}} worst first, and the group counts of
    columns with more groups than were kept."""
    slices, truncated = {}, {}
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

"""The evaluation of a multi-label head: a sigmoid per label, thresholded (docs/contracts.md, section 7).

The truth is a list of labels per row; its elements (`truth_elements`) are matched to the model's
labels by the column's one rule, as a single-label column is. The metrics (docs/contracts.md
section 9) are computed in SQL (sql/multi_label/) over one table:

    ml_rows(row_index BIGINT, id VARCHAR, probabilities DOUBLE[], truth BOOLEAN[] [, text VARCHAR])
        One row per scored row. `probabilities` and `truth` hold one element per model label, in
        the model's label order. truth NULL: the row has no ground truth and is not evaluated;
        every element false: a row with no label. `id` is the id's text (it decides the tuning
        half of the threshold search: md5(id) starting with 0-7 tunes, 8-f is held out).

A metric that cannot be computed is null, never NaN; 0/0 counts as 0 in precision, recall and F1
(scikit-learn's zero_division default); ROC-AUC and average precision of a label with no positive
or no negative truth are null and left out of the macro (scikit-learn gives NaN, or 1.0 for the AP
of an always-positive label). The comparison's paired rows and tests are here too (pair,
multilabel_resampled_tests); what every kind shares is compare.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scorekeeper.evaluation.base import (
    CONFIDENT_ERRORS,
    ECE_BINS,
    LOG_LOSS_EPS,
    Coverage,
    Evaluation,
    KindReport,
    LengthSide,
    finite_number,
    mean_known,
)
from scorekeeper.evaluation.compare import (
    Keys,
    Paired,
    block_codes,
    block_key,
    compare,
    dense,
    label_positions,
    other_labels,
    paired_sample,
    row_mean_tests,
)
from scorekeeper.evaluation.duck import MICRO_LABEL, Fragment, literal, one_row, ovr_table, records, sql, statement
from scorekeeper.evaluation.estimate import bin_counts, calibration_by_label, expected_f1, expected_totals, recorded_bins
from scorekeeper.evaluation.labelling import LabelFreeModel, PlanMetric, empty_targets, has_table, set_variables
from scorekeeper.evaluation.length_impact import ratio_sides
from scorekeeper.evaluation.signals import RunSide, SignalViews
from scorekeeper.evaluation.slices import as_parts, head_slices
from scorekeeper.evaluation.statistics import paired_blocks as ph
from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.evaluation.truth import STAGED_VALUE, match_truth, truth_table
from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import threshold_vector
from scorekeeper.metrics.document import (
    Comparison,
    Drift,
    Estimated,
    GroundTruthSource,
    LabelSliceGroup,
    MetricsDocument,
    MultiLabelMetrics,
    RecordedMetrics,
    ReferenceRecords,
    SliceGroups,
)
from scorekeeper.metrics.registry import BY_NAME, SliceMetric, scalar_metrics
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching, TruthRule
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

TUNING_SPLIT = "md5 of the id's text: first hex digit 0-7 tunes the threshold, 8-f measures it"

# One number each, computed by multilabel_metrics.sql and regression_metrics.sql (the correlations by
# their own queries): the metric registry's scalars of the head.
MULTILABEL_SCALARS = tuple(m.name for m in scalar_metrics(HeadKind.MULTI_LABEL))


def multilabel_metrics(con: Connection, labels: list[str], thresholds: list[float]) -> dict:
    """Every multi_label key of the contract over `ml_rows`, with the report's data beside them."""
    if len(thresholds) != len(labels):
        raise ValueError(f"{len(thresholds)} thresholds for {len(labels)} labels")
    con.execute(sql("multilabel_labels.sql"))
    con.executemany("INSERT INTO ml_labels VALUES (?, ?, ?)", [(i, name, float(t)) for i, (name, t) in enumerate(zip(labels, thresholds))])
    bad = con.execute(
        "SELECT row_index FROM ml_rows WHERE len(probabilities) <> ? OR (truth IS NOT NULL AND len(truth) <> ?) ORDER BY row_index LIMIT 5",
        [len(labels), len(labels)],
    ).fetchall()
    if bad:
        raise ValueError(f"ml_rows: rows {[r for (r,) in bad]} do not hold one probability and one truth per label ({len(labels)})")
    con.execute(sql("multilabel_cells.sql"))
    con.execute(sql("multilabel_label_counts.sql"))
    con.execute(ovr_table("ml_ovr", sql("multilabel_ovr.sql", cells=Fragment("(SELECT label_id, prob AS score, truth FROM ml_cells)"))))
    (row,) = records(con.execute(sql("multilabel_metrics.sql"), {"eps": LOG_LOSS_EPS}))
    evaluated = int(row["evaluated"])
    counts = con.execute(
        "SELECT label_name, threshold, tp, fp, fn, support, cells, precision, recall, f1 FROM ml_label_counts ORDER BY label_id"
    ).fetchall()
    tuned = con.execute(sql("multilabel_tuned_thresholds.sql")).fetchall()
    halves = dict(con.execute("SELECT tuning, count(DISTINCT row_index) FROM ml_cells GROUP BY tuning").fetchall())

    roc, ap, micro_roc, micro_ap = _ranking(con, counts)
    calibration, ece = _calibration(con, labels)
    per_label = _per_label(counts, tuned, evaluated)
    errors = [
        {"row_index": int(i), "id": row_id, "label": name, "truth": bool(truth), "probability": prob}
        for i, row_id, name, truth, prob in con.execute(sql("multilabel_confident_errors.sql"), {"limit": CONFIDENT_ERRORS}).fetchall()
    ]
    return {
        "evaluated": evaluated,
        **{k: (finite_number(row[k]) if evaluated else None) for k in MULTILABEL_SCALARS},
        "roc_auc": {"macro": mean_known(roc.values()), "micro": micro_roc, "per_label": roc},
        "average_precision": {"macro": mean_known(ap.values()), "micro": micro_ap, "per_label": ap},
        "ece": ece,
        "ece_bins": ECE_BINS,
        "per_label": per_label,
        "threshold_tuning": {"split": TUNING_SPLIT, "tuning_rows": int(halves.get(True, 0)), "heldout_rows": int(halves.get(False, 0))},
        "label_cardinality": {
            "truth": finite_number(row["truth_cardinality"]),
            "predicted": finite_number(row["predicted_cardinality"]),
            "rows_without_prediction": int(row["rows_without_prediction"] or 0),
        },
        "label_calibration": calibration,
        "curves": _curves(con),
        "confident_wrong_labels": errors,
    }


def _ranking(con: Connection, counts: list[tuple]) -> tuple[dict, dict, float | None, float | None]:
    """Per label ROC-AUC and average precision (None for a label without positives or negatives), and
    the micro ones (None where the pooled cells have none), over ml_ovr."""
    defined = {name: 0 < support < cells for name, _, _, _, _, support, cells, *_ in counts}
    ranking = con.execute(sql("ranking.sql", ovr="ml_ovr", labels="ml_labels")).fetchall()
    micro = one_row(con.execute(sql("ranking.sql", ovr="ml_ovr", labels=MICRO_LABEL)))
    pooled_support, pooled_cells = sum(c[5] for c in counts), sum(c[6] for c in counts)
    micro_defined = 0 < pooled_support < pooled_cells
    roc = {name: finite_number(auc) if defined[name] else None for name, auc, _ in ranking}
    ap = {name: finite_number(value) if defined[name] else None for name, _, value in ranking}
    return roc, ap, finite_number(micro[1]) if micro_defined else None, finite_number(micro[2]) if micro_defined else None


def _per_label(counts: list[tuple], tuned: list[tuple], evaluated: int) -> dict[str, dict]:
    """metrics.json `per_label`: each label's counts and scores at its threshold and the tuned one."""
    per_label = {}
    for (name, threshold, _, _, _, support, cells, p, r, f1), (_, t_threshold, t_f1, t_heldout, given_heldout) in zip(counts, tuned):
        per_label[name] = {
            "precision": finite_number(p) if evaluated else None,
            "recall": finite_number(r) if evaluated else None,
            "f1": finite_number(f1) if evaluated else None,
            "support": int(support),
            "prevalence": support / cells if cells else None,
            "threshold": threshold,
            "tuned_threshold": finite_number(t_threshold),
            "tuned_f1_in_sample": finite_number(t_f1),
            "tuned_f1_heldout": finite_number(t_heldout),
            "heldout_f1_at_threshold": finite_number(given_heldout),
        }
    return per_label


def _calibration(con: Connection, labels: list[str]) -> tuple[dict, dict]:
    """Per label the reliability bins, and ECE per label averaged (macro) and over every cell (micro)."""
    bins: dict[int, list] = {}
    for label_id, b, n, conf, freq in con.execute(sql("multilabel_calibration.sql"), {"bins": ECE_BINS}).fetchall():
        bins.setdefault(label_id, []).append((int(b), int(n), conf, freq))

    def ece_of(label_id: int) -> float | None:
        rows = bins.get(label_id, [])
        total = sum(n for _, n, _, _ in rows)
        return sum(n * abs(freq - conf) for _, n, conf, freq in rows) / total if total else None

    per_label = [ece_of(i) for i in range(len(labels))]
    calibration = {
        name: [
            {"bin": b, "lower": b / ECE_BINS, "upper": (b + 1) / ECE_BINS, "rows": n, "confidence": conf, "frequency": freq}
            for b, n, conf, freq in bins.get(i, [])
        ]
        for i, name in enumerate(labels)
    }
    macro = None if any(e is None for e in per_label) else mean_known(per_label)
    return calibration, {"macro": macro, "micro": ece_of(-1), "per_label": dict(zip(labels, per_label))}


def _curves(con: Connection) -> dict:
    """ROC and precision-recall points per label, thinned as the single-label curves are (curves.sql)."""
    curves: dict[str, dict] = {"roc": {}, "pr": {}}
    for name, curve, x, y in con.execute(sql("curves.sql", ovr="ml_ovr", labels="ml_labels")).fetchall():
        keys = ("fpr", "tpr") if curve == "roc" else ("recall", "precision")
        start = (0.0, 0.0) if curve == "roc" else (0.0, 1.0)
        points = curves[curve].setdefault(name, {keys[0]: [start[0]], keys[1]: [start[1]]})
        points[keys[0]].append(x)
        points[keys[1]].append(y)
    return curves


def _multi_label(con: Connection, keys: tuple[Fragment, Fragment], positions: list[int] | None) -> dict:
    con.execute(sql("paired_multilabel.sql", other_key=keys[0], this_key=keys[1]))
    con.execute(sql("paired_multilabel_cells.sql"), {"positions": positions or []})
    rows, r2w, w2r, other = one_row(
        con.execute(
            """
        WITH exact AS (
            SELECT row_index, bool_and(right_before) AS right_before, bool_and(right_after) AS right_after
            FROM ml_paired_cells GROUP BY row_index
        )
        SELECT count(*),
               count(*) FILTER (WHERE right_before AND NOT right_after),
               count(*) FILTER (WHERE NOT right_before AND right_after),
               count(*) FILTER (WHERE NOT right_before AND NOT right_after AND list_sort(p.before) <> list_sort(p.after))
        FROM exact JOIN ml_paired AS p ON p.row_index = exact.row_index
        """
        )
    )
    per_label = {}
    for name, b, c in con.execute(
        """
        SELECT label_name, count(*) FILTER (WHERE right_before AND NOT right_after),
               count(*) FILTER (WHERE NOT right_before AND right_after)
        FROM ml_paired_cells GROUP BY label_name
        """
    ).fetchall():
        per_label[name] = {"right_to_wrong": int(b), "wrong_to_right": int(c), "mcnemar_p": pt.mcnemar_exact(int(b), int(c))}
    con.execute(sql("paired_multilabel_rows.sql"), {"positions": positions or [], "eps": LOG_LOSS_EPS})
    tests = row_mean_tests(con, "ml_paired_rows", HeadKind.MULTI_LABEL)
    tests["subset_accuracy"] = pt.accuracy_test(int(r2w), int(w2r), int(rows)) if rows else pt.untested(pt.MCNEMAR)
    if rows:
        tests |= multilabel_resampled_tests(con, int(rows), positions is not None)
    return {
        "tests": tests,
        "rows_compared": int(rows),
        "flipped": {"right_to_wrong": int(r2w), "wrong_to_right": int(w2r), "other": int(other)},
        "mcnemar_p": pt.mcnemar_exact(int(r2w), int(w2r)),
        "per_label": per_label,
    }


def multilabel_resampled_tests(con: Connection, rows: int, with_scores: bool) -> dict[str, dict]:
    """The multi-label tests that are not per-row means, over ml_paired_cells: F1, precision and
    recall averages and (with both runs' probabilities) ECE by the block bootstrap, ROC-AUC by
    DeLong, average precision by the row-sample bootstrap (scorekeeper/evaluation/statistics/paired_blocks.py)."""
    labels = one_row(con.execute("SELECT count(*) FROM labels"))[0]
    width = labels * len(ph.COUNT_FIELDS)
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = block_codes(con, "ml_paired_cells", key)
    got = con.execute(sql("paired_multilabel_blocks.sql", block=key)).fetchnumpy()
    counts = dense(got["block"], codes, (got["label_id"],), np.column_stack([got[f] for f in ph.COUNT_FIELDS]), (labels, 5))
    tests = ph.block_bootstrap(
        counts.reshape(len(codes), width), np.zeros((len(codes), 0)), lambda t, h: ph.multilabel_count_deltas(t, h, labels), resamples
    )
    if not with_scores:
        return tests
    width = 1 + 2 * labels * ECE_BINS
    blocks, resamples = ph.block_plan(rows, width)
    key = block_key(rows, blocks)
    codes = block_codes(con, "ml_paired_cells", key)
    got = con.execute(sql("paired_multilabel_ece.sql", block=key), {"bins": ECE_BINS}).fetchnumpy()
    gaps = dense(got["block"], codes, (got["side"], got["label_id"], got["bin"]), got["gap"], (2, labels, ECE_BINS))
    block_rows = dict(con.execute(statement("SELECT {key}, count(DISTINCT row_index) FROM ml_paired_cells GROUP BY 1", key=key)).fetchall())
    sums = np.column_stack([[block_rows[k] for k in codes], gaps.reshape(len(codes), -1)])
    tests |= ph.block_bootstrap(sums, np.zeros((len(codes), 0)), lambda t, h: ph.multilabel_ece_deltas(t, h, labels, ECE_BINS), resamples)

    ranking = {}
    for side in ("after", "before"):
        cells = statement("(SELECT label_id, {prob} AS score, truth FROM ml_paired_cells)", prob=f"prob_{side}")
        con.execute(ovr_table(f"ml_paired_ovr_{side}", sql("multilabel_ovr.sql", cells=cells)))
        per_label = con.execute(sql("ranking.sql", ovr=f"ml_paired_ovr_{side}", labels="ml_labels")).fetchall()
        micro = one_row(con.execute(sql("ranking.sql", ovr=f"ml_paired_ovr_{side}", labels=MICRO_LABEL)))
        ranking[side] = [(auc, ap) for _, auc, ap in [*per_label, micro]]
    macro_delta, macro_squares, micro_delta, micro_squares = one_row(con.execute(sql("paired_multilabel_delong.sql")))
    tests["roc_auc_macro"] = ph.delong_influence(macro_delta, macro_squares)
    tests["roc_auc_micro"] = ph.delong_influence(micro_delta, micro_squares)
    # average precision: defined where the ROC-AUC is (a label with positives and negatives)
    differences = [a[1] - b[1] for a, b in zip(ranking["after"], ranking["before"], strict=True) if a[0] is not None]
    per_label_differences = differences[:-1] if ranking["after"][-1][0] is not None else differences
    ap_deltas = {
        "average_precision_macro": float(np.mean(per_label_differences)) if per_label_differences else None,
        "average_precision_micro": differences[-1] if ranking["after"][-1][0] is not None else None,
    }
    positions = pt.subset_positions(rows, pt.ap_rows(labels)).tolist()
    sample = paired_sample(con, "ml_paired_cells", "label_id", ("truth", "prob_after", "prob_before"), positions)
    truth, after, before = (np.array([r[i] for r in sample], dtype=dtype) for i, dtype in ((0, bool), (1, float), (2, float)))

    def ap_change(weights: np.ndarray) -> dict[str, np.ndarray]:
        this, other = ph.multilabel_ap(truth, after, weights), ph.multilabel_ap(truth, before, weights)
        return {k: this[k] - other[k] for k in this}

    return tests | ph.sample_bootstrap(ap_deltas, ap_change, len(sample), rows, pt.AP_RESAMPLES)


def pair(ev: Evaluation, keys: Keys, metrics: MetricsDocument, other_metrics: RecordedMetrics, other: Location) -> Paired:
    """The paired rows' flips (exact match and per label) and the paired tests of every compared metric."""
    found = _multi_label(ev.con, keys, label_positions(metrics.labels or [], other_labels(other_metrics)))
    rows, tests = found.pop("rows_compared"), found.pop("tests")
    return Paired(rows, found, tests)


# The evaluated rows as the slices and the length split read them (head_slice_rows: 2TP, 2TP + FP + FN, exact).
SLICE_ROWS = "multilabel_slice_rows.sql"


def slice_group(rows: int, num: float, den: float, exact: int, wilson, ci) -> dict:
    """A slice group's fields: micro-F1 (the bootstrap interval) and subset accuracy (Wilson's)."""
    return {
        "rows": rows,
        "micro_f1": num / den if den else 0.0,
        "micro_f1_ci": ci,
        "subset_accuracy": exact / rows,
        "subset_accuracy_ci": wilson,
    }


def slice_breakdown(con: Connection, slice_columns: list[str]) -> tuple[dict, dict]:
    """metrics.json `slices` and `slices_truncated` of a multi-label run (over `ml_cells`)."""
    return head_slices(con, SLICE_ROWS, slice_group, slice_columns)


class MultiLabel:
    kind = HeadKind.MULTI_LABEL
    report = KindReport(
        slice_metrics=(
            SliceMetric(BY_NAME["micro_f1"], "micro_f1_ci", "bootstrap"),
            SliceMetric(BY_NAME["subset_accuracy"], "subset_accuracy_ci", "Wilson"),
        ),
        slice_caption=None,
        sections=("per_label",),
    )

    def truth_table(self, ev: Evaluation) -> tuple[GroundTruthSource | None, ColumnKind | None]:
        return truth_table(ev.con, ev.run, ev.manifest, STAGED_VALUE, Fragment("value VARCHAR[]"), elements=True)

    def check_truth(self, ev: Evaluation, column: ColumnKind | None) -> TruthMatching | None:
        """The rule of the list elements (`truth_elements`), as a single-label column's."""
        return match_truth(ev.con, column, ev.labels, ev.truth_column, quiet=True, truth="truth_elements") if column else None

    def metrics(self, ev: Evaluation, coverage: Coverage) -> MultiLabelMetrics:
        """The multi-label metrics; the list elements are matched to the labels by the column's one
        rule (truth.py, as a single-label column is), recorded as `truth_matching`. Each label's
        threshold is in per_label."""
        con, labels = ev.con, ev.labels
        matching = (
            match_truth(con, coverage.column, labels, ev.truth_column, truth="truth_elements", log=ev.log) if coverage.column else None
        )
        con.execute(sql("multi_label_evaluated.sql", rule=literal(matching.rule if matching else TruthRule.ID)))
        unknown = {str(name): int(n) for name, n in con.execute(sql("multi_label_unknown.sql")).fetchall()}
        fields = {"truth_matching": matching, "unknown_labels": unknown, "unknown_label_rows": sum(unknown.values())}
        return MultiLabelMetrics.model_validate(fields | multilabel_metrics(con, labels, threshold_vector(ev.thresholds, labels)))

    def reference_records(self, ev: Evaluation) -> ReferenceRecords:
        """calibration_by_label over the evaluated cells (`ml_cells`)."""
        return calibration_by_label(ev.con, "multilabel_calibration_by_label.sql", ev.labels)

    def slices(self, ev: Evaluation) -> tuple[SliceGroups, dict[str, int]]:
        groups, truncated = slice_breakdown(ev.con, ev.slice_columns)
        return as_parts(groups, LabelSliceGroup), truncated

    def length_sides(self, ev: Evaluation) -> dict[bool, LengthSide]:
        return ratio_sides(ev.con, SLICE_ROWS)

    def comparison(self, ev: Evaluation, baseline: Location, document: MetricsDocument) -> Comparison:
        return compare(ev, baseline, document, pair)

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None:
        """Labels per row (numeric), and each label's positive share (`positive:LABEL`, counted at
        once into drift_categorical_counts) for the labels both models have."""
        shared = views.skip_unshared("positive:", reference, current)
        views.view("labels_per_row", "drift_labels_per_row.sql", True)
        views.con.execute(sql("drift_labels.sql"), {"ids": [i for i, _ in shared], "names": [n for _, n in shared]})
        views.con.execute(sql("drift_positive_counts.sql", **views.sources))

    def estimate(self, con: Connection, estimated: Estimated, labels: list[str], reference: RecordedMetrics, drift: Drift) -> None:
        """Macro- and micro-F1 from the reference's calibration_by_label."""
        by_label = recorded_bins(estimated, reference)
        if by_label is not None:
            f1 = expected_f1(con, "estimate_multi_label.sql", by_label, labels, {"names": labels})
            estimated.macro_f1, estimated.macro_f1_ci = f1.macro, f1.macro_ci(con, renormalised=False)
            estimated.micro_f1, estimated.micro_f1_ci = f1.micro, f1.micro_ci(con, renormalised=False)

    # -- section 13: the targets and label-free predictions of the prediction-powered metrics --------

    def label_free(self, ev: Evaluation, reference: RecordedMetrics | None) -> LabelFreeModel:
        """pp_label_free and pp_cells from q per label (the reference's calibration, not renormalised,
        or the probability): subset accuracy's f, macro_f1's TP/FP/FN per label, micro_f1's pooled."""
        by_label = reference.calibration_by_label if reference is not None else None
        rows, truth = bin_counts(by_label, ev.labels)
        params = {"reference": bool(by_label), "bins": ECE_BINS, "rows": rows, "truth": truth, "names": ev.labels}
        set_variables(ev.con, **params)
        ev.con.execute(sql("multi_label_label_free.sql"))
        # the per-label totals: the estimate's when it ran against the same reference, else a pass of their own
        totals = "estimate_totals" if by_label and expected_totals(ev.con, rows, truth) else "pp_label_totals"
        ev.con.execute(sql("multi_label_cell_totals.sql", label_totals=totals))
        return LabelFreeModel(
            metrics=(
                PlanMetric("micro_f1", "f1_micro", "micro_f1"),
                PlanMetric("macro_f1", "f1_macro", "macro_f1"),
                PlanMetric("subset_accuracy", "mean", "subset_accuracy"),
            ),
            headline="micro_f1",
            sample_target="subset_accuracy",
            uses_reference=bool(by_label),
            f_target=("subset_accuracy", ""),
        )

    def label_targets(self, ev: Evaluation) -> None:
        """pp_targets over the rows with ground truth: subset accuracy, TP/FP/FN per label and pooled."""
        if not has_table(ev.con, "ml_rows"):
            empty_targets(ev.con)
            return
        set_variables(ev.con, names=ev.labels)
        ev.con.execute(sql("multi_label_targets.sql"))

    def label_free_variance(self, ev: Evaluation, reference: RecordedMetrics | None, rows: int) -> float | None:
        """micro_f1's label-free estimate is taken as exact (a reference much larger than the plan)."""
        return 0.0


EVALUATION = MultiLabel()

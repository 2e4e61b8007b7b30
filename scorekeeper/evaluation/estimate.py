"""Estimated performance without labels (docs/drift.md): the reference run's calibration applied to
this run's scores, so a run without labels gets an estimate and a backfill (a run with labels)
shows estimate and truth side by side.

Two halves. What every run with ground truth records for a later run (`reference_records`): the
per-label probability bins (`calibration_by_label`) of a classifier, the residuals in the
prediction's decile bins (`residual_bins`) of a regression head; the accuracy estimate reads the
`calibration` bins every single-label run records. And the estimate of a run against a reference
(`estimate`): accuracy with its interval, macro-F1 (single-label), micro/macro-F1 (multi-label), MAE
(regression). All bins are the 15 equal-width bins [j/15, (j+1)/15) of ece and calibration (the
last one holding 1.0), or the `prediction` signal's deciles. The per-row work is SQL
(sql/estimate/); Python combines at most 15 numbers per label. Both halves are the kind's
(`HeadEvaluation.reference_records` and `.estimate`, in its module); the helpers they share are here.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scorekeeper.evaluation import drift as d
from scorekeeper.evaluation.base import ECE_BINS
from scorekeeper.evaluation.duck import one_row, sql
from scorekeeper.metrics.document import CalibrationBin, Drift, Estimated, LabelBinCount, RecordedMetrics, ReferenceRecords

if TYPE_CHECKING:
    from scorekeeper.evaluation.base import Evaluation, HeadEvaluation
    from scorekeeper.evaluation.duck import Connection
    from scorekeeper.evaluation.representation import Measured
    from scorekeeper.evaluation.settings import EvaluationSettings

Z95 = 1.959963984540054
ASSUMPTIONS = (
    "the relation between input and label has not changed since the reference run, and the "
    "reference run is labelled like production; under a concept shift the estimate is wrong"
)


# -- what a run with ground truth records for later runs -------------------------------------------------


def label_bins(rows: list[tuple], labels: list[str]) -> dict[str, list[LabelBinCount]]:
    """calibration_by_label from (label_id, bin, rows, truth) rows: every label, 15 bins each."""
    out = {name: [LabelBinCount(rows=0, truth=0) for _ in range(ECE_BINS)] for name in labels}
    for label_id, b, n, truth in rows:
        out[labels[label_id]][b] = LabelBinCount(rows=int(n), truth=int(truth))
    return out


def calibration_by_label(con: Connection, query: str, labels: list[str]) -> ReferenceRecords:
    """A classifier's calibration_by_label, by the kind's `query` over its evaluated rows or cells."""
    return ReferenceRecords(calibration_by_label=label_bins(con.execute(sql(query), {"bins": ECE_BINS}).fetchall(), labels))


# -- the estimate of a run against a reference ------------------------------------------------------------


def estimate(
    con: Connection, kind: HeadEvaluation, labels: list[str], reference: RecordedMetrics, reference_name: str, rows: int, drift: Drift
) -> Estimated:
    """metrics.json `estimated` of the run on `con` (its `predictions` view) from the reference's
    recorded calibration; `drift` is this run's drift (the regression estimate reads its bins)."""
    estimated = Estimated(method="reference_calibration", reference=reference_name, assumptions=ASSUMPTIONS, rows=rows)
    estimated.caveat = caveat(drift)
    kind.estimate(con, estimated, labels, reference, drift)
    return estimated


def recorded_bins(estimated: Estimated, reference: RecordedMetrics) -> dict[str, list[LabelBinCount]] | None:
    """A classifier reference's calibration_by_label, when it has one and this run scored rows; else
    None, with `estimated.unavailable` saying why."""
    by_label = reference.calibration_by_label
    if not by_label:
        estimated.unavailable = "the reference run records no calibration_by_label (no ground truth, or written by an older version)"
        return None
    if estimated.rows == 0:
        estimated.unavailable = "this run scored no rows"
        return None
    return by_label


@dataclass(frozen=True)
class ExpectedF1:
    """The expected (TP, FP, FN) per label of this run from the reference's calibration_by_label
    (the kind's query makes estimate_cells), their macro and micro F1, and the reference's counts
    the intervals read."""

    cells: list[tuple[float, float, float]]
    macro: float | None
    micro: float | None
    counts_r: list[list[float]]
    counts_t: list[list[float]]

    def macro_ci(self, con: Connection, renormalised: bool) -> list[float] | None:
        return f1_interval(con, self.macro, macro_gradients(self.cells), self.counts_r, self.counts_t, renormalised)

    def micro_ci(self, con: Connection, renormalised: bool) -> list[float] | None:
        return f1_interval(con, self.micro, micro_gradients(self.cells), self.counts_r, self.counts_t, renormalised)


def expected_f1(
    con: Connection, query: str, by_label: dict[str, list[LabelBinCount]], labels: list[str], params: dict | None = None
) -> ExpectedF1:
    """The expected F1 of this run that the kind's `query` (estimate_cells from the reference's
    calibration_by_label) gives; `renormalised` in the intervals: the kind's q sum to 1 over labels."""
    counts_r, counts_t = bin_counts(by_label, labels)
    con.execute(sql(query), {"rows": counts_r, "truth": counts_t, "bins": ECE_BINS} | (params or {}))
    con.execute(sql("estimate_expected.sql"))
    # the reference's counts the totals were made from: expected_totals() knows them by these
    con.execute("SET VARIABLE estimate_rows = ?::DOUBLE[][]", [[[float(x) for x in r] for r in counts_r]])
    con.execute("SET VARIABLE estimate_truth = ?::DOUBLE[][]", [[[float(x) for x in r] for r in counts_t]])
    cells = [
        (float(tp), float(fp), float(fn)) for _, tp, fp, fn in con.execute("SELECT * FROM estimate_totals ORDER BY label_id").fetchall()
    ]
    macro, micro = f1_from_expected(cells)
    return ExpectedF1(cells, macro, micro, counts_r, counts_t)


def caveat(drift: Drift | None) -> str | None:
    """estimated.caveat: the input signals that drifted (drift.py INPUT_SIGNALS), named; None when none did."""
    moved = d.drifted_inputs(drift)
    if not moved:
        return None
    return (
        f"the inputs moved against the reference run ({', '.join(moved)} drifted): the estimate assumes this run's inputs "
        "are like the reference's, so it and its interval may be far off"
    )


def macro_gradients(cells: list[tuple[float, float, float]]) -> tuple[list[float], list[float]]:
    """d macro-F1 / d TP_k and d FN_k (FP_k = predicted_k - TP_k moves with TP_k): with D_k = 2TP + FP
    + FN, F1_k = 2TP / D_k; the labels left out of the macro (D_k = 0) have none."""
    kept = [2 * tp + fp + fn > 0 for tp, fp, fn in cells]
    share = 1 / max(sum(kept), 1)
    tp_gradient, fn_gradient = [], []
    for (tp, fp, fn), keep in zip(cells, kept, strict=True):
        total = 2 * tp + fp + fn
        tp_gradient.append(share * 2 * (tp + fp + fn) / total**2 if keep else 0.0)
        fn_gradient.append(-share * 2 * tp / total**2 if keep else 0.0)
    return tp_gradient, fn_gradient


def micro_gradients(cells: list[tuple[float, float, float]]) -> tuple[list[float], list[float]]:
    """d micro-F1 / d TP_k and d FN_k: the same for every label (the counts are summed first)."""
    tp, fp, fn = (sum(c[i] for c in cells) for i in range(3))
    total = 2 * tp + fp + fn
    if total <= 0:
        return [0.0] * len(cells), [0.0] * len(cells)
    return [2 * (tp + fp + fn) / total**2] * len(cells), [-2 * tp / total**2] * len(cells)


def f1_interval(
    con: Connection,
    value: float | None,
    gradients: tuple[list[float], list[float]],
    counts_r: list[list[float]],
    counts_t: list[list[float]],
    renormalised: bool,
) -> list[float] | None:
    """The 95% interval of an estimated F1 (docs/drift.md), by the delta method over `estimate_cells`:
    the run's part (each row's outcomes drawn from its q) plus the reference's (each label's bin
    rate a_kb = (t_kb + mean p of this run's cells in it) / (r_kb + 1), of variance
    a_kb (1 - a_kb) / (r_kb + 1), shared by every cell in the bin); clipped to [0, 1]."""
    if value is None:
        return None
    rows = con.execute(
        sql("estimate_f1_variance.sql"), {"tp_gradient": gradients[0], "fn_gradient": gradients[1], "renormalised": renormalised}
    ).fetchall()
    variance = float(rows[0][2] or 0.0)
    for label_id, b, h, _, mean_p in rows[1:]:
        r, t = counts_r[label_id][b], counts_t[label_id][b]
        a = (t + mean_p) / (r + 1)
        variance += float(h) ** 2 * a * (1 - a) / (r + 1)
    half = Z95 * math.sqrt(max(variance, 0.0))
    return [max(0.0, value - half), min(1.0, value + half)]


def bin_counts(by_label: dict[str, list[LabelBinCount]] | None, labels: list[str]) -> tuple[list[list[float]], list[list[float]]]:
    """Per label (in `labels`' order) the rows and the truths of each of its bins; zeros for a label
    the reference does not record."""
    empty = [LabelBinCount(rows=0, truth=0)] * ECE_BINS
    bins = [(by_label or {}).get(name) or empty for name in labels]
    return [[float(c.rows) for c in b] for b in bins], [[float(c.truth) for c in b] for b in bins]


def expected_totals(con: Connection, counts_r: list[list[float]], counts_t: list[list[float]]) -> bool:
    """Whether this connection's estimate made estimate_totals (each label's expected TP, FP, FN over
    every scored row) from these counts of the reference (bin_counts'): a labelling plan drawn
    against the same reference reads them instead of computing them again."""
    (same,) = one_row(
        con.execute(
            "SELECT coalesce(getvariable('estimate_rows') = ?::DOUBLE[][] AND getvariable('estimate_truth') = ?::DOUBLE[][], false)",
            [[[float(x) for x in r] for r in counts_r], [[float(x) for x in r] for r in counts_t]],
        )
    )
    return bool(same)


def reference_bins(calibration: list[CalibrationBin] | None) -> dict[int, tuple[int, int]]:
    """The reference's calibration as {bin: (rows, correct rows)}."""
    return {c.bin: (c.rows, round((c.accuracy or 0.0) * c.rows)) for c in calibration or []}


def accuracy_estimate(con: Connection, calibration: list[CalibrationBin], n: int) -> tuple[float, list[float]]:
    """Accuracy = sum_b n_b a_b / n with a_b = (correct_b + s_b) / (rows_b + 1), and its interval."""
    accuracy, variance = _accuracy_parts(con, calibration, n)
    half = Z95 * math.sqrt(variance)
    return accuracy, [max(0.0, accuracy - half), min(1.0, accuracy + half)]


def accuracy_variance(con: Connection, calibration: list[CalibrationBin], n: int) -> float:
    """The variance of the estimated accuracy (accuracy_ci's): the label-free estimate's own, which
    the prediction-powered estimate_bias test adds (docs/labelling.md)."""
    return _accuracy_parts(con, calibration, n)[1]


def _accuracy_parts(con: Connection, calibration: list[CalibrationBin], n: int) -> tuple[float, float]:
    ref = reference_bins(calibration)
    accuracy = var_ref = var_run = 0.0
    for b, n_b, s_b in con.execute(sql("estimate_score_bins.sql"), {"bins": ECE_BINS}).fetchall():
        rows_b, correct_b = ref.get(int(b), (0, 0))
        a = (correct_b + s_b) / (rows_b + 1)
        accuracy += n_b * a / n
        var_ref += (n_b / n) ** 2 * a * (1 - a) / (rows_b + 1)
        var_run += n_b * a * (1 - a) / n**2
    return accuracy, var_ref + var_run


def f1_from_expected(cells: list[tuple[float, float, float]]) -> tuple[float | None, float | None]:
    """(macro, micro) F1 of expected (TP, FP, FN) per label; a label with 2TP + FP + FN = 0 is left out."""
    f1s = [2 * tp / (2 * tp + fp + fn) for tp, fp, fn in cells if 2 * tp + fp + fn > 0]
    tp, fp, fn = (sum(c[i] for c in cells) for i in range(3))
    micro = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn > 0 else None
    return (sum(f1s) / len(f1s) if f1s else None), micro


def monitor(
    ev: Evaluation, kind: HeadEvaluation, settings: EvaluationSettings, representation: Measured | str | None = None
) -> tuple[Drift, Estimated]:
    """(drift, estimated) of the run evaluated on `ev` (its connection's `predictions` and `staged`
    views, its folder, labels and slice columns) against the completed run settings.drift_reference,
    judged by settings.drift_min_psi and drift_min_auc; SPEC 14's representation signal (this run's
    embeddings compared as settings.scored_with says it was scored) and moved tokens too.
    `representation` is the signal when the caller measured it already (representation.compare_runs)."""
    from scorekeeper.evaluation.representation import compare_runs
    from scorekeeper.evaluation.words import moved_tokens

    reference = settings.drift_reference
    assert reference is not None, "monitored only against a drift_reference"
    reference_name = posixpath.basename(reference.path.rstrip("/"))
    con, labels, slice_columns = ev.con, ev.labels, ev.slice_columns
    ref_side = d.open_reference(con, reference, slice_columns)
    current = d.current_side(con, labels, slice_columns)
    if representation is None:
        representation = compare_runs(reference, ev.run, settings.scored_with)
    drift = d.drift(
        con, kind, ref_side, current, slice_columns, reference_name, settings.drift_min_psi, representation, settings.drift_min_auc
    )
    moved = moved_tokens(con, reference, ev.run)
    if isinstance(moved, str):
        drift.skipped["moved_tokens"] = moved
        drift.moved_tokens = None
    else:
        drift.moved_tokens = moved
    recorded = d.recorded_reference(reference)
    return drift, estimate(con, kind, labels, recorded, reference_name, drift.rows.current, drift)

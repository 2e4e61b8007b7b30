"""Evaluation of multi-label and regression heads: the DuckDB tables their metrics are computed from.

evaluate.evaluate hands a run whose head is not single_label to `evaluate_head`, which joins the
predictions to the ground truth exactly as the single-label evaluation does (on row_index, or on
the id for ground-truth files), builds one row per scored row beside its truth, and hands it to
the metric functions of tasks/heads_metrics.py:

* multi_label: `ml_rows` (row_index, id, probabilities, truth as one boolean per label or null
  without ground truth, text), and the unknown label names counted apart;
* regression: `reg_rows` (row_index, id, prediction, truth or null, text).

The coverage fields (rows, scored, evaluated, missing and unmatched predictions) and unknown labels
mean what they mean for single-label runs (docs/contracts.md, section 3).
"""

from __future__ import annotations

from datetime import UTC, datetime

from scorekeeper.head_kind import HeadKind
from scorekeeper.heads import threshold_vector
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.staging.truth import ColumnKind, TruthRule
from scorekeeper.storage import Location


def _multi_label(con, labels: list[str], thresholds, kind: ColumnKind | None, truth_column: str) -> dict:
    """The multi-label metrics; the list elements are matched to the labels by the column's one
    rule (tasks/truth.py, as a single-label column is), recorded as `truth_matching`."""
    from scorekeeper.tasks import heads_metrics
    from scorekeeper.tasks.duck import sql
    from scorekeeper.tasks.truth import match_truth

    matching = match_truth(con, kind, labels, truth_column, truth="truth_elements") if kind else None
    con.execute(sql("multi_label_evaluated.sql", rule=repr((matching.rule if matching else TruthRule.ID).value)))
    unknown = {str(name): int(n) for name, n in con.execute(sql("multi_label_unknown.sql")).fetchall()}
    return {
        "truth_matching": matching,
        "unknown_labels": unknown,
        "unknown_label_rows": sum(unknown.values()),
    } | heads_metrics.multilabel_metrics(con, labels, threshold_vector(thresholds, labels))


def _regression(con, labels: list[str], truth_column: str) -> dict:
    from scorekeeper.tasks import heads_metrics
    from scorekeeper.tasks.duck import sql
    from scorekeeper.tasks.truth import check_regression_truth

    check_regression_truth(con, labels, truth_column)  # checked before scoring too; a resumed run's truth again
    con.execute(sql("regression_evaluated.sql"))
    return heads_metrics.regression_metrics(con, labels)


def evaluate_head(
    run: RunFolder,
    labels: list[str],
    manifest: StagedManifest,
    head: str,
    thresholds,
    slice_columns: list[str],
    baseline: Location | None = None,
    truth_column: str = "label",
) -> MetricsDocument:
    """metrics.json's content for a multi_label or regression run (docs/contracts.md, section 7), the
    history and gates not yet filled in; `slice_columns` as for a single-label run (tasks/heads_slices.py);
    `truth_column` is the user's name of the ground-truth column (for messages)."""
    from scorekeeper.tasks.evaluate import open_evaluation

    con = open_evaluation(run, labels)
    try:
        return _evaluate(con, run, labels, manifest, head, thresholds, slice_columns, baseline, truth_column)
    finally:
        con.close()


def _evaluate(
    con,
    run: RunFolder,
    labels: list[str],
    manifest: StagedManifest,
    head: str,
    thresholds,
    slice_columns: list[str],
    baseline: Location | None,
    truth_column: str,
) -> MetricsDocument:
    from scorekeeper.tasks.duck import sql
    from scorekeeper.tasks.heads_slices import head_slices
    from scorekeeper.tasks.truth import head_truth_table

    source, kind = head_truth_table(con, run, manifest, head)
    missing, unmatched, scored = con.execute(sql("coverage.sql")).fetchone()
    truth_rows = con.execute("SELECT count(*) FROM truth").fetchone()[0]
    result = {
        "head": head,
        "rows": manifest.total_rows,
        "scored": int(scored),
        "ground_truth_source": source,
        "scoring_only": source is None,
        "labels": labels,
        "ground_truth_rows": int(truth_rows),
        "missing_predictions": int(missing),
        "unmatched_predictions": int(unmatched),
        "null_text_rows": manifest.null_text_rows,
    }
    if head == HeadKind.MULTI_LABEL:
        result |= _multi_label(con, labels, thresholds, kind, truth_column)  # each label's threshold is in per_label
    else:
        result |= _regression(con, labels, truth_column)
    slices, truncated = head_slices(con, head, slice_columns) if result["evaluated"] else ({}, {})
    result |= {"slices": slices, "slices_truncated": truncated}
    document = MetricsDocument.model_validate(result | {"finished_at": datetime.now(UTC).isoformat(timespec="seconds")})
    if baseline is not None and document.evaluated:
        from scorekeeper.tasks.heads_compare import compare_head

        document.comparison = compare_head(con, run, baseline, document, head)
    return document

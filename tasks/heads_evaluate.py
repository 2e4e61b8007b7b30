"""Evaluation of multi-label and regression heads: the DuckDB tables their metrics are computed from.

evaluate.evaluate hands a run whose head is not single_label to `evaluate_head`, which joins the
predictions to the ground truth exactly as the single-label evaluation does (on row_index, or on
the id for ground-truth files), builds one table of (row, label) or (row, output) cells, and hands
it to the metric functions of tasks/heads_metrics.py:

* multi_label: `ml_evaluated` (row_index, id, predicted_labels, probabilities: one row per
  evaluated row) and `ml_cells` (row_index, label_id, label_name, y, p, predicted);
* regression: `reg_evaluated` (row_index, id, truth, prediction) and `reg_cells` (row_index,
  output_id, output, y, yhat), rows without ground truth for an output left out.

The coverage fields (rows, scored, evaluated, missing and unmatched predictions) and unknown labels
mean what they mean for single-label runs (docs/contracts.md, section 3).
"""

from __future__ import annotations

from datetime import UTC, datetime

from scorekeeper.errors import InputError
from scorekeeper.heads import threshold_vector
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location


def _truth(con, run: RunFolder, manifest: StagedManifest, head: str) -> str | None:
    """The `truth` table (row_index, id, value in its staged type); returns where it came from."""
    from scorekeeper.tasks.evaluate import _uri, sql

    ground_truth = manifest.ground_truth
    if ground_truth:
        con.read_parquet(_uri(run, RunFolder.STAGED_GROUND_TRUTH)).create_view("ground_truth")
        id_cast = "" if ground_truth.id_type == manifest.id_type else "::VARCHAR"
        con.execute(sql("heads_truth_from_files.sql", id_cast=id_cast))
        return "ground_truth_uri"
    if manifest.has_label:
        con.execute(sql("heads_truth_from_input.sql"))
        return "label_column"
    value_type = "VARCHAR[]" if head == "multi_label" else "DOUBLE"
    con.execute(f"CREATE TEMP TABLE truth (row_index BIGINT, id VARCHAR, value {value_type})")
    return None


def _multi_label(con, labels: list[str], thresholds) -> dict:
    from scorekeeper.tasks import heads_metrics
    from scorekeeper.tasks.evaluate import sql

    con.execute(sql("multi_label_evaluated.sql"))
    evaluated = con.execute("SELECT count(*) FROM ml_evaluated").fetchone()[0]
    unknown = {str(name): int(n) for name, n in con.execute(sql("multi_label_unknown.sql")).fetchall()}
    result = {"evaluated": int(evaluated), "unknown_labels": unknown, "unknown_label_rows": sum(unknown.values())}
    if evaluated:
        result |= heads_metrics.multilabel_metrics(con, labels, threshold_vector(thresholds, labels))
    return result


def _regression(con, labels: list[str]) -> dict:
    from scorekeeper.tasks import heads_metrics
    from scorekeeper.tasks.evaluate import sql

    several = len(labels) > 1
    if several:
        wrong = con.execute(
            "SELECT row_index, len(value) FROM truth WHERE row_index IS NOT NULL AND len(value) <> ? ORDER BY row_index LIMIT 5",
            [len(labels)],
        ).fetchall()
        if wrong:
            shown = ", ".join(f"{i} ({n} values)" for i, n in wrong)
            raise InputError(
                f"the regression head has {len(labels)} outputs ({', '.join(labels)}) but the ground truth at row_index {shown} does not"
            )
    at = {"truth_at": "e.truth[l.label_id + 1]", "prediction_at": "e.prediction[l.label_id + 1]"} if several else {}
    con.execute(sql("regression_evaluated.sql", **(at or {"truth_at": "e.truth", "prediction_at": "e.prediction"})))
    evaluated = con.execute("SELECT count(*) FROM reg_evaluated").fetchone()[0]
    result = {"evaluated": int(evaluated)}
    if evaluated:
        result |= heads_metrics.regression_metrics(con, labels)
    return result


def evaluate_head(
    con, run: RunFolder, labels: list[str], manifest: StagedManifest, head: str, thresholds, baseline: Location | None = None
) -> dict:
    """metrics.json's content for a multi_label or regression run (docs/contracts.md, section 7), on a
    connection that holds the `predictions`, `staged` and `labels` views."""
    from scorekeeper.tasks.evaluate import sql

    source = _truth(con, run, manifest, head)
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
    if head == "multi_label":
        result |= _multi_label(con, labels, thresholds)
        result["thresholds"] = dict(zip(labels, threshold_vector(thresholds, labels)))
    else:
        result |= _regression(con, labels)
    if baseline is not None and result["evaluated"]:
        from scorekeeper.tasks.heads_compare import compare_head

        result["comparison"] = compare_head(con, run, baseline, result, head)
    return result | {"finished_at": datetime.now(UTC).isoformat(timespec="seconds")}

"""Evaluation in DuckDB: join predictions to the ground truth and compute the report's metrics.

The SQL lives in tasks/sql/*.sql. DuckDB reads the run's files through the same fsspec filesystem
the flow uses (register_filesystem), so object storage needs no httpfs extension. Only canonical
column names (staged by the read step) ever appear in SQL; user-supplied names never do.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
from prefect import task

from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location, is_local
from scorekeeper.tasks import duck
from scorekeeper.tasks.retries import IO_RETRIES

ECE_BINS = 15
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)  # scikit-learn clips probabilities by the dtype's eps


def sql(name: str, **macros: str) -> str:
    text = resources.files("scorekeeper.tasks").joinpath("sql", name).read_text()
    return text.format(**macros) if macros else text


def _connect(run: Location):
    return duck.connect(None if is_local(run.fs) else run.fs)


def _uri(run: Location, rel: str) -> str:
    return run.uri + "/" + rel if not is_local(run.fs) else run.join(rel)


def evaluate(run: RunFolder, labels: list[str], manifest: StagedManifest, slice_columns: list[str]) -> dict:
    """metrics.json's content (SPEC section 3)."""
    con = _connect(run)
    try:
        con.read_parquet(_uri(run, RunFolder.PREDICTIONS)).create_view("predictions")
        con.read_parquet(_uri(run, RunFolder.STAGED_INPUT)).create_view("staged")
        con.execute("CREATE TEMP TABLE labels (label_id BIGINT, label_name VARCHAR)")
        con.executemany("INSERT INTO labels VALUES (?, ?)", list(enumerate(labels)))
        ground_truth = manifest.ground_truth
        if ground_truth:
            con.read_parquet(_uri(run, RunFolder.STAGED_GROUND_TRUTH)).create_view("ground_truth")
            id_cast = "" if ground_truth.id_type == manifest.id_type else "::VARCHAR"
            con.execute(sql("truth_from_files.sql", id_cast=id_cast))
            source = "ground_truth_uri"
        elif manifest.has_label:
            con.execute(sql("truth_from_input.sql"))
            source = "label_column"
        else:
            con.execute("CREATE TEMP TABLE truth (row_index BIGINT, id VARCHAR, raw_label VARCHAR)")
            source = None
        con.execute(sql("evaluated.sql"))
        missing, unmatched, scored = con.execute(sql("coverage.sql")).fetchone()
        evaluated, accuracy, macro_f1, weighted_f1, log_loss, log_loss_rows = con.execute(
            sql("metrics.sql"), {"eps": LOG_LOSS_EPS}
        ).fetchone()
        per_class = {
            name: {"precision": p, "recall": r, "f1": f1, "support": int(s)}
            for name, p, r, f1, s in con.execute(sql("per_class.sql")).fetchall()
        }
        confusion: dict[str, dict[str, int]] = {}
        for true_name, pred_name, n in con.execute(sql("confusion.sql")).fetchall():
            confusion.setdefault(true_name, {})[pred_name] = int(n)
        bins = con.execute(sql("calibration.sql"), {"bins": ECE_BINS}).fetchall()
        ece = sum(n * abs(acc - conf) for _, n, conf, acc in bins) / evaluated if evaluated else None
        unknown = {name: int(n) for name, n in con.execute(sql("unknown_labels.sql")).fetchall()}
        slices = {}
        if evaluated:
            for i, column in enumerate(slice_columns):
                rows = con.execute(sql("slice.sql", column=f"slice_{i}")).fetchall()
                slices[column] = {str(v): {"rows": int(n), "accuracy": a} for v, n, a in rows}
    finally:
        con.close()
    return {
        "rows": manifest.total_rows,
        "scored": int(scored),
        "evaluated": int(evaluated),
        "ground_truth_source": source,
        "scoring_only": source is None,
        "accuracy": _number(accuracy),
        "macro_f1": _number(macro_f1),
        "weighted_f1": _number(weighted_f1),
        "log_loss": _number(log_loss),
        "log_loss_rows": int(log_loss_rows),
        "ece": _number(ece),
        "ece_bins": ECE_BINS,
        "calibration": [
            {"bin": int(b), "lower": b / ECE_BINS, "upper": (b + 1) / ECE_BINS, "rows": int(n), "confidence": conf, "accuracy": acc}
            for b, n, conf, acc in bins
        ],
        "per_class": per_class,
        "confusion": confusion,
        "labels": labels,
        "missing_predictions": int(missing),
        "unmatched_predictions": int(unmatched),
        "unknown_labels": unknown,
        "null_text_rows": manifest.null_text_rows,
        "slices": slices,
    }


def _number(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


@task(name="evaluate", **IO_RETRIES)
def evaluate_task(request, context, manifest: StagedManifest) -> dict:
    """Join the predictions to the ground truth and compute the metrics in DuckDB."""
    return evaluate(context.run, context.labels, manifest, request.slice_columns)

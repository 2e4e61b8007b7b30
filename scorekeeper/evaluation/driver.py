"""The one driver of an evaluation: every kind of head through the same steps, in one order.

    open the run's files (predictions, staged) and the labels table
    -> the kind's truth table -> coverage (coverage.sql: missing and unmatched predictions)
    -> the kind's metrics (its evaluated rows) -> its slices -> the document
    -> the comparison with the baseline run, when one is named and rows were evaluated
    -> drift and the estimated performance against the drift reference, when one is named (drift.py,
       estimate.py); a run with evaluated rows also records what a later run's estimate needs of it

The history and the gates are the evaluate step's (tasks/evaluation.py), after this. The coverage
fields (rows, scored, evaluated, missing and unmatched predictions) and unknown labels mean the same
for every kind (docs/contracts.md, section 3).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from scorekeeper.evaluation.base import Coverage, Evaluation, HeadEvaluation, Logger
from scorekeeper.evaluation.duck import connect_run, parquet_view, sql
from scorekeeper.evaluation.estimate import monitor
from scorekeeper.evaluation.kinds import evaluation_for
from scorekeeper.evaluation.labelling import label_run
from scorekeeper.evaluation.length_impact import length_impact
from scorekeeper.evaluation.representation import compare_runs
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.evaluation.truth import label_table
from scorekeeper.head_kind import DEFAULT_HEAD, HeadKind
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.metrics.truth_matching import ColumnKind, TruthMatching
from scorekeeper.run_folder import RunFolder, StagedManifest

# The views and tables the driver makes before any SQL file runs (tests/test_sql_files.py).
INPUTS = ("predictions", "staged", "labels", "ground_truth")


def open_evaluation(run: RunFolder, labels: list[str]):
    """A connection holding the run's `predictions` and `staged` views and the `labels` table."""
    con = connect_run(run)
    try:
        parquet_view(con, "predictions", run, RunFolder.PREDICTIONS)
        parquet_view(con, "staged", run, RunFolder.STAGED_INPUT)
        label_table(con, "labels", labels)
    except BaseException:
        con.close()
        raise
    return con


def evaluate_run(
    run: RunFolder,
    labels: list[str],
    manifest: StagedManifest,
    settings: EvaluationSettings | None = None,
    log: Logger | None = None,
) -> MetricsDocument:
    """metrics.json's content for a run whose model's labels are `labels`, as `settings` ask (the
    head's kind, slices, thresholds, the baseline to compare with, the window, the drift reference,
    the labelling plan: settings.py; None: a plain evaluation), the history and gates not yet filled
    in; `log` the run's logger (the module's by default)."""
    s = settings or EvaluationSettings()
    kind = evaluation_for(s.head)
    # SPEC 14's signal before the connection fills: its fit matrix (about 120 MB at 20,000 + 20,000
    # rows of width 768) is freed before DuckDB's buffers grow (bench/representation.py memory)
    representation = compare_runs(s.drift_reference, run, s.scored_with) if s.drift_reference is not None else None
    con = open_evaluation(run, labels)
    try:
        ev = Evaluation(con, run, labels, manifest, s.slice_columns, s.thresholds, s.truth_column, log or logging.getLogger(__name__))
        source, column = kind.truth_table(ev)
        missing, unmatched, scored = con.execute(sql("coverage.sql")).fetchone()
        truth_rows = con.execute("SELECT count(*) FROM truth").fetchone()[0]
        coverage = Coverage(source, column, int(truth_rows), int(missing), int(unmatched), int(scored))
        metrics = kind.metrics(ev, coverage)
        fields = metrics.fields()
        if metrics.evaluated:
            fields |= kind.reference_records(ev).fields()
        slices, truncated = kind.slices(ev) if metrics.evaluated else ({}, {})
        if s.max_length is not None and metrics.evaluated:
            impact = length_impact(ev, kind, s.max_length)
            if impact is not None:  # only when evaluated rows are over the window
                fields = fields | {"length_impact": impact}
        document = _document(kind, labels, manifest, coverage, fields | {"slices": slices, "slices_truncated": truncated})
        if s.baseline is not None and document.evaluated:
            document.comparison = kind.comparison(ev, s.baseline, document)
        if s.label_columns and document.truth_matching is not None:  # staged as names, given as one 0/1 column per label
            document.truth_matching = document.truth_matching.model_copy(update={"column_type": ColumnKind.LABEL_COLUMNS})
        if s.drift_reference is not None:
            document.drift, document.estimated = monitor(ev, kind, s, representation)
        if s.labelling is not None:
            from_files = source == "ground_truth_uri"
            document.label_plan, prediction_powered = label_run(ev, kind, s.labelling, coverage.scored, from_files)
            if prediction_powered is not None:
                document.prediction_powered = prediction_powered
    finally:
        con.close()
    return document


def _document(
    kind: HeadEvaluation, labels: list[str], manifest: StagedManifest, coverage: Coverage, fields: dict[str, Any]
) -> MetricsDocument:
    """metrics.json's content from the run's coverage and the kind's `fields`, finished now."""
    return MetricsDocument.model_validate(
        {
            "head": kind.kind,
            "rows": manifest.total_rows,
            "scored": coverage.scored,
            "ground_truth_source": coverage.source,
            "scoring_only": coverage.source is None,
            "labels": labels,
            "ground_truth_rows": coverage.truth_rows,
            "missing_predictions": coverage.missing,
            "unmatched_predictions": coverage.unmatched,
            "null_text_rows": manifest.null_text_rows,
        }
        | fields
        | {"finished_at": datetime.now(UTC).isoformat(timespec="seconds")}
    )


def check_truth(
    run: RunFolder, labels: list[str], manifest: StagedManifest, column: str, head: HeadKind = DEFAULT_HEAD
) -> TruthMatching | None:
    """Decide the ground truth's rule as soon as it is staged, before anything is scored (the read
    step): a column that would resolve differently by name and by id is refused up front, not after
    the scoring; what else the head's kind checks of its truth (a regression truth's shape) too."""
    if not (manifest.has_label or manifest.ground_truth):
        return None
    kind = evaluation_for(head)
    con = connect_run(run)
    try:
        parquet_view(con, "staged", run, RunFolder.STAGED_INPUT)
        label_table(con, "labels", labels)
        ev = Evaluation(con, run, labels, manifest, [], 0.5, column, logging.getLogger(__name__))
        _, column_kind = kind.truth_table(ev)
        return kind.check_truth(ev, column_kind)
    finally:
        con.close()

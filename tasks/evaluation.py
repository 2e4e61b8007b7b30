"""The evaluate step: the run's evaluation (scorekeeper/evaluation/driver.py), then the run history
and the gates."""

from __future__ import annotations

from prefect import task

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.history import history_and_left_out
from scorekeeper.evaluation.labelling import label_request
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.gates import evaluate_gates
from scorekeeper.long_text import LongTextCounts
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location
from scorekeeper.tasks.memory import release_memory
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES
from scorekeeper.tasks.runlog import run_logger


@task(name="evaluate", **IO_RETRIES)
@raises_redacted
def evaluate_task(
    request: ScoreRequest,
    context: RunContext,
    manifest: StagedManifest,
    baseline: str | None = None,
    drift_reference: str | None = None,
    long_text: LongTextCounts | None = None,
    dtype: str | None = None,
) -> MetricsDocument:
    """Join the predictions to the ground truth and compute the metrics in DuckDB; compare with the
    `baseline` run, measure drift and estimate performance against the `drift_reference` run, add the
    run history and the quality gates' verdicts (enforced after the report). `long_text` (the
    gather's scoring.long_text) gives the window length_impact splits the rows at; with `dtype` (the
    compute dtype used) it says how the run's embeddings were made (docs/drift.md)."""
    output = Location.from_uri(request.output_uri)
    labelling = label_request(request, context.run_id, context.run, drift_reference)
    settings = EvaluationSettings.of(request, context.head, baseline, drift_reference, labelling, long_text, dtype)
    metrics = evaluate_run(context.run, context.labels, manifest, settings, log=run_logger("scorekeeper.evaluation"))
    metrics.history, left_out = history_and_left_out(output, context.run_id, metrics, context.run.read_json(RunFolder.PLAN))
    if left_out:
        metrics.history_left_out = left_out
    if request.gates:
        metrics.gates = evaluate_gates(request.gates, metrics)
    release_memory(manifest.total_rows)  # the DuckDB connection's pages, before the report is rendered
    return metrics

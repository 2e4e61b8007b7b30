"""The evaluate step: each kind of head to its evaluation, then the run history and the gates.

Single-label runs are evaluated by tasks/evaluate.py, multi-label and regression runs by
tasks/heads_evaluate.py (over tasks/heads_metrics.py); this module is the one place that chooses,
so neither evaluation imports the other.
"""

from __future__ import annotations

from prefect import task

from scorekeeper.gates import evaluate_gates
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import Location
from scorekeeper.tasks.evaluate import evaluate
from scorekeeper.tasks.heads_evaluate import evaluate_head
from scorekeeper.tasks.history import run_history
from scorekeeper.tasks.memory import release_memory
from scorekeeper.tasks.retries import IO_RETRIES


def evaluate_run(
    run: RunFolder,
    labels: list[str],
    manifest: StagedManifest,
    slice_columns: list[str],
    baseline: Location | None = None,
    head: str = HeadKind.SINGLE_LABEL,
    thresholds: float | dict = 0.5,
    truth_column: str = "label",
) -> MetricsDocument:
    """metrics.json's content for a run whose head is `head` (scorekeeper.heads); `truth_column`
    is the user's name of the ground-truth column (for messages)."""
    if head == HeadKind.SINGLE_LABEL:
        return evaluate(run, labels, manifest, slice_columns, baseline, truth_column=truth_column)
    return evaluate_head(run, labels, manifest, head, thresholds, slice_columns, baseline, truth_column=truth_column)


@task(name="evaluate", **IO_RETRIES)
@raises_redacted
def evaluate_task(request, context, manifest: StagedManifest, baseline: str | None = None) -> MetricsDocument:
    """Join the predictions to the ground truth and compute the metrics in DuckDB; compare with the
    `baseline` run, add the run history and the quality gates' verdicts (enforced after the report)."""
    output = Location.from_uri(request.output_uri)
    baseline_run = output.child(baseline) if baseline else None
    metrics = evaluate_run(
        context.run,
        context.labels,
        manifest,
        request.slice_columns,
        baseline_run,
        context.head,
        request.thresholds,
        truth_column=request.label_column or "label",
    )
    metrics.history = run_history(output, context.run_id, metrics, context.run.read_json(RunFolder.PLAN))
    if request.gates:
        metrics.gates = evaluate_gates(request.gates, metrics)
    release_memory(manifest.total_rows)  # the DuckDB connection's pages, before the report is rendered
    return metrics

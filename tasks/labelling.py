"""The labelling plan's checks before anything is scored (docs/labelling.md): a run that drew a plan
keeps it (its budget, its sampling, the reference its label-free predictions came from). The checks,
the plan itself and the estimates are scorekeeper/evaluation/labelling.py's (the CLI runs the same
check before it starts anything, scorekeeper/precheck.py)."""

from __future__ import annotations

from prefect import task

from scorekeeper.errors import InputError
from scorekeeper.evaluation.labelling import check_label_plan
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import StagedManifest
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES


@task(name="check labelling plan", **IO_RETRIES)
@raises_redacted
def check_label_plan_task(request: ScoreRequest, context: RunContext) -> None:
    """Refuse, before anything is scored, a rerun that would change the run's labelling plan."""
    check_label_plan(request, context.run_id, context.run)


def refuse_empty_plan(request: ScoreRequest, manifest: StagedManifest, run_id: str) -> None:
    """A plan needs scored rows: an input without rows is refused before anything is scored."""
    if request.label_budget and manifest.total_rows == 0:
        raise InputError(
            f"label_budget {request.label_budget}: the input of run {run_id} has no rows, so there is nothing to draw a labelling plan from"
        )

"""The report step: publish report.md, report.html and metrics.json (scorekeeper/report/report.py)
and the Prefect artifacts (tasks/artifacts.py)."""

from __future__ import annotations

from prefect import task

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.report.report import publish_report
from scorekeeper.run_facts import RunFacts
from scorekeeper.run_folder import RunFolder
from scorekeeper.scoring_summary import ScoringSummary
from scorekeeper.tasks import artifacts
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES


@task(name="publish report", **IO_RETRIES)
@raises_redacted
def report_task(request: ScoreRequest, context: RunContext, metrics: MetricsDocument, scoring: ScoringSummary) -> dict:
    """Write metrics.json, report.md and report.html, and publish them as Prefect artifacts."""
    plan = context.run.read_plan() if context.run.exists(RunFolder.PLAN) else None
    facts = RunFacts.of(
        request.public_dict()
        | {
            "run_id": context.run_id,
            "num_processes": scoring.processes or request.num_processes,
            "model_fingerprint": context.model_fingerprint,
            "adapter_fingerprint": context.adapter_fingerprint,
            "input_fingerprint": plan.input_fingerprint if plan else None,
            "deployment": _deployment(),  # the labelling plan's `prefect deployment run` command names it
        }
    )
    metrics = metrics.model_copy(update={"scoring": scoring})
    files = publish_report(context.run, metrics, facts)
    artifacts.publish_report_artifacts(context, metrics.finite(), files, facts)
    return files


def _deployment() -> str | None:
    """'flow name/deployment name' of the deployment this flow run came from, if any."""
    from prefect.runtime import deployment, flow_run

    name = deployment.name
    return f"{flow_run.flow_name}/{name}" if name else None

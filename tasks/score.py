"""The scoring step: hand the job to the scoring processes and follow them to the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from scorekeeper import progress_bar
from scorekeeper.boundary import Job
from scorekeeper.launch import Progress, ScoringProcesses, offered, visible_gpus
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder
from scorekeeper.scoring_summary import ScoringSummary
from scorekeeper.storage import child_environment
from scorekeeper.tasks import artifacts
from scorekeeper.tasks.open_run import RunContext


@task(name="score ranges", cache_policy=NO_CACHE)
@raises_redacted
def score_ranges_task(context: RunContext, job: Job, processes: ScoringProcesses) -> ScoringSummary:
    """Score every uncommitted range of the plan with `processes`; each range commits once, whoever scores it."""
    return score_job(job, context.run.uri_of(RunFolder.JOB), f"run {context.run_id}", processes)


def score_job(job: Job, job_uri: str, what: str, processes: ScoringProcesses | None = None) -> ScoringSummary:
    """Hand the job file at `job_uri` to `processes` (started ahead by whoever owns them) and follow
    them to the end; without any, launch this job's own (as its `launch` settings say, on this
    machine) and stop them on the way out."""
    if processes is None:
        # A storage block's credentials reach the scoring processes as their environment; they are
        # looked up here rather than passed in, so they never become a task parameter.
        launch = job.launch
        with ScoringProcesses(launch.resolved_num_processes(visible_gpus()), launch.collective_timeout_s, child_environment()) as own:
            return score_job(job, job_uri, what, own)
    logger = get_run_logger()
    progress = Progress(total_rows=sum(r.rows for r in job.ranges))
    if not job.ranges:
        logger.info("every range is committed already; nothing to score")
        return progress.summary(processes=0)
    logger.info(
        "scoring %d rows in %d ranges with %d process(es), %s mode",
        progress.total_rows,
        len(job.ranges),
        processes.num_processes,
        job.scoring.mode,
    )
    tracker = artifacts.ProgressTracker(f"Scoring {progress.total_rows} rows of {what}")
    last_log = [0.0]

    def on_progress(p: Progress) -> None:
        tracker.update(100.0 * p.rows_done / max(p.total_rows, 1))
        progress_bar.report(p.rows_done, p.total_rows, p.tokens, p.elapsed)  # the CLI's bar, if one is shown
        if time.time() - last_log[0] >= 2.0 or p.rows_done == p.total_rows:
            last_log[0] = time.time()
            logger.info(p.line(), extra={progress_bar.PROGRESS_RECORD: True})

    processes.hand_over(job_uri)  # started ahead: their imports are done (else launched with the job now)
    processes.follow(progress, on_progress)
    return progress.summary(processes=processes.num_processes)


@contextmanager
def scoring_processes(request: ScoreRequest) -> Iterator[ScoringProcesses | None]:
    """The processes this flow run scores with, started now so that their imports overlap reading
    and planning: those the CLI offered when they fit, else the flow's own, which it stops on the
    way out (those no job was handed to, after a refused input or with nothing left to score).
    None when the run is fanned out: the groups score on their own machines.

    A storage block's credentials reach the processes as their environment; they are looked up
    here (inside the flow's credentials scope) rather than passed in, so they never become a
    parameter."""
    if request.fan_out > 1:
        yield None
        return
    num_processes = request.resolved_num_processes(visible_gpus())
    env = child_environment()
    ready = offered(num_processes, request.collective_timeout_s, env)
    if ready is not None:
        yield ready  # the CLI started them and stops them
        return
    with ScoringProcesses(num_processes, request.collective_timeout_s, env).start() as own:
        yield own

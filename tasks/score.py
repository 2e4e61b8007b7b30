"""The scoring step: hand the job to the scoring processes and follow them to the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from scorekeeper import progress_bar
from scorekeeper.params import ScoreRequest
from scorekeeper.processes import Progress, WorkerProcess, launch_command, start_ahead, stop_ahead, take_ahead, visible_gpus
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import child_environment
from scorekeeper.tasks import artifacts
from scorekeeper.tasks.prepare import RunContext
from scorekeeper.worker.job import Job


@task(name="score ranges", cache_policy=NO_CACHE)
def score_ranges_task(request: ScoreRequest, context: RunContext, job: Job) -> dict:
    """Score every uncommitted range of the plan; each range commits once, whoever scores it."""
    return score_job(request, job, context.run.uri_of(RunFolder.JOB), f"run {context.run_id}")


def score_job(request: ScoreRequest, job: Job, job_uri: str, what: str) -> dict:
    """Launch (or take) the scoring processes for the job file at `job_uri` and follow them to the end."""
    logger = get_run_logger()
    processes = request.resolved_num_processes(visible_gpus())
    progress = Progress(total_rows=sum(r.rows for r in job.ranges))
    if not job.ranges:
        logger.info("every range is committed already; nothing to score")
        return progress.summary() | {"processes": 0}
    logger.info("scoring %d rows in %d ranges with %d process(es), %s mode", progress.total_rows, len(job.ranges), processes, request.mode)
    tracker = artifacts.ProgressTracker(f"Scoring {progress.total_rows} rows of {what}")
    last_log = [0.0]

    def on_progress(p: Progress) -> None:
        tracker.update(100.0 * p.rows_done / max(p.total_rows, 1))
        progress_bar.report(p.rows_done, p.total_rows, p.tokens, p.elapsed)  # the CLI's bar, if one is shown
        if time.time() - last_log[0] >= 2.0 or p.rows_done == p.total_rows:
            last_log[0] = time.time()
            logger.info(p.line(), extra={progress_bar.PROGRESS_RECORD: True})

    # A storage block's credentials reach the scoring processes as their environment; they are
    # looked up here rather than passed in, so they never become a task parameter.
    env = child_environment()
    worker = take_ahead(processes, request.collective_timeout_s, env)
    if worker is not None:
        worker.submit(job_uri)  # started while the input was read: its imports are done
    else:
        worker = WorkerProcess(launch_command(processes, job_uri, request.collective_timeout_s), env, num_processes=processes)
    worker.follow(progress, on_progress, stall_timeout_s=request.collective_timeout_s)
    return progress.summary() | {"processes": processes}


@contextmanager
def workers_started_ahead(request: ScoreRequest) -> Iterator[None]:
    """Start the scoring processes now, so their imports overlap reading and planning; the score
    task takes them. Those no task took (a refused input, nothing left to score) are killed."""
    if request.fan_out > 1:
        yield  # the groups score on their own machines: nothing to start here
        return
    worker = start_ahead(request.resolved_num_processes(visible_gpus()), request.collective_timeout_s, child_environment())
    try:
        yield
    finally:
        stop_ahead(worker)

"""The Prefect flow: the order of the steps and nothing else.

Its parameters are ScoreRequest's fields, one for one (the signature is built from the model, so
defaults live in params.py alone and the Prefect UI renders the model as the run form).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from pydantic import Field

from scorekeeper.errors import ScorekeeperError
from scorekeeper.params import ScoreRequest
from scorekeeper.storage import Location, child_environment
from scorekeeper.tasks import artifacts
from scorekeeper.tasks.credentials import storage_credentials
from scorekeeper.tasks.evaluate import evaluate
from scorekeeper.tasks.gather import gather_predictions
from scorekeeper.tasks.plan import plan_run
from scorekeeper.tasks.lease import run_lease
from scorekeeper.tasks.prepare import RunContext, open_run, resolve_run_id, run_location
from scorekeeper.tasks.read import read_inputs
from scorekeeper.tasks.report import publish_report
from scorekeeper.tasks.score import Progress, WorkerProcess, launch_command, start_ahead, stop_ahead, take_ahead, visible_gpus
from scorekeeper.worker.job import JOB_FILE, Job


def retry_io_only(task, task_run, state) -> bool:
    """Retry I/O failures; a problem the user must fix fails at once (STYLE.md 6)."""
    try:
        state.result()
    except ScorekeeperError:
        return False
    except Exception:
        return True
    return False


_io = dict(retries=2, retry_delay_seconds=2, retry_condition_fn=retry_io_only, cache_policy=NO_CACHE)


@task(name="open run", **_io)
def open_run_task(request: ScoreRequest) -> RunContext:
    return open_run(request, flow_run.get_id())


@task(name="read inputs", **_io)
def read_inputs_task(request: ScoreRequest, context: RunContext) -> dict:
    return read_inputs(request, context.run)


@task(name="plan ranges", **_io)
def plan_ranges_task(request: ScoreRequest, context: RunContext, manifest: dict) -> Job:
    return plan_run(request, context, manifest)


@task(name="score ranges", cache_policy=NO_CACHE)
def score_ranges_task(request: ScoreRequest, context: RunContext, job: Job) -> dict:
    logger = get_run_logger()
    processes = request.resolved_num_processes(visible_gpus())
    progress = Progress(total_rows=sum(r.rows for r in job.ranges))
    if not job.ranges:
        logger.info("every range is committed already; nothing to score")
        return progress.summary() | {"processes": 0}
    logger.info("scoring %d rows in %d ranges with %d process(es), %s mode", progress.total_rows, len(job.ranges), processes, request.mode)
    tracker = artifacts.ProgressTracker(f"Scoring {progress.total_rows} rows of run {context.run_id}")
    last_log = [0.0]

    def on_progress(p: Progress) -> None:
        tracker.update(100.0 * p.rows_done / max(p.total_rows, 1))
        if time.time() - last_log[0] >= 2.0 or p.rows_done == p.total_rows:
            last_log[0] = time.time()
            logger.info(p.line())

    # A storage block's credentials reach the scoring processes as their environment; they are
    # looked up here rather than passed in, so they never become a task parameter.
    env = child_environment()
    job_uri = context.run.uri + "/" + JOB_FILE
    worker = take_ahead(processes, request.collective_timeout_s, env)
    if worker is not None:
        worker.submit(job_uri)  # started while the input was read: its imports are done
    else:
        worker = WorkerProcess(launch_command(processes, job_uri, request.collective_timeout_s), env, num_processes=processes)
    worker.follow(progress, on_progress, stall_timeout_s=request.collective_timeout_s)
    return progress.summary() | {"processes": processes}


@task(name="gather predictions", **_io)
def gather_task(context: RunContext, job: Job) -> dict:
    return gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)


@task(name="evaluate", **_io)
def evaluate_task(request: ScoreRequest, context: RunContext, manifest: dict) -> dict:
    return evaluate(context.run, context.labels, manifest, request.slice_columns)


@task(name="publish report", **_io)
def report_task(request: ScoreRequest, context: RunContext, metrics: dict, throughput: dict) -> dict:
    run_info = request.public_dict() | {"run_id": context.run_id, "throughput": throughput, "num_processes": throughput.get("processes") or request.num_processes}
    metrics = metrics | {"scoring": throughput}
    files = publish_report(context.run, metrics, run_info)
    artifacts.publish_report_artifacts(context, metrics, throughput, files)
    return files


@contextmanager
def workers_started_ahead(request: ScoreRequest) -> Iterator[None]:
    """Start the scoring processes now, so their imports overlap reading and planning; the score
    task takes them. Those no task took (a refused input, nothing left to score) are killed."""
    worker = start_ahead(request.resolved_num_processes(visible_gpus()), request.collective_timeout_s, child_environment())
    try:
        yield
    finally:
        stop_ahead(worker)


def score_dataset(**parameters: Any) -> dict:
    request = ScoreRequest(**parameters)
    run_id = resolve_run_id(request, flow_run.get_id())
    with (
        storage_credentials(request.storage_block),
        run_lease(run_location(request, run_id), run_id, owner=str(flow_run.get_id())),
        workers_started_ahead(request),
    ):
        context = open_run_task(request)
        manifest = read_inputs_task(request, context)
        job = plan_ranges_task(request, context, manifest)
        throughput = score_ranges_task(request, context, job)
        gathered = gather_task(context, job)
        metrics = evaluate_task(request, context, manifest)
        files = report_task(request, context, metrics, throughput)
    return {
        "run_id": context.run_id,
        "run_uri": context.run_uri,
        "predictions": Location.from_uri(context.run_uri).uri + "/predictions.parquet",
        "rows": gathered["rows"],
        "metrics": {k: metrics.get(k) for k in ("evaluated", "accuracy", "macro_f1", "log_loss", "ece")},
        "throughput": throughput,
        "report": files.get("report.html"),
    }


def _flow_signature() -> inspect.Signature:
    parameters = []
    for name, field in ScoreRequest.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        annotation = Annotated[field.annotation, Field(description=field.description)]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return inspect.Signature(parameters, return_annotation=dict)


def _flow_docstring() -> str:
    args = "\n".join(f"    {name}: {field.description}" for name, field in ScoreRequest.model_fields.items())
    return "Score a labelled dataset with a text classifier and evaluate it.\n\nArgs:\n" + args


score_dataset.__signature__ = _flow_signature()
score_dataset.__doc__ = _flow_docstring()
score_dataset = flow(name="scorekeeper", log_prints=False)(score_dataset)

"""The Prefect flow: the order of the steps and nothing else.

Its parameters are ScoreRequest's fields, one for one (the signature is built from the model, so
defaults live in params.py alone and the Prefect UI renders the model as the run form).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from prefect import flow
from prefect.runtime import flow_run
from prefect.states import Completed, State
from pydantic import Field

from scorekeeper.errors import Interrupted, storage_error
from scorekeeper.lease import run_lease
from scorekeeper.params import ScoreRequest
from scorekeeper.precheck import precheck, was_prechecked
from scorekeeper.redact import install_log_redaction, redact_uri, redacted_exception
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.compare import resolve_baseline_task
from scorekeeper.tasks.credentials import storage_credentials, with_handed_uris
from scorekeeper.tasks.drift import resolve_drift_reference_task
from scorekeeper.tasks.evaluation import evaluate_task
from scorekeeper.tasks.fan_out import check_fan_out_task, score_groups_task
from scorekeeper.tasks.gates import check_gates_task, gates_failed
from scorekeeper.tasks.gather import gather_task
from scorekeeper.tasks.labelling import check_label_plan_task, refuse_empty_plan
from scorekeeper.tasks.open_run import check_output_uri, open_run_task, resolve_run_id, run_location
from scorekeeper.tasks.plan import commit_progress, plan_run_task
from scorekeeper.tasks.precision import check_precision_task
from scorekeeper.tasks.read import check_input_present_task, read_inputs_task
from scorekeeper.tasks.report import report_task
from scorekeeper.tasks.runlog import run_logger
from scorekeeper.tasks.score import score_ranges_task, scoring_processes


def score_dataset(**parameters: Any) -> dict | State:
    install_log_redaction()
    # The parameters hold no credential (Prefect stores them); the URIs the CLI handed over do.
    template = with_handed_uris(ScoreRequest(**parameters))
    try:
        # Dated templates ({date}, {scheduled:...}) filled once, from as_of or the flow run's scheduled
        # time: a retry of tonight's flow run keeps its scheduled time, so it fills (and resumes) the same.
        request = template.filled(template.fill_moment(flow_run.get_scheduled_start_time()))
        return _score(request, template.dated_templates())
    except Exception as exc:  # its message becomes the flow run's state message: one line, no secret
        failure = storage_error(exc)  # a full disk, a missing bucket: no traceback
        if failure is not None:
            raise failure from None
        clean = redacted_exception(exc)
        if clean is exc:
            raise
        raise clean from None


def _score(request: ScoreRequest, templates: dict[str, str]) -> dict | State:
    run_id = resolve_run_id(request, flow_run.get_id())
    check_output_uri(request.output_uri)
    try:
        with storage_credentials(request.storage_block):
            if templates or request.if_empty == "skip":  # before the lease: a night without data writes nothing
                skipped = check_input_present_task(request, run_id, bool(templates))
                if skipped is not None:
                    return skipped_run(request, skipped)
            with (
                run_lease(run_location(request, run_id), run_id, owner=str(flow_run.get_id())),
                _prechecked(request),
                scoring_processes(request) as processes,
            ):
                if request.fan_out > 1:
                    check_fan_out_task(request)
                context = open_run_task(request, templates)
                baseline = resolve_baseline_task(request, context)
                drift_reference = resolve_drift_reference_task(request, context)
                if request.label_budget or context.resumed:
                    check_label_plan_task(request, context)
                manifest = read_inputs_task(request, context)
                refuse_empty_plan(request, manifest, context.run_id)
                job = plan_run_task(request, context, manifest)
                if processes is None:  # fanned out (fan_out > 1): the groups score on machines of their own
                    scoring = score_groups_task(request, context, job)
                else:
                    scoring = score_ranges_task(context, job, processes)
                gathered = gather_task(context, job)
                if gathered.long_text:  # summed over every committed range: metrics.json scoring.long_text
                    scoring = scoring.model_copy(update={"long_text": gathered.long_text})
                metrics = evaluate_task(
                    request, context, manifest, baseline, drift_reference, long_text=gathered.long_text, dtype=scoring.dtype
                )
                files = report_task(request, context, metrics, scoring)
                failures = [check_gates_task(context, metrics), check_precision_task(request, context, scoring)]
    except KeyboardInterrupt:  # Ctrl-C: the scoring processes are stopped by now (score task, lease)
        raise interrupted(request, run_id) from None
    if any(failures):  # an expected outcome: a Failed flow run with the line as its message, no traceback
        return gates_failed([f for f in failures if f])
    return {
        "run_id": context.run_id,
        "run_uri": redact_uri(context.run_uri),
        "predictions": redact_uri(context.run.uri_of(RunFolder.PREDICTIONS)),
        "rows": gathered.rows,
        "metrics": metrics.summary(),
        "throughput": scoring.as_dict(),  # the flow's result is JSON
        "report": redact_uri(files.get("report.html")),
    }


def skipped_run(request: ScoreRequest, message: str) -> State:
    """A night without data under if_empty skip: the flow run ends Completed, its state message the
    line the CLI prints; its result says what was skipped (nothing was written)."""
    run_logger(__name__).info(message)
    return Completed(message=message, data={"skipped": message, "input_uri": redact_uri(request.input_uri), "as_of": request.as_of})


@contextmanager
def _prechecked(request: ScoreRequest) -> Iterator[None]:
    """The input's schema, ids and encodings checked before the scoring processes start, unless the
    CLI checked them before it started anything (scorekeeper/precheck.py)."""
    if not was_prechecked():
        precheck(request)
    yield


def interrupted(request: ScoreRequest, run_id: str) -> Interrupted:
    """The one line a Ctrl-C ends with: how far the run got and how to resume it."""
    try:
        progress = commit_progress(run_location(request, run_id))
    except OSError:
        progress = None
    done = f"{progress[0]} of {progress[1]} ranges committed" if progress else "no range committed"
    how = "rerun with the same run name to resume" if request.run_name else f"rerun with --run-name {run_id} to resume"
    return Interrupted(f"interrupted; {done}; {how}")


def _flow_signature() -> inspect.Signature:
    parameters = []
    for name, field in ScoreRequest.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        # A type built at run time from the field's: mypy reads `Annotated[...]` as a static type only.
        annotation = Annotated[field.annotation, Field(description=field.description)]  # type: ignore[name-defined]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return inspect.Signature(parameters, return_annotation=dict)


def _flow_docstring() -> str:
    args = "\n".join(f"    {name}: {field.description}" for name, field in ScoreRequest.model_fields.items())
    return "Score a labelled dataset with a text classifier and evaluate it.\n\nArgs:\n" + args


# Prefect reads the flow's parameters from its signature; functions have no declared `__signature__`.
score_dataset.__signature__ = _flow_signature()  # type: ignore[attr-defined]
score_dataset.__doc__ = _flow_docstring()
score_dataset = flow(name="scorekeeper", log_prints=False)(score_dataset)

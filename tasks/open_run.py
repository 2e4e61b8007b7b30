"""Open the run folder: its id, the model it scores with, and whether an earlier attempt can be resumed.

A run with the same name resumes only when nothing that changes predictions differs: the
parameters that declare they affect predictions, the model, the adapter and the input files.
Anything else is refused before a byte of the earlier attempt is touched.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass

from prefect import task
from prefect.runtime import flow_run

from scorekeeper.errors import InputError, RunConflict
from scorekeeper.head_kind import DEFAULT_HEAD, HeadKind
from scorekeeper.heads import check_head_options
from scorekeeper.model_folder import check_long_text, check_model_folder, head_of
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted, redact_uri
from scorekeeper.request_record import RequestRecord, check_resumable, read_request_record
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import digest_of, file_fingerprint, fs_and_path, is_local
from scorekeeper.tasks.retries import IO_RETRIES
from scorekeeper.tasks.runlog import run_logger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    run_id: str
    run_uri: str
    model_path: str
    model_fingerprint: str
    adapter_path: str | None
    adapter_fingerprint: str | None
    labels: list[str]
    resumed: bool
    head: HeadKind = DEFAULT_HEAD  # the kind of head resolved from request.head and the model's config
    templates: dict[str, str] = dataclasses.field(default_factory=dict)  # the dated templates the request was filled from

    @property
    def run(self) -> RunFolder:
        return RunFolder.from_uri(self.run_uri)


def folder_fingerprint(path: str) -> str:
    """A digest over every file's name and content in a model or adapter folder."""
    fs, root = fs_and_path(path)
    entries = []
    for name in sorted(fs.find(root)):
        rel = os.path.relpath(name, root)
        if rel.startswith("."):
            continue
        entries.append((rel, file_fingerprint(fs, name)))
    return digest_of(entries)


def localize_folder(uri: str, what: str) -> str:
    """A local path for a model or adapter folder (object storage is fetched into a cache)."""
    from scorekeeper.tasks.fetch import fetch_to_cache

    fs, path = fs_and_path(uri)
    if is_local(fs):
        return path
    return fetch_to_cache(uri, what)


def resolve_run_id(request: ScoreRequest, flow_run_id: str | None) -> str:
    if request.run_name:
        return request.run_name
    if flow_run_id:
        return str(flow_run_id)
    import uuid

    return uuid.uuid4().hex


def run_location(request: ScoreRequest, run_id: str) -> RunFolder:
    return RunFolder.under(request.output_uri, run_id)


def check_output_uri(uri: str) -> None:
    """Refuse an output_uri that cannot hold a run folder (a file on the way, no write permission),
    before anything is written. Object storage answers only when written to: see run_lease."""
    fs, path = fs_and_path(uri)
    if not is_local(fs):
        return
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if os.path.lexists(probe) and not os.path.isdir(probe):
        what = "is a file" if probe == path else f"cannot be a folder: {probe} is a file"
        raise InputError(f"output_uri {uri} {what}; give a folder to write runs into")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"output_uri {uri} is not writable: no permission to create files in {probe}")


def has_commits(run: RunFolder) -> bool:
    """Whether any range of this run was ever committed (under any settings)."""
    return any(n.endswith(".json") and not n.startswith(".") for n in run.list_names(RunFolder.COMMIT_DIR))


def open_run(request: ScoreRequest, flow_run_id: str | None, templates: dict[str, str] | None = None) -> RunContext:
    """Resolve the run id, the model and adapter; when the run exists, check that its request.json
    allows resuming with these parameters (the plan step writes request.json for a new run).

    An earlier attempt that committed no range (refused by the scoring processes, interrupted
    early) holds nothing to protect: its run name is reused with the new settings."""
    run_id = resolve_run_id(request, flow_run_id)
    run = run_location(request, run_id)
    check_output_uri(request.output_uri)
    model_path = localize_folder(request.model_uri, "model")
    adapter_path = localize_folder(request.adapter_uri, "adapter") if request.adapter_uri else None
    labels = check_model_folder(model_path, max_length=request.max_length, mode=request.mode, adapter_folder=adapter_path)
    head = head_of(model_path, request.head)
    check_head_options(head, labels, request.thresholds, request.label_columns, request.gates)
    check_long_text(model_path, head, request)
    context = RunContext(
        run_id=run_id,
        run_uri=run.uri,
        model_path=model_path,
        model_fingerprint=folder_fingerprint(model_path),
        adapter_path=adapter_path,
        adapter_fingerprint=folder_fingerprint(adapter_path) if adapter_path else None,
        labels=labels,
        resumed=run.exists(RunFolder.REQUEST),
        head=head,
        templates=dict(templates or {}),
    )
    if context.resumed:
        try:
            check_resumable(read_request_record(run), request_record(request, context))
        except RunConflict as conflict:
            if has_commits(run):
                raise
            run_logger(__name__).warning(
                "run %s: its earlier attempt committed nothing, so it starts again with these settings (%s)", run_id, conflict
            )
            return dataclasses.replace(context, resumed=False)
        log.info("resuming run %s at %s", run_id, redact_uri(run.uri))
    return context


def request_record(request: ScoreRequest, context: RunContext) -> RequestRecord:
    """What request.json holds for this run (the plan step publishes it, once the input has been
    read: a refused input leaves no run behind)."""
    return RequestRecord.of(
        request, context.run_id, context.model_fingerprint, context.adapter_fingerprint, head=context.head, templates=context.templates
    )


@task(name="open run", **IO_RETRIES)
@raises_redacted
def open_run_task(request: ScoreRequest, templates: dict[str, str] | None = None) -> RunContext:
    """Open (or resume) the run folder of this flow run (`request` filled from its dated `templates`)."""
    return open_run(request, flow_run.get_id(), templates)

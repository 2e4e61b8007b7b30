"""The `compare_to` step: find the run to compare with before anything is scored (the comparison
itself is scorekeeper/evaluation/compare.py)."""

from __future__ import annotations

import logging

from prefect import task

from scorekeeper.errors import InputError
from scorekeeper.evaluation.history import previous_run, refuse_other_head
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted, redact_uri
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES

log = logging.getLogger(__name__)


def resolve_baseline(request: ScoreRequest, run_id: str, input_template: str | None = None) -> str | None:
    """The run `compare_to` names, checked before anything is scored: it exists, it completed and
    vouches for every file the comparison reads (scorekeeper/run_seal.py), it is not this run, and
    its rows can be matched with this run's (same input, or ids on both sides). `previous` is the
    latest completed run that read the same files or, for a dated input, was filled from the same
    `input_template` (last night's folder)."""
    if request.compare_to is None:
        return None
    from scorekeeper.staging.listing import list_input_files

    output = Location.from_uri(request.output_uri)
    if request.compare_to == run_id:
        raise InputError(f"compare_to names this run ({run_id!r}); name another run under {output.uri}, or 'previous'")
    files = [f.fingerprint for f in list_input_files(request.input_uri, exclude=output.child(run_id))]
    if request.compare_to == "previous":
        template = redact_uri(input_template)

        def same_input(r: dict) -> bool:
            return r["input_files"] == files or (template is not None and r.get("input_template") == template)

        matching = "read the same input as this run" + (f" or was filled from input_uri {template}" if template else "")
        previous = previous_run(output, run_id, "compare_to", same_input, matching)
        name = previous["run_id"]
        log.info("comparing with the previous run on the same input: %s (finished %s)", name, previous["finished_at"])
    else:
        name = request.compare_to
    other = RunFolder(output.fs, output.join(name))
    refuse_unverified(other, f"compare_to {request.compare_to!r}" if request.compare_to == "previous" else "compare_to")
    other_files = [f.get("fingerprint") for f in other.read_json(RunFolder.PLAN).get("files", [])]
    if other_files != files:
        other_id = other.read_json(RunFolder.REQUEST).get("id_column") if other.exists(RunFolder.REQUEST) else None
        if request.id_column is None or other_id is None:
            raise InputError(
                f"compare_to: run {name!r} read other input files, and rows of different inputs can only be matched "
                f"on ids: set id_column here and there (id_column is {request.id_column!r} here, {other_id!r} there)"
            )
    return name


@task(name="check compare_to", **IO_RETRIES)
@raises_redacted
def resolve_baseline_task(request: ScoreRequest, context: RunContext) -> str | None:
    """Find the run to compare with (compare_to) before anything is scored."""
    name = resolve_baseline(request, context.run_id, context.templates.get("input_uri"))
    if name is not None:
        refuse_other_head(Location.from_uri(request.output_uri), name, context.head, "compare_to", "compare runs of one kind")
    return name

"""The `drift_reference` step: find the run to measure drift against before anything is scored (the
measuring itself is scorekeeper/evaluation/drift.py and estimate.py, in the evaluate step)."""

from __future__ import annotations

import logging

from prefect import task

from scorekeeper.errors import InputError
from scorekeeper.evaluation.history import previous_run, refuse_other_head
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES

log = logging.getLogger(__name__)


def resolve_drift_reference(request: ScoreRequest, run_id: str, model_fingerprint: str, adapter_fingerprint: str | None) -> str | None:
    """The run `drift_reference` names, checked before anything is scored: it exists, it completed
    and vouches for every file the drift step reads (scorekeeper/run_seal.py), and it is not this
    run; `previous` is the latest completed run under output_uri scored with the same model and
    adapter (their folders' fingerprints)."""
    name = request.drift_reference
    if name is None:
        return None
    output = Location.from_uri(request.output_uri)
    if name == run_id:
        raise InputError(f"drift_reference names this run ({run_id!r}); name another run under {output.uri}, or 'previous'")
    if name == "previous":
        previous = previous_run(
            output,
            run_id,
            "drift_reference",
            lambda r: r.get("model_fingerprint") == model_fingerprint and r.get("adapter_fingerprint") == adapter_fingerprint,
            "was scored with this run's model and adapter",
        )
        name = previous["run_id"]
        log.info("measuring drift against the previous run of this model: %s (finished %s)", name, previous["finished_at"])
    subject = f"drift_reference {request.drift_reference!r}" if request.drift_reference == "previous" else "drift_reference"
    refuse_unverified(RunFolder(output.fs, output.join(name)), subject)
    return name


@task(name="check drift_reference", **IO_RETRIES)
@raises_redacted
def resolve_drift_reference_task(request: ScoreRequest, context: RunContext) -> str | None:
    """Find the run to measure drift against (drift_reference) before anything is scored; a run of
    another kind of head is refused."""
    name = resolve_drift_reference(request, context.run_id, context.model_fingerprint, context.adapter_fingerprint)
    if name is not None:
        refuse_other_head(
            Location.from_uri(request.output_uri), name, context.head, "drift_reference", "measure drift against a run of the same kind"
        )
    return name

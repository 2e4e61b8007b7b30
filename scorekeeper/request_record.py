"""request.json: the resolved parameters of a run and the fingerprints of its model and adapter.

Written once, when the run's input has been read and planned (a refused input leaves no run
behind), and read back when a run of the same name starts again: this module does both, so what
is written and what a resume checks cannot drift apart. A resume may change only the parameters
that change no prediction (params.RESUMABLE_DIFFERENCES, derived from each field's `affects`).
"""

from __future__ import annotations

from pydantic import ValidationError

from scorekeeper.errors import RunConflict
from scorekeeper.head_kind import AUTO, HeadKind
from scorekeeper.params import SCORING_PARAMETERS, URI_FIELDS, ScoreRequest
from scorekeeper.redact import normalise_uri, redact_uri
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import digest_of


class RequestRecord(ScoreRequest):
    """The parameters (a block's name, never its secrets), flat, plus what they were resolved to
    (`head`: the kind of head used, never `auto`, when the flow resolved it)."""

    run_id: str
    model_fingerprint: str
    adapter_fingerprint: str | None
    # The dated templates the run's fields were filled from ({field: template}, docs/inputs.md): the
    # fields themselves hold the filled values, and `as_of` the moment they were filled with.
    templates: dict[str, str] = {}

    @classmethod
    def of(
        cls,
        request: ScoreRequest,
        run_id: str,
        model_fingerprint: str,
        adapter_fingerprint: str | None,
        head: str | None = None,
        templates: dict[str, str] | None = None,
    ) -> RequestRecord:
        fields = request.model_dump() | ({"head": head} if head else {})
        return cls(
            **fields, run_id=run_id, model_fingerprint=model_fingerprint, adapter_fingerprint=adapter_fingerprint, templates=templates or {}
        )

    def public_dict(self) -> dict:
        data = super().public_dict()
        data["templates"] = {name: redact_uri(template) for name, template in self.templates.items()}
        return data

    def scoring_fingerprint(self, input_fingerprint: str) -> str:
        """What a committed shard's predictions depend on; shards under another fingerprint are stale.
        A parameter added later enters it only when it differs from what every earlier run did
        (LATER_PARAMETERS), so the runs made before it keep their fingerprint and resume."""
        params = {
            k: _comparable(k, v)
            for k, v in self.public_dict().items()
            if k in SCORING_PARAMETERS and _comparable(k, v) != LATER_PARAMETERS.get(k, _NEVER)
        }
        return digest_of([params, self.model_fingerprint, self.adapter_fingerprint, input_fingerprint])


def publish_request_record(run: RunFolder, record: RequestRecord) -> None:
    """Write request.json (the plan step does, for a new run or one whose earlier attempt committed nothing)."""
    run.publish_json(record.public_dict(), RunFolder.REQUEST)


def read_request_record(run: RunFolder) -> RequestRecord:
    """The request.json an earlier attempt of the run wrote."""
    data = run.read_bytes(RunFolder.REQUEST)
    try:
        return RequestRecord.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "request"
        raise RunConflict(
            f"the run at {run.uri} has a request.json this version cannot read ({where}: {first['msg']}); choose another run_name"
        ) from None


def check_resumable(earlier: RequestRecord, now: RequestRecord) -> None:
    """Refuse a resume whose predictions-affecting parameters, model or adapter differ from the earlier attempt's.
    Values are compared as request.json holds them (passwords redacted), URIs normalised."""
    then, current = earlier.public_dict(), now.public_dict()
    differences = [
        f"{name}: {then[name]!r} then, {current[name]!r} now"
        for name in ScoreRequest.model_fields
        if name in SCORING_PARAMETERS and _comparable(name, then[name]) != _comparable(name, current[name])
    ]
    for name in ("model_fingerprint", "adapter_fingerprint"):
        if then[name] != current[name]:
            differences.append(f"the {name.split('_')[0]} folder's content changed")
    if differences:
        raise RunConflict(
            f"run '{now.run_id}' already exists with different settings ({'; '.join(differences)}); "
            "choose another run_name, or rerun with the earlier settings to resume it"
        )


# Parameters that change predictions, added after runs existed, with the value every earlier run had.
LATER_PARAMETERS = {
    "head": HeadKind.SINGLE_LABEL,
    "thresholds": 0.5,
    "long_text": "truncate",
    "head_tokens": 128,
    "chunk_overlap": 0,
    "chunk_aggregate": "mean",
    "max_chunks": 64,
    # the default keeps every earlier run's fingerprint (they wrote no embeddings)
    "embedding_rows": 20000,
}
_NEVER = object()


def _comparable(name: str, value):
    # ./data, its absolute path, file:// and a trailing / are one place
    if name in URI_FIELDS:
        return normalise_uri(value)
    if name == "head" and value == AUTO:  # a request.json written before heads were resolved: single-label
        return HeadKind.SINGLE_LABEL
    return value

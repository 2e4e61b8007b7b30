"""The process boundary between the flow and the scoring worker, typed once for both sides.

Everything that crosses it is declared here: the job file the flow writes (`work/job.json`, a
`Job`) and the events the worker prints on stdout, one JSON object a line after EVENT_PREFIX. The
worker writes events with `event_line`, the launch side reads them with `parse_event` and matches
on the record's type; neither spells a kind or a field as a string of its own. A new field is one
annotated line on its record (with a default, if old job files or events must still parse).

The worker is handed `ScoringSettings`, the part of the request that decides how rows are scored,
not the whole request: what it cannot see cannot change a prediction unnoticed (every field of it
is in the scoring fingerprint, tests/test_boundary.py checks that). `LaunchSettings` is the part
whoever starts the worker on a machine needs (a fan-out group reads it from the parent's job file).

Imports nothing heavier than pydantic: the worker, the launch side and the Prefect tasks import it.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_serializer, field_validator

from scorekeeper.head_kind import HeadKind
from scorekeeper.params import ChunkAggregate, Dtype, Head, LongText, Mode, ScoreRequest, resolve_num_processes
from scorekeeper.redact import redact_uri
from scorekeeper.run_folder import IndexRange, RunFolder
from scorekeeper.scoring_summary import EngineFacts, PipelineFacts, PrecisionCheck

EVENT_PREFIX = "@@scorekeeper "


# -- the job file -------------------------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def of(cls, request: ScoreRequest) -> Self:
        """This section of a request: its fields carry the request's names."""
        return cls(**{name: getattr(request, name) for name in cls.model_fields})


class ScoringSettings(_Section):
    """What the worker scores with: the model's load, the batches, the pipeline's split."""

    mode: Mode
    dtype: Dtype
    max_length: int | None
    merge_adapter: bool
    trust_remote_code: bool
    tokens_per_batch: int | None
    max_batch_rows: int
    pipeline_stages: int | None
    microbatches: int
    # the kind of head (scorekeeper.heads), resolved by the flow (an `auto` the worker resolves the
    # same way from the config); defaults: what job files written before them meant
    head: Head = Field(HeadKind.SINGLE_LABEL.value)
    thresholds: float | dict[str, float] = 0.5
    # long documents (scorekeeper/long_text.py); defaults: what job files written before them meant
    long_text: LongText = "truncate"
    head_tokens: int = 128
    chunk_overlap: int = 0
    chunk_aggregate: ChunkAggregate = "mean"
    max_chunks: int = 64
    # the representation's sample (SPEC 14, worker/embeddings.py); job files written before it: none
    embedding_rows: int = 0


class LaunchSettings(_Section):
    """What whoever starts the scoring processes needs: where the model comes from, how many
    processes, how long a collective may wait. The worker does not read it."""

    model_uri: str
    adapter_uri: str | None
    num_processes: int | Literal["auto"]
    oversubscribe: bool
    collective_timeout_s: float

    def redacted(self) -> LaunchSettings:
        uris = {"model_uri": redact_uri(self.model_uri), "adapter_uri": redact_uri(self.adapter_uri) if self.adapter_uri else None}
        return self.model_copy(update=uris)

    def resolved_num_processes(self, visible_gpus: int, cores: int | None = None) -> int:
        """Processes to launch on this machine (params.resolve_num_processes)."""
        return resolve_num_processes(self.num_processes, self.oversubscribe, visible_gpus, cores)


class Job(BaseModel):
    """work/job.json: what to score with (`scoring`, the worker's), how to launch it (`launch`),
    where the model and the run are, which ranges are still to do. No secrets: a password in a
    URI is redacted when written; the worker takes the run's real URI from the job file's own URI
    (run_uri_of), which it is handed directly."""

    model_config = ConfigDict(extra="forbid")

    scoring: ScoringSettings
    launch: LaunchSettings
    run_uri: str
    model_path: str
    adapter_path: str | None
    total_rows: int
    ranges: list[IndexRange]
    scoring_fingerprint: str
    attempt: str = ""
    # rows of a reduced-precision run scored again in float32 (worker/precision.py); not in the
    # scoring fingerprint: it changes no prediction, only what the run reports about them
    precision_check_rows: int = 0

    @field_serializer("ranges")
    def _ranges_as_triples(self, ranges: list[IndexRange]) -> list[list[int]]:
        return [[r.index, r.start, r.end] for r in ranges]

    @field_validator("ranges", mode="before")
    @classmethod
    def _ranges_from_triples(cls, value: Any) -> Any:
        return [IndexRange(*r) if isinstance(r, list | tuple) else r for r in value]

    def to_json(self) -> str:
        redacted = self.model_copy(update={"run_uri": redact_uri(self.run_uri), "launch": self.launch.redacted()})
        return json.dumps(redacted.model_dump(mode="json"), indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        return cls.model_validate_json(text)


def run_uri_of(job_uri: str) -> str | None:
    """The run folder a job file lies in ({run_uri}/work/job.json), as the flow spelled it."""
    suffix = "/" + RunFolder.JOB
    return job_uri[: -len(suffix)] if job_uri.endswith(suffix) else None


# -- the worker's events ------------------------------------------------------------------------


class EventKind(StrEnum):
    STARTED = "started"
    MODEL_LOADED = "model_loaded"
    HEARTBEAT = "heartbeat"
    RANGE_DONE = "range_done"
    PIPELINE = "pipeline"
    PRECISION = "precision"
    FINISHED = "finished"
    ERROR = "error"


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float = Field(default_factory=time.time)


class RankEvent(_Event):
    """An event one scoring process sends about itself: it shows that process is alive."""

    rank: int


class Started(RankEvent):
    event: Literal[EventKind.STARTED] = EventKind.STARTED
    world: int
    device: str
    ranges: int
    engine: EngineFacts


class ModelLoaded(RankEvent):
    event: Literal[EventKind.MODEL_LOADED] = EventKind.MODEL_LOADED
    seconds: float
    dtype: str | None = None  # the compute dtype used (`auto` resolved), shown in the run facts


class PrecisionChecked(RankEvent):
    """This process's precision check, sent once its ranges are scored (reduced dtypes only)."""

    event: Literal[EventKind.PRECISION] = EventKind.PRECISION
    check: PrecisionCheck


class Heartbeat(RankEvent):
    event: Literal[EventKind.HEARTBEAT] = EventKind.HEARTBEAT


class RangeDone(RankEvent):
    """A range scored and committed (or found committed by another attempt: `committed` False)."""

    event: Literal[EventKind.RANGE_DONE] = EventKind.RANGE_DONE
    range: int
    rows: int
    tokens: int
    padded_tokens: int = 0
    truncated: int = 0
    committed: bool
    elapsed: float


class PipelineReport(_Event, PipelineFacts):
    """One pipeline's stages and bubble, sent by its last stage once it is done."""

    event: Literal[EventKind.PIPELINE] = EventKind.PIPELINE

    def record(self) -> PipelineFacts:
        """As the run's metrics keep it: the facts, without the kind and the time."""
        return PipelineFacts.model_validate(self.model_dump(exclude={"event", "t"}))


class Finished(RankEvent):
    event: Literal[EventKind.FINISHED] = EventKind.FINISHED


class Failed(RankEvent):
    """A problem the worker explained itself (exit code 2), or an unexpected error (`crash`: its
    type, message and place in one line; its traceback goes to stderr): the job's error."""

    event: Literal[EventKind.ERROR] = EventKind.ERROR
    message: str
    crash: bool = False


Event = Annotated[
    Started | ModelLoaded | Heartbeat | RangeDone | PipelineReport | PrecisionChecked | Finished | Failed, Field(discriminator="event")
]
_EVENT: TypeAdapter[Event] = TypeAdapter(Event)


def event_line(event: Event) -> str:
    """The stdout line that carries `event` (one line, newline included)."""
    return EVENT_PREFIX + event.model_dump_json() + "\n"


class MalformedEvent(ValueError):
    """A line with the event prefix that is not an event of this version."""


def parse_event(line: str) -> Event | None:
    """The event a worker's stdout line carries; None for any other line (the worker's own output).
    MalformedEvent for a line with the prefix that does not hold a valid event."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        return _EVENT.validate_json(line[len(EVENT_PREFIX) :])
    except ValidationError as exc:
        raise MalformedEvent(f"not a scorekeeper event ({exc.error_count()} problem(s)): {line[:200]}") from None

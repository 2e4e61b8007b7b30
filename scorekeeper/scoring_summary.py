"""The scoring step's numbers as typed records: `ScoringSummary` (metrics.json `scoring`, the report's
run facts) and what it carries: rank 0's `EngineFacts`, each pipeline's `PipelineFacts`, the
`PrecisionCheck` (the last three are also payloads of the worker's events in scorekeeper/boundary.py),
a fanned-out run's `GroupSummary` per group and the summed long-text counts. Imports only
scorekeeper/long_text.py's counts, so the worker's boundary, the scoring steps, the metrics document
and the report all use the one definition.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, field_serializer, model_serializer

from scorekeeper.long_text import LongTextCounts


class EngineFacts(BaseModel):
    """How a process feeds its device (worker/device.py engine_facts), for the run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str
    accelerator_path: bool
    prefetch_thread: bool
    pinned_memory: bool
    batch_threads: int
    tokens_per_batch: int


class PipelineFacts(BaseModel):
    """One pipeline's stages and bubble (worker/pipeline.py), sent by its last stage once it is done."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pipeline: int
    ranks: list[int]
    stages: list[list[int]]
    microbatches: int
    schedule: str
    steps: int
    short_steps: int
    dummy_rows: int
    schedules_built: int
    stage_busy_s: list[float]
    stage_step_s: list[float]
    bubble_measured: float | None  # null when it could not be measured
    bubble_theoretical: float


def _without_none(value: BaseModel, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    return {k: v for k, v in handler(value).items() if v is not None}


class PrecisionCheck(BaseModel):
    """A reduced-precision run's sample scored again in float32 (worker/precision.py): how far the
    committed values are from float32's. Which figures are set depends on the head: probabilities
    and changed predictions (single_label), probabilities and changed label decisions (multi_label),
    predictions (regression)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: str  # the compute dtype checked against float32
    rows: int  # rows scored again in float32
    max_probability_difference: float | None = None
    changed_predictions: int | None = None
    changed_label_decisions: int | None = None
    max_prediction_difference: float | None = None
    skipped: str | None = None  # why a process checked nothing (its float32 model did not fit)

    @model_serializer(mode="wrap")
    def _figures(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(self, handler)  # the figures its head has, and `skipped` when set

    @property
    def max_difference(self) -> float | None:
        return self.max_probability_difference if self.max_probability_difference is not None else self.max_prediction_difference

    @property
    def changed(self) -> int | None:
        return self.changed_predictions if self.changed_predictions is not None else self.changed_label_decisions

    @classmethod
    def merged(cls, checks: list[PrecisionCheck]) -> PrecisionCheck | None:
        """Several processes' checks as one: rows and changes summed, the largest difference kept."""
        if not checks:
            return None
        figures: dict[str, Any] = {"dtype": checks[0].dtype, "rows": sum(c.rows for c in checks)}
        skipped = sorted({c.skipped for c in checks if c.skipped})
        if skipped:
            figures["skipped"] = "; ".join(skipped)
        for name, combine in (
            ("max_probability_difference", max),
            ("max_prediction_difference", max),
            ("changed_predictions", sum),
            ("changed_label_decisions", sum),
        ):
            values = [getattr(c, name) for c in checks if getattr(c, name) is not None]
            if values:
                figures[name] = combine(values)
        return cls(**figures)


class GroupRunSummary(BaseModel):
    """One flow run of a fan-out group (tasks/fan_out.py): where it ran and what it committed."""

    model_config = ConfigDict(extra="forbid")

    flow_run_id: str
    flow_run_name: str
    machine: str | None
    worker: str | None
    state: str
    ranges: list[int]
    rows: int
    rows_per_s: float | None
    dtype: str | None
    error: str | None = None  # a run that did not complete: its message

    @model_serializer(mode="wrap")
    def _record(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return data if self.error is not None else {k: v for k, v in data.items() if k != "error"}


class GroupSummary(BaseModel):
    """One group of a fanned-out run (metrics.json `scoring.groups`): its last run's machine and rate,
    its ranges and rows, and every run it took."""

    model_config = ConfigDict(extra="forbid")

    group: int
    status: str
    machine: str | None
    worker: str | None
    flow_run_id: str
    ranges: list[int]
    rows: int
    rows_per_s: float | None
    dtype: str | None
    attempts: int
    runs: list[GroupRunSummary]


class ScoringSummary(BaseModel):
    """The scoring step's numbers (metrics.json `scoring`, the report's run facts): what this
    attempt scored and how fast, from the worker's events (launch/progress.py) or, for a fanned-out
    run, from the groups' commit records (tasks/fan_out.py). Built by `measured`, the one place the
    rates are computed, and handed on as it is (metrics.json `scoring` is `as_dict()`; a scoring group's
    record and the flows' results, which are JSON, hold `as_dict()` too)."""

    model_config = ConfigDict(extra="forbid")

    rows_scored: int
    tokens: int
    padded_tokens: int
    truncated: int
    seconds: float
    rows_per_s: float
    tokens_per_s: float
    pipeline: list[PipelineFacts] | None = None  # one per pipeline of a pipeline-mode run
    engine: EngineFacts | None = None  # how rank 0 fed its device
    dtype: str | None = None  # the compute dtype rank 0 loaded the model in
    precision_check: PrecisionCheck | None = None  # PrecisionCheck.merged of a reduced-dtype run
    processes: int | None = None
    fan_out: int | None = None
    groups: list[GroupSummary] | None = None  # one per fan-out group
    long_text: LongTextCounts | None = None  # every committed range's long-text counts summed (tasks/gather.py)

    @field_serializer("long_text")
    def _long_text(self, counts: LongTextCounts | None) -> dict[str, Any] | None:
        return None if counts is None else counts.model_dump(exclude_none=True)  # chunk mode's counts only in chunk mode

    @classmethod
    def measured(cls, rows: int, tokens: int, padded_tokens: int, truncated: int, seconds: float, **more: Any) -> Self:
        """The summary of `rows` rows (`tokens` tokens) scored in `seconds`, its rates rounded."""
        return cls(
            rows_scored=rows,
            tokens=tokens,
            padded_tokens=padded_tokens,
            truncated=truncated,
            seconds=round(seconds, 3),
            rows_per_s=round(rows / max(seconds, 1e-9), 2),
            tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
            **more,
        )

    def as_dict(self) -> dict[str, Any]:
        """metrics.json's `scoring`: the fields that are not None, each part whole (a pipeline's
        unmeasured bubble is null), except that a precision check and the long-text counts hold
        the figures they have."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

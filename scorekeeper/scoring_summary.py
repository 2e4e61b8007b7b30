"""The scoring step's numbers as typed records: `ScoringSummary` (metrics.json `scoring`, the report's
run facts) and the precision check it carries (`PrecisionCheck`, also a worker event's payload in
scorekeeper/boundary.py). Imports only scorekeeper/long_text.py's counts, so the worker's boundary, the scoring
steps, the metrics document and the report all use the one definition.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from scorekeeper.long_text import LongTextCounts


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
    pipeline: list[dict] | None = None  # one per pipeline of a pipeline-mode run
    engine: dict | None = None  # rank 0's EngineFacts
    dtype: str | None = None  # the compute dtype rank 0 loaded the model in
    precision_check: PrecisionCheck | None = None  # PrecisionCheck.merged of a reduced-dtype run
    processes: int | None = None
    fan_out: int | None = None
    groups: list[dict] | None = None  # one per fan-out group
    long_text: LongTextCounts | None = None  # every committed range's long-text counts summed (tasks/gather.py)

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
        """metrics.json's `scoring`: the fields that are set."""
        return self.model_dump(exclude_none=True)

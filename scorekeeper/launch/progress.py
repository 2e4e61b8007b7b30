"""What the scoring processes report on stdout (scorekeeper/boundary.py's events), summed into Progress."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from scorekeeper.boundary import (
    Event,
    Failed,
    ModelLoaded,
    PipelineReport,
    PrecisionChecked,
    RangeDone,
    Started,
)
from scorekeeper.scoring_summary import PrecisionCheck, ScoringSummary


@dataclass
class Progress:
    """Rows and tokens scored so far, from the workers' range_done events."""

    total_rows: int
    rows_done: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    truncated: int = 0
    ranges_done: int = 0
    started: float = field(default_factory=time.time)
    errors: list[str] = field(default_factory=list)  # each failing rank's own one-line error, in order of arrival
    crashed: bool = False  # one of them is a bug (not a problem the user can fix): its traceback matters
    pipeline: list[dict] = field(default_factory=list)  # one `pipeline` event per pipeline: stages, bubble
    engine: dict | None = None  # how rank 0 fed its device (worker/device.py engine_facts)
    dtype: str | None = None  # the compute dtype rank 0 loaded the model in (`auto` resolved)
    precision_checks: list[PrecisionCheck] = field(default_factory=list)  # one per process of a reduced-dtype run

    def update(self, event: Event) -> None:
        match event:
            case RangeDone():
                self.rows_done += event.rows
                self.tokens += event.tokens
                self.padded_tokens += event.padded_tokens
                self.truncated += event.truncated
                self.ranges_done += 1
            case Started(rank=0):
                self.engine = event.engine.model_dump()
            case ModelLoaded(rank=0) if event.dtype:
                self.dtype = event.dtype
            case PipelineReport():
                self.pipeline.append(event.record())
            case PrecisionChecked():
                self.precision_checks.append(event.check)
            case Failed():
                self.errors.append(f"rank {event.rank}: {event.message}")
                self.crashed = self.crashed or event.crash

    @property
    def elapsed(self) -> float:
        return max(time.time() - self.started, 1e-9)

    def line(self) -> str:
        return (
            f"scored {self.rows_done}/{self.total_rows} rows ({100 * self.rows_done / max(self.total_rows, 1):.0f}%), "
            f"{self.rows_done / self.elapsed:.1f} rows/s, {self.tokens / self.elapsed:.0f} tokens/s"
        )

    def summary(self, processes: int | None = None) -> ScoringSummary:
        """The scoring summary (scoring_summary.ScoringSummary) of what the events reported, by `processes` processes."""
        check = PrecisionCheck.merged(self.precision_checks)
        return ScoringSummary.measured(
            self.rows_done,
            self.tokens,
            self.padded_tokens,
            self.truncated,
            self.elapsed,
            pipeline=self.pipeline or None,
            engine=self.engine or None,
            dtype=self.dtype or None,
            precision_check=check,
            processes=processes,
        )

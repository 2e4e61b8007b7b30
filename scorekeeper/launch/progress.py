"""What the scoring processes report on stdout: one JSON event a line, summed into Progress."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from scorekeeper.worker.job import EVENT_PREFIX


def parse_event(line: str) -> dict | None:
    """The event a worker's stdout line carries; None for any other line (the worker's own output)."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        event = json.loads(line[len(EVENT_PREFIX) :])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


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
    errors: list[str] = field(default_factory=list)
    pipeline: list[dict] = field(default_factory=list)  # one `pipeline` event per pipeline: stages, bubble
    engine: dict | None = None  # how rank 0 fed its device (worker/runtime.py engine_facts)
    dtype: str | None = None  # the compute dtype rank 0 loaded the model in (`auto` resolved)

    def update(self, event: dict) -> None:
        if event.get("event") == "range_done":
            self.rows_done += event["rows"]
            self.tokens += event["tokens"]
            self.padded_tokens += event.get("padded_tokens", 0)
            self.truncated += event.get("truncated", 0)
            self.ranges_done += 1
        elif event.get("event") == "model_loaded" and event.get("rank") == 0 and "dtype" in event:
            self.dtype = event["dtype"]
        elif event.get("event") == "started" and event.get("rank") == 0 and "engine" in event:
            self.engine = event["engine"]
        elif event.get("event") == "pipeline":
            self.pipeline.append({k: v for k, v in event.items() if k not in ("event", "t")})
        elif event.get("event") == "error":
            self.errors.append(f"rank {event.get('rank')}: {event.get('message')}")

    @property
    def elapsed(self) -> float:
        return max(time.time() - self.started, 1e-9)

    def line(self) -> str:
        return (
            f"scored {self.rows_done}/{self.total_rows} rows ({100 * self.rows_done / max(self.total_rows, 1):.0f}%), "
            f"{self.rows_done / self.elapsed:.1f} rows/s, {self.tokens / self.elapsed:.0f} tokens/s"
        )

    def summary(self) -> dict:
        return {
            "rows_scored": self.rows_done,
            "tokens": self.tokens,
            "padded_tokens": self.padded_tokens,
            "truncated": self.truncated,
            "seconds": round(self.elapsed, 3),
            "rows_per_s": round(self.rows_done / self.elapsed, 2),
            "tokens_per_s": round(self.tokens / self.elapsed, 1),
            **({"pipeline": self.pipeline} if self.pipeline else {}),
            **({"engine": self.engine} if self.engine else {}),
            **({"dtype": self.dtype} if self.dtype else {}),
        }

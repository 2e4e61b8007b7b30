"""The file boundary between the flow and the scoring worker.

The flow writes the run folder's `work/job.json` (scorekeeper.run_folder names every path); the
worker reads it, scores the pending ranges and commits one shard per range. Imports nothing
heavier than the standard library and pydantic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the job file needs pydantic; the range helpers do not
    from scorekeeper.params import ScoreRequest

EVENT_PREFIX = "@@scorekeeper "


@dataclass(frozen=True)
class IndexRange:
    """Rows [start, end) of the input order: the unit of work, commit and resume."""

    index: int
    start: int
    end: int

    @property
    def rows(self) -> int:
        return self.end - self.start


def plan_ranges(total_rows: int, rows_per_range: int) -> list[IndexRange]:
    """Cut [0, total_rows) into fixed-size ranges; the last one may be shorter."""
    return [IndexRange(i, start, min(start + rows_per_range, total_rows)) for i, start in enumerate(range(0, total_rows, rows_per_range))]


def run_uri_of(job_uri: str) -> str | None:
    """The run folder a job file lies in ({run_uri}/work/job.json), as the flow spelled it."""
    from scorekeeper.run_folder import RunFolder

    suffix = "/" + RunFolder.JOB
    return job_uri[: -len(suffix)] if job_uri.endswith(suffix) else None


@dataclass
class Job:
    """What the worker needs: the request, where things are, and which ranges are still to do."""

    request: ScoreRequest
    run_uri: str
    model_path: str
    adapter_path: str | None
    total_rows: int
    ranges: list[IndexRange]
    scoring_fingerprint: str
    attempt: str = ""

    def to_json(self) -> str:
        """job.json: no secrets. A password in the run's URI is redacted here; the worker takes the
        real URI from the job file's own URI (see run_uri_of), which it is handed directly."""
        from scorekeeper.redact import redact_uri

        return json.dumps(
            {
                "request": self.request.public_dict(),
                "run_uri": redact_uri(self.run_uri),
                "model_path": self.model_path,
                "adapter_path": self.adapter_path,
                "total_rows": self.total_rows,
                "ranges": [[r.index, r.start, r.end] for r in self.ranges],
                "scoring_fingerprint": self.scoring_fingerprint,
                "attempt": self.attempt,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> Job:
        from scorekeeper.params import ScoreRequest

        raw = json.loads(text)
        return cls(
            request=ScoreRequest(**raw["request"]),
            run_uri=raw["run_uri"],
            model_path=raw["model_path"],
            adapter_path=raw["adapter_path"],
            total_rows=raw["total_rows"],
            ranges=[IndexRange(*r) for r in raw["ranges"]],
            scoring_fingerprint=raw["scoring_fingerprint"],
            attempt=raw.get("attempt", ""),
        )

"""The file boundary between the flow and the scoring worker, and the run folder's layout.

The flow writes `work/job.json`; the worker reads it, scores the pending ranges and commits one
shard per range. Imports nothing heavier than the standard library and pydantic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the job file needs pydantic; the range and commit helpers do not
    from scorekeeper.params import ScoreRequest

# Layout of a run folder: {output_uri}/{run_id}/...
REQUEST_FILE = "request.json"
PLAN_FILE = "plan.json"
PREDICTIONS_FILE = "predictions.parquet"
REPORT_DIR = "report"
WORK_DIR = "work"
STAGED_INPUT = f"{WORK_DIR}/input.parquet"
STAGED_GROUND_TRUTH = f"{WORK_DIR}/ground_truth.parquet"
STAGED_MANIFEST = f"{WORK_DIR}/staged.json"
JOB_FILE = f"{WORK_DIR}/job.json"
SHARD_DIR = f"{WORK_DIR}/shards"
COMMIT_DIR = f"{WORK_DIR}/commits"
GROUP_DIR = f"{WORK_DIR}/groups"  # fan-out: groups/g{N}/{flow run id}/ holds a group run's job.json and record.json
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


def commit_name(range_index: int) -> str:
    return f"{COMMIT_DIR}/range-{range_index:07d}.json"


def row_index_checksum(row_index: np.ndarray) -> str:
    """sha256 of the row indices as little-endian int64: what the commit record vouches for."""
    return hashlib.sha256(np.ascontiguousarray(row_index, dtype="<i8").tobytes()).hexdigest()


@dataclass
class CommitRecord:
    """What a committed shard promises: these rows, this many, scored under this fingerprint."""

    range_index: int
    start: int
    end: int
    rows: int
    row_index_sha256: str
    shard: str
    scoring_fingerprint: str
    tokens: int = 0
    truncated: int = 0
    attempt: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitRecord:
        return cls(**json.loads(data))


def run_uri_of(job_uri: str) -> str | None:
    """The run folder a job file lies in ({run_uri}/work/job.json), as the flow spelled it."""
    suffix = "/" + JOB_FILE
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

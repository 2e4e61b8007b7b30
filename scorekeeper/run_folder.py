"""The run folder, {output_uri}/{run_id}/: where each of its files lives, and the records kept there.

Both sides use it: the flow writes request.json, plan.json, the staged input and the job file; the
scoring processes read the job and the staged input and write shards and commit records. The
unit of all of it, an IndexRange, is declared here; the job file's record is in
scorekeeper/boundary.py. The
names are part of the outputs' contract (request.json, plan.json, predictions.parquet, report/,
work/): change none. Imports nothing heavier than pydantic, numpy and fsspec, since the scoring
worker imports it too (no Prefect, no DuckDB, no torch).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, model_serializer

from scorekeeper.long_text import LongTextCounts
from scorekeeper.redact import redact_uri
from scorekeeper.storage import Location, digest_of


class InputFile(BaseModel):
    """One input (or ground-truth) file as the read step found it."""

    model_config = ConfigDict(frozen=True)

    uri: str
    size: int
    format: str
    fingerprint: str

    def redacted(self) -> InputFile:
        """As the run's files (plan.json, the staged manifest) record it: no password in its URI."""
        return self.model_copy(update={"uri": redact_uri(self.uri)})


class _Record(BaseModel):
    """A run-folder record whose fields added later (ADDED) are left out while unset (None): a
    record written before them is written back byte for byte, as readers of older files expect."""

    ADDED: ClassVar[tuple[str, ...]] = ("skipped", "skipped_files", "input_template")

    @model_serializer(mode="wrap")
    def _leave_out_unset_additions(self, handler):
        return {k: v for k, v in handler(self).items() if not (k in self.ADDED and v is None)}


class SkippedFiles(BaseModel):
    """Files below the input (or ground-truth) folder that were not read because a folder or file
    name below it starts with "." or "_", as pyarrow's and Spark's dataset readers skip them
    (.ipynb_checkpoints/, _temporary/, _SUCCESS, .crc files). plan.json's `skipped_files`."""

    LISTED: ClassVar[int] = 1000  # URIs kept in the record; `count` counts them all

    count: int = 0
    files: list[str] = []  # redacted URIs, sorted, the first LISTED

    @classmethod
    def of(cls, uris: list[str]) -> SkippedFiles:
        return cls(count=len(uris), files=[redact_uri(u) for u in sorted(uris)[: cls.LISTED]])

    def plus(self, other: SkippedFiles) -> SkippedFiles:
        return SkippedFiles(count=self.count + other.count, files=sorted(self.files + other.files)[: self.LISTED])


class StagedGroundTruth(_Record):
    """The ground-truth files staged beside the input (when ground_truth_uri is given)."""

    files: list[InputFile]
    id_type: str
    skipped: SkippedFiles | None = None  # None in records written before it (left out when written back)


class StagedManifest(_Record):
    """work/staged.json: what the read step staged; the plan and the evaluation read it."""

    files: list[InputFile]
    total_rows: int
    has_label: bool
    label_type: str | None
    id_type: str
    has_text_pair: bool
    null_text_rows: int
    slice_columns: list[str]
    staging_key: str
    ground_truth: StagedGroundTruth | None = None
    skipped: SkippedFiles | None = None  # None in records written before it (left out when written back)

    def all_skipped(self) -> SkippedFiles:
        """The hidden files of the input and of the ground truth, together."""
        skipped = self.skipped or SkippedFiles()
        return skipped.plus(self.ground_truth.skipped) if self.ground_truth and self.ground_truth.skipped else skipped

    @property
    def input_fingerprint(self) -> str:
        """A digest of the input files' fingerprints: the rows a run scores."""
        return digest_of([f.fingerprint for f in self.files])


@dataclass(frozen=True)
class IndexRange:
    """Rows [start, end) of the input order: the unit of work, commit and resume."""

    index: int
    start: int
    end: int

    @property
    def rows(self) -> int:
        return self.end - self.start


def cut_ranges(total_rows: int, rows_per_range: int) -> list[IndexRange]:
    """Cut [0, total_rows) into fixed-size ranges; the last one may be shorter."""
    return [IndexRange(i, start, min(start + rows_per_range, total_rows)) for i, start in enumerate(range(0, total_rows, rows_per_range))]


class Plan(_Record):
    """plan.json: the input, the fingerprints the run was planned under, and its index ranges."""

    files: list[InputFile]
    total_rows: int
    input_fingerprint: str
    model_fingerprint: str
    adapter_fingerprint: str | None
    scoring_fingerprint: str
    rows_per_range: int
    ranges: list[tuple[int, int]]  # [start, end) of range k at position k
    labels: list[str]
    skipped_files: SkippedFiles | None = None  # hidden files below the input and ground-truth folders, not read
    input_template: str | None = None  # the dated input_uri template the input was filled from (compare_to previous)

    def index_ranges(self, indices: list[int] | None = None) -> list[IndexRange]:
        """The planned ranges (those of `indices`, in that order, when given)."""
        wanted = range(len(self.ranges)) if indices is None else indices
        return [IndexRange(i, *self.ranges[i]) for i in wanted]


class PartSeal(BaseModel):
    """A file committed with a range's shard (its sampled rows' embeddings, its token counts): its
    name in the run folder, its sha256 and size as published, and its Parquet row count."""

    name: str
    sha256: str
    bytes: int
    rows: int


class CommitRecord(BaseModel):
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
    long_text: LongTextCounts | None = None  # the range's lengths and windows (scorekeeper/long_text.py)
    shard_sha256: str | None = None  # the shard's bytes as published (None in records written before)
    shard_bytes: int | None = None
    # SPEC 14 (scorekeeper/representation.py): the range's sampled rows' embeddings (None: no row of
    # the range is sampled) and its content tokens' counts (None: committed before they were counted)
    embeddings: PartSeal | None = None
    token_counts: PartSeal | None = None

    def to_bytes(self) -> bytes:
        data = self.model_dump()
        for name in (
            "long_text",
            "shard_sha256",
            "shard_bytes",
            "embeddings",
            "token_counts",
        ):  # a record written before them is written back as it was
            if data.get(name) is None:
                data.pop(name, None)
        return json.dumps(data, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitRecord:
        return cls.model_validate_json(data)

    def files(self) -> list[str]:
        """The files this commit names in the run folder: its shard and the parts committed with it."""
        return [self.shard, *(part.name for part in (self.embeddings, self.token_counts) if part is not None)]


class FileSeal(BaseModel):
    """One output as its run published it (complete.json `outputs[name]`, scorekeeper/run_seal.py)."""

    sha256: str
    bytes: int | None = None  # None for a report file, whose record holds its sha256 alone
    rows: int | None = None  # Parquet files: the row count their footer holds


class CompletionRecord(BaseModel):
    """complete.json: written last, atomically, once every output of the run is published; removed
    before they are published again. History, `compare_to` (a name or `previous`) and anything
    else that asks "did this run complete?" read this record and nothing else: a metrics.json
    without it is what a failure while publishing left behind.

    `files` holds the sha256 of each report file as published, and `outputs` the seal (sha256,
    size, Parquet row count) of predictions.parquet, plan.json and request.json, so a reader can
    tell that the files it reads are the ones the record vouches for (scorekeeper/run_seal.py).
    A record written before `outputs` existed has none: it vouches for its report alone."""

    run_id: str
    finished_at: str
    files: dict[str, str]
    outputs: dict[str, FileSeal] | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump(exclude_none=True), indent=2, sort_keys=True).encode() + b"\n"


def row_index_checksum(row_index: np.ndarray) -> str:
    """sha256 of the row indices as little-endian int64: what the commit record vouches for."""
    return hashlib.sha256(np.ascontiguousarray(row_index, dtype="<i8").tobytes()).hexdigest()


class RunFolder(Location):
    """One run's folder. Names below are relative to it; `Location`'s methods read and write them."""

    REQUEST: ClassVar[str] = "request.json"
    PLAN: ClassVar[str] = "plan.json"
    PREDICTIONS: ClassVar[str] = "predictions.parquet"
    EMBEDDINGS: ClassVar[str] = "embeddings.parquet"  # the sampled rows' representation (SPEC 14, docs/drift.md)
    REPORT_DIR: ClassVar[str] = "report"
    METRICS: ClassVar[str] = "report/metrics.json"
    TOKEN_COUNTS: ClassVar[str] = "report/token_counts.parquet"  # every content token's count (docs/drift.md)
    TOKEN_COUNTS_WORK: ClassVar[str] = "work/token_counts.parquet"  # the gather's sum; the report publishes it as TOKEN_COUNTS
    COMPLETION: ClassVar[str] = "complete.json"  # a run is complete when, and only when, this exists
    WORK_DIR: ClassVar[str] = "work"  # what a resume needs; not an output
    STAGED_INPUT: ClassVar[str] = "work/input.parquet"
    STAGED_GROUND_TRUTH: ClassVar[str] = "work/ground_truth.parquet"
    STAGED_MANIFEST: ClassVar[str] = "work/staged.json"
    JOB: ClassVar[str] = "work/job.json"
    LEASE_DIR: ClassVar[str] = "work/lease"  # {generation}.json, scorekeeper/lease.py
    SHARD_DIR: ClassVar[str] = "work/shards"
    COMMIT_DIR: ClassVar[str] = "work/commits"
    GROUP_DIR: ClassVar[str] = "work/groups"  # fan-out: groups/g{N}/{flow run id}/ holds a group run's job.json and record.json

    @classmethod
    def under(cls, output_uri: str, run_id: str) -> RunFolder:
        """{output_uri}/{run_id}: run ids are validated names, so a run never escapes output_uri."""
        parent = Location.from_uri(output_uri)
        return cls(parent.fs, parent.join(run_id))

    def uri_of(self, name: str) -> str:
        """The URI of a file in the folder (what another process is handed)."""
        return self.uri + "/" + name

    @classmethod
    def commit_name(cls, range_index: int) -> str:
        return f"{cls.COMMIT_DIR}/range-{range_index:07d}.json"

    @classmethod
    def shard_name(cls, range_index: int, attempt: str, part: str | None = None) -> str:
        """Unique to the attempt: a shard counts only once its commit record names it. A `part`
        ("embeddings", "token_counts") names a file committed with the shard."""
        return f"{cls.SHARD_DIR}/range-{range_index:07d}-{attempt}{'.' + part if part else ''}.parquet"

    # -- typed records ------------------------------------------------------------------------
    def read_manifest(self) -> StagedManifest | None:
        if not self.exists(self.STAGED_MANIFEST):
            return None
        return StagedManifest.model_validate_json(self.read_bytes(self.STAGED_MANIFEST))

    def publish_manifest(self, manifest: StagedManifest) -> None:
        self.publish_json(manifest.model_dump(mode="json"), self.STAGED_MANIFEST)

    def read_plan(self) -> Plan:
        return Plan.model_validate_json(self.read_bytes(self.PLAN))

    def publish_plan(self, plan: Plan) -> None:
        self.publish_json(plan.model_dump(mode="json"), self.PLAN)

    def read_completion(self) -> CompletionRecord | None:
        """The run's completion record, or None when the run has not completed."""
        try:
            return CompletionRecord.model_validate_json(self.read_bytes(self.COMPLETION))
        except FileNotFoundError:
            return None

    def commit_records(self) -> list[tuple[str, CommitRecord]]:
        """Every commit record in the folder, by file name (whatever fingerprint it was made under)."""
        names = [n for n in self.list_names(self.COMMIT_DIR) if n.endswith(".json") and not n.startswith(".")]
        return [(name, CommitRecord.from_bytes(self.read_bytes(self.COMMIT_DIR, name))) for name in names]

    def create_commit(self, record: CommitRecord) -> bool:
        """Create a range's commit record exclusively; False when that range was committed already."""
        return self.create_exclusive(record.to_bytes(), self.commit_name(record.range_index))

"""Plan fixed index ranges over the staged rows and find which of them still need scoring.

Ranges depend only on the row count and `rows_per_range`, never on the process count, so a resume
may use any number of processes and still meets the same ranges and commit records.
"""

from __future__ import annotations

import logging
import uuid

from prefect import task

from scorekeeper.boundary import Job, LaunchSettings, ScoringSettings
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted, redact_uri
from scorekeeper.request_record import publish_request_record
from scorekeeper.run_folder import CommitRecord, Plan, RunFolder, StagedManifest, cut_ranges
from scorekeeper.tasks.open_run import RunContext, request_record
from scorekeeper.tasks.retries import IO_RETRIES

log = logging.getLogger(__name__)


def committed_ranges(run: RunFolder, fingerprint: str) -> dict[int, CommitRecord]:
    """Commit records of this run that were made under the same scoring fingerprint."""
    records = {}
    for name, record in run.commit_records():
        if record.scoring_fingerprint == fingerprint:
            records[record.range_index] = record
        else:
            log.warning("ignoring commit %s: made for other settings", name)
    return records


def shard_problem(record: CommitRecord, sizes: dict[str, int]) -> str | None:
    """Why a commit record's shard cannot be what it promises, from the shard folder's listing
    (name -> bytes): missing, or not the size the record says. None when it may be."""
    size = sizes.get(record.shard.rsplit("/", 1)[-1])
    if size is None:
        return f"its shard {record.shard} is missing"
    if record.shard_bytes is not None and size != record.shard_bytes:
        return f"its shard {record.shard} has {size:,} bytes, its commit record says {record.shard_bytes:,}"
    for part in (record.embeddings, record.token_counts):  # the files committed with the shard (SPEC 14)
        if part is not None and sizes.get(part.name.rsplit("/", 1)[-1]) != part.bytes:
            held = sizes.get(part.name.rsplit("/", 1)[-1])
            return (
                f"its file {part.name} is missing"
                if held is None
                else f"its file {part.name} has {held:,} bytes, its commit record says {part.bytes:,}"
            )
    return None


def usable_commits(run: RunFolder, fingerprint: str) -> dict[int, CommitRecord]:
    """committed_ranges whose shards are there: a record whose shard is missing or of another size
    is withdrawn (removed, so that a new attempt can commit the range) and its range scored again,
    each said in one line. The gather checks every shard's checksum (tasks/gather.py)."""
    done = committed_ranges(run, fingerprint)
    if not done:
        return done
    run.fs.invalidate_cache(run.join(RunFolder.SHARD_DIR))
    try:
        entries = run.fs.ls(run.join(RunFolder.SHARD_DIR), detail=True)
    except FileNotFoundError:
        entries = []
    sizes = {e["name"].rstrip("/").rsplit("/", 1)[-1]: int(e.get("size") or 0) for e in entries}
    for index, record in sorted(done.items()):
        problem = shard_problem(record, sizes)
        if problem is not None:
            withdraw_commit(run, record, problem)
            del done[index]
    return done


def withdraw_commit(run: RunFolder, record: CommitRecord, problem: str) -> None:
    """Remove a commit record that cannot be trusted, saying so: its range counts as not committed."""
    log.warning(
        "range %d [%d, %d) was committed but %s: its commit record is withdrawn and the range is scored again",
        record.range_index,
        record.start,
        record.end,
        problem,
    )
    run.remove(RunFolder.commit_name(record.range_index))


def commit_progress(run: RunFolder) -> tuple[int, int] | None:
    """(ranges committed, ranges planned) for the run's current plan; None before there is one."""
    if not run.exists(RunFolder.PLAN):
        return None
    plan = run.read_plan()
    return len(committed_ranges(run, plan.scoring_fingerprint)), len(plan.ranges)


def plan_run(request: ScoreRequest, context: RunContext, manifest: StagedManifest) -> Job:
    """Write plan.json and the worker's job.json; the job lists only uncommitted ranges."""
    run = context.run
    record = request_record(request, context)
    if not context.resumed:  # a new run, or an earlier attempt that committed nothing
        publish_request_record(run, record)
    input_fingerprint = manifest.input_fingerprint
    fingerprint = record.scoring_fingerprint(input_fingerprint)
    ranges = cut_ranges(manifest.total_rows, request.rows_per_range)
    done = usable_commits(run, fingerprint)
    pending = [r for r in ranges if r.index not in done]
    run.publish_plan(
        Plan(
            files=manifest.files,
            total_rows=manifest.total_rows,
            input_fingerprint=input_fingerprint,
            model_fingerprint=context.model_fingerprint,
            adapter_fingerprint=context.adapter_fingerprint,
            scoring_fingerprint=fingerprint,
            rows_per_range=request.rows_per_range,
            ranges=[(r.start, r.end) for r in ranges],
            labels=context.labels,
            skipped_files=manifest.all_skipped(),
            input_template=redact_uri(context.templates.get("input_uri")),
        )
    )
    job = Job(
        scoring=ScoringSettings.of(request.model_copy(update={"head": context.head})),  # the kind resolved: the workers score that one
        launch=LaunchSettings.of(request),
        run_uri=run.uri,
        model_path=context.model_path,
        adapter_path=context.adapter_path,
        total_rows=manifest.total_rows,
        ranges=pending,
        scoring_fingerprint=fingerprint,
        attempt=uuid.uuid4().hex[:12],
        precision_check_rows=request.precision_check_rows,
    )
    run.publish_bytes(job.to_json().encode(), RunFolder.JOB)
    log.info("%d ranges planned over %d rows; %d already committed, %d to score", len(ranges), manifest.total_rows, len(done), len(pending))
    return job


@task(name="plan ranges", **IO_RETRIES)
@raises_redacted
def plan_run_task(request: ScoreRequest, context: RunContext, manifest: StagedManifest) -> Job:
    """Cut the rows into ranges and write the plan and the worker's job file."""
    return plan_run(request, context, manifest)

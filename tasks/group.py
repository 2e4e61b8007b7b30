"""A scoring group: some of a run's ranges, scored on whichever machine's worker picked the group up.

A fanned-out run (fan_out > 1) dispatches each group as a flow run of the scoring-group deployment
(flows/score_group.py). The group reads the run's plan, fetches the model into this machine's own
cache (and refuses a model whose content differs from the one the run was planned with), writes a
job file for its ranges that are still uncommitted, and runs the same scoring processes as a
single-machine run: shards and commit records land in the shared run folder, exactly once whoever
scores them, so a group that runs twice (a retry, a lost machine that was not dead after all)
cannot count a range twice.

Each group run keeps a record in `work/groups/g{N}/{flow run id}/record.json`: which machine and
worker, which ranges, its rows/s, and a heartbeat the parent watches to notice a machine that died.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE

from scorekeeper.boundary import Job
from scorekeeper.errors import InputError, ModelError, RunConflict
from scorekeeper.model_folder import check_safetensors_folder
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder
from scorekeeper.scoring_summary import ScoringSummary
from scorekeeper.storage import Location
from scorekeeper.tasks.open_run import folder_fingerprint, localize_folder
from scorekeeper.tasks.plan import committed_ranges
from scorekeeper.tasks.retries import IO_RETRIES
from scorekeeper.tasks.score import score_job

log = logging.getLogger(__name__)

RECORD_FILE = "record.json"
GROUP_JOB_FILE = "job.json"
MAX_HEARTBEAT_S = 10.0


def group_folder(group: int, flow_run_id: str) -> str:
    """The folder of one run of one group: a copy of the same group elsewhere never shares it."""
    return f"{RunFolder.GROUP_DIR}/g{group}/{flow_run_id}"


def group_attempt(group: int, flow_run_id: str) -> str:
    """The attempt id of a group run's shards and commit records (the worker appends `-r{rank}`)."""
    return f"g{group}-{str(flow_run_id).replace('-', '')[:12]}"


def machine_identity() -> dict[str, str | None]:
    """Which machine this is: its host name and the Prefect worker that started this flow run."""
    return {"machine": socket.gethostname(), "worker": os.environ.get("PREFECT__WORKER_NAME")}


@dataclass(frozen=True)
class GroupJob:
    """A group's job on this machine: its job file and what it scores."""

    run_uri: str
    group: int
    flow_run_id: str
    job: Job
    job_uri: str
    assigned: list[int]

    @property
    def run_id(self) -> str:
        return self.run_uri.rstrip("/").rsplit("/", 1)[-1]


def open_group(run_uri: str, group: int, ranges: list[int], scoring_fingerprint: str, flow_run_id: str) -> GroupJob:
    """Check the run is still planned as when the group was dispatched, fetch the model into this
    machine's cache, and write the job file of the group's ranges that are still uncommitted."""
    run = RunFolder.from_uri(run_uri)
    if not run.exists(RunFolder.PLAN) or not run.exists(RunFolder.JOB):
        raise InputError(f"run folder {run_uri} has no plan: a group is dispatched by its parent run, after the plan step")
    plan = run.read_plan()
    if plan.scoring_fingerprint != scoring_fingerprint:
        raise RunConflict(
            f"run {run_uri} was planned again with other settings after group {group} was dispatched; "
            "its parent dispatches the groups of the new plan itself"
        )
    planned = plan.ranges
    unknown = [i for i in ranges if not 0 <= i < len(planned)]
    if unknown or not ranges:
        raise InputError(f"group {group}: ranges {unknown or ranges} are not ranges of the plan (0 to {len(planned) - 1})")
    parent = Job.from_json(run.read_bytes(RunFolder.JOB))  # the run's settings, as its parent planned them
    launch = parent.launch
    model_path = _local_copy(launch.model_uri, "model", plan.model_fingerprint)
    adapter_path = _local_copy(launch.adapter_uri, "adapter", plan.adapter_fingerprint) if launch.adapter_uri else None
    done = committed_ranges(run, scoring_fingerprint)
    pending = plan.index_ranges([i for i in ranges if i not in done])
    job = Job(
        scoring=parent.scoring,
        launch=launch,
        run_uri=run.uri,
        model_path=model_path,
        adapter_path=adapter_path,
        total_rows=plan.total_rows,
        ranges=pending,
        scoring_fingerprint=scoring_fingerprint,
        attempt=group_attempt(group, flow_run_id),
    )
    folder = group_folder(group, flow_run_id)
    run.publish_bytes(job.to_json().encode(), folder, GROUP_JOB_FILE)
    log.info("group %d: %d of its %d ranges are uncommitted", group, len(pending), len(ranges))
    return GroupJob(run.uri, group, str(flow_run_id), job, run.uri + "/" + folder + "/" + GROUP_JOB_FILE, list(ranges))


def _local_copy(uri: str, what: str, planned_fingerprint: str | None) -> str:
    """This machine's copy of the model (or adapter), refused if it is not what the run planned with."""
    path = localize_folder(uri, what)
    check_safetensors_folder(path, what)
    if folder_fingerprint(path) != planned_fingerprint:
        raise ModelError(
            f"the {what} folder {uri} as this machine sees it ({socket.gethostname()}) differs from the one the run "
            f"was planned with; every machine of a fanned-out run must read the same {what} (use object storage)"
        )
    return path


class GroupRecord:
    """record.json of one group run, rewritten every few seconds as a heartbeat while it lives."""

    def __init__(self, run: Location, group: int, flow_run_id: str, ranges: list[int], every_s: float):
        self.run = run
        self.folder = group_folder(group, flow_run_id)
        self.every_s = every_s
        self.fields: dict = {
            "group": group,
            "flow_run_id": str(flow_run_id),
            **machine_identity(),
            "pid": os.getpid(),
            "ranges": list(ranges),
            "status": "running",
            "started_at": time.time(),
            "beats": 0,
        }
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, **fields) -> None:
        with self._lock:
            self.fields.update(fields)

    def publish(self) -> None:
        with self._lock:
            self.fields["beats"] += 1
            self.fields["heartbeat_at"] = time.time()
            record = dict(self.fields)
        self.run.publish_json(record, self.folder, RECORD_FILE)

    def start(self) -> None:
        self.publish()

        def beat() -> None:
            while not self._stop.wait(self.every_s):
                try:
                    self.publish()
                except OSError as exc:  # a missed beat is retried; the parent's timeout covers several
                    log.warning("could not write the group's heartbeat: %s", exc)

        self._thread = threading.Thread(target=beat, name="scorekeeper-group-heartbeat", daemon=True)
        self._thread.start()

    def stop(self, **final) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.update(**final, finished_at=time.time())
        self.publish()


@contextmanager
def group_record(run_uri: str, group: int, ranges: list[int], flow_run_id: str, stall_timeout_s: float) -> Iterator[GroupRecord]:
    """The group run's record for the enclosed steps: running (with a heartbeat), then completed
    or failed with the error's message."""
    record = GroupRecord(Location.from_uri(run_uri), group, flow_run_id, ranges, min(MAX_HEARTBEAT_S, stall_timeout_s / 4))
    record.start()
    try:
        yield record
    except BaseException as exc:
        record.stop(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    record.stop(status="completed")


@task(name="open group", **IO_RETRIES)
@raises_redacted
def open_group_task(run_uri: str, group: int, ranges: list[int], scoring_fingerprint: str, flow_run_id: str) -> GroupJob:
    """Fetch the model onto this machine and write the job file of the group's uncommitted ranges."""
    return open_group(run_uri, group, ranges, scoring_fingerprint, flow_run_id)


@task(name="score group ranges", cache_policy=NO_CACHE)
@raises_redacted
def score_group_task(group_job: GroupJob) -> ScoringSummary:
    """Score the group's uncommitted ranges with this machine's processes (`auto`: its GPUs)."""
    what = f"group {group_job.group} of run {group_job.run_id}"
    return score_job(group_job.job, group_job.job_uri, what)

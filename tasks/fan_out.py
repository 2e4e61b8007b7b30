"""Fan-out: score a run's uncommitted ranges on several machines, one group of ranges per child run.

With fan_out = G > 1 the parent splits the ranges still to score into G contiguous groups and
starts each as a flow run of the scoring-group deployment (`run_deployment`, linked to this task
so the Prefect UI shows them as its subflow runs); whichever worker of that deployment's pool is
free picks the next one, so more groups than machines spread themselves over the machines.
The parent then waits for all of them:

- a group run that fails (or crashes, or is cancelled) is dispatched again, up to group_retries
  times; the new run scores only the group's ranges that are still uncommitted;
- a group run that started but stopped beating (record.json, tasks/group.py) for
  group_stall_timeout_s is lost with its machine: it is marked Crashed and dispatched again;
- a group that keeps failing fails the parent once every other group has finished, naming the
  group, its machine and its ranges. Everything committed is kept, so a rerun of the parent (same
  run_name, or a retry of its flow run) dispatches only what is missing.

Which run of which group committed which range is read back from the commit records (their
attempt id names the group run), and reported in metrics.json's `scoring.groups`.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from typing import cast
from uuid import UUID

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from scorekeeper.boundary import Job
from scorekeeper.errors import InputError, ScoringFailed
from scorekeeper.launch.clock import RunningClock
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.report.render import spans
from scorekeeper.run_folder import CommitRecord, IndexRange, RunFolder
from scorekeeper.scoring_summary import ScoringSummary
from scorekeeper.tasks import artifacts
from scorekeeper.tasks.group import RECORD_FILE, group_attempt, group_folder
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.plan import committed_ranges

POLL_S = 2.0
STATUS_LOG_S = 15.0
# A worker took the run (PENDING) and starts its process, which imports Prefect and the flow before
# the run turns RUNNING and its record starts beating: a slow start on a loaded machine is not a
# death, so a PENDING run gets this long (or the stall timeout, if longer) before it counts as lost.
PENDING_GRACE_S = 300.0
_FINAL_FAILURES = ("FAILED", "CRASHED", "CANCELLED")


def needs_orchestration(request: ScoreRequest) -> str:
    """Why fan-out cannot run without a Prefect server (the message of the refusal)."""
    return (
        f"fan_out {request.fan_out} runs each group of ranges as a flow run of the deployment "
        f"'{request.fan_out_deployment}' on the workers of its work pool: it needs a Prefect server "
        "(set PREFECT_API_URL), that deployment (`prefect deploy --all` from the repository) and workers "
        "(`prefect worker start --pool scorekeeper-groups`). Without them, run with fan_out 0"
    )


def split_groups(ranges: list[IndexRange], groups: int) -> list[list[IndexRange]]:
    """Contiguous groups in range order, their sizes differing by one range at most; no empty group."""
    count = min(groups, len(ranges))
    if count == 0:
        return []
    size, extra = divmod(len(ranges), count)
    out, start = [], 0
    for g in range(count):
        end = start + size + (1 if g < extra else 0)
        out.append(ranges[start:end])
        start = end
    return out


@dataclass
class GroupRun:
    """One flow run of a group: its state as last seen, and when it last showed a sign of life."""

    flow_run_id: str
    name: str
    state: str = "SCHEDULED"
    message: str = ""
    record: dict | None = None
    last_sign: tuple = ()
    # times on the parent's RunningClock (FanOut.clock): a freeze of the parent's machine is no one's silence
    last_sign_at: float = 0.0
    dispatched_at: float = 0.0
    warned: int = 0  # start-timeout warnings given so far

    def observe(self, state: str, message: str, record: dict | None, now: float) -> None:
        """A new state, or a heartbeat since the last look, counts as a sign of life (on this
        machine's clock: the group's machine may keep another time)."""
        sign = (state, (record or {}).get("beats"))
        if sign != self.last_sign:
            self.last_sign, self.last_sign_at = sign, now
        self.state, self.message, self.record = state, message, record

    def waiting_for_worker(self, now: float) -> float:
        """Seconds this run has waited for a worker to take it (0 once one has)."""
        return now - self.dispatched_at if self.state == "SCHEDULED" else 0.0

    def lost(self, now: float, stall_timeout_s: float) -> bool:
        """A run a worker took that has shown no sign of life for too long: its machine died. Any
        state past SCHEDULED counts (RUNNING, and PAUSED or CANCELLING set from the UI or the API,
        whose process may be gone): every wait of the parent is bounded."""
        silent = now - self.last_sign_at
        if self.state == "PENDING":
            return silent > max(stall_timeout_s, PENDING_GRACE_S)
        return self.state != "SCHEDULED" and silent > stall_timeout_s

    @property
    def where(self) -> str:
        record = self.record or {}
        worker = record.get("worker") or "an unknown worker"
        return f"{worker} on {record.get('machine') or 'an unknown machine'}"


@dataclass
class Group:
    number: int
    ranges: list[IndexRange]
    runs: list[GroupRun] = field(default_factory=list)
    status: str = "running"  # running | completed | failed

    @property
    def latest(self) -> GroupRun:
        return self.runs[-1]

    @property
    def indices(self) -> list[int]:
        return [r.index for r in self.ranges]

    def describe(self) -> str:
        return f"ranges {spans(self.indices)} (rows [{self.ranges[0].start}, {self.ranges[-1].end}))"


def relative_paths(request: ScoreRequest) -> list[str]:
    """The parameters that name a relative local path: on a group's machine, in its worker's folder,
    it would name another place (or nothing)."""
    import os

    from scorekeeper.params import URI_FIELDS

    found = []
    for name in URI_FIELDS:
        uri = getattr(request, name)
        if uri is not None and "://" not in uri and not os.path.isabs(os.path.expanduser(uri)):
            found.append(f"{name} {uri!r}")
    return found


def check_fan_out(request: ScoreRequest) -> None:
    """Refuse fan-out up front where it cannot work: relative local paths, no Prefect server, or no
    group deployment."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import get_current_settings

    relative = relative_paths(request)
    if relative:
        raise InputError(
            f"fan_out {request.fan_out}: {', '.join(relative)} is a relative path, which the group machines "
            "would resolve in their own folders: give object-storage URIs (or absolute paths on storage every machine mounts)"
        )
    if not get_current_settings().api.url:
        raise InputError(needs_orchestration(request))
    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(request.fan_out_deployment)
        except ObjectNotFound:
            raise InputError(
                f"fan_out_deployment '{request.fan_out_deployment}' is not deployed on this Prefect server: run "
                "`prefect deploy --all` from the repository and start workers on its pool "
                "(`prefect worker start --pool scorekeeper-groups`)"
            ) from None


class FanOut:
    """The groups of one parent run: dispatch, watch, dispatch again, summarise."""

    def __init__(self, request: ScoreRequest, context: RunContext, job: Job, client):
        self.request, self.context, self.job, self.client = request, context, job, client
        self.run = context.run
        self.groups = [Group(n + 1, rs) for n, rs in enumerate(split_groups(job.ranges, request.fan_out))]
        self.logger = get_run_logger()
        self.pool = client.read_deployment_by_name(request.fan_out_deployment).work_pool_name or "(none)"
        self.clock = RunningClock(every_s=POLL_S)  # watch() reads it once a poll

    def dispatch(self, group: Group) -> None:
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment

        attempt = len(group.runs) + 1
        # Called from a task (sync): Prefect's dispatcher returns the flow run, not the coroutine its type allows.
        flow_run = cast(
            FlowRun,
            run_deployment(
                self.request.fan_out_deployment,
                parameters={
                    "run_uri": self.context.run_uri,
                    "group": group.number,
                    "ranges": group.indices,
                    "scoring_fingerprint": self.job.scoring_fingerprint,
                    "storage_block": self.request.storage_block,
                    "stall_timeout_s": self.request.group_stall_timeout_s,
                },
                flow_run_name=f"{self.context.run_id}-g{group.number}" + (f"-try{attempt}" if attempt > 1 else ""),
                tags=["scorekeeper", "scorekeeper-group"],
                timeout=0,  # return at once: the groups run side by side, this task watches them all
                as_subflow=True,
            ),
        )
        now = self.clock.now()
        group.runs.append(GroupRun(str(flow_run.id), flow_run.name, last_sign_at=now, dispatched_at=now))
        self.logger.info(
            "group %d of %d, %s: flow run %s (attempt %d)", group.number, len(self.groups), group.describe(), flow_run.name, attempt
        )

    def read_record(self, group: Group, run: GroupRun) -> dict | None:
        try:
            return self.run.read_json(group_folder(group.number, run.flow_run_id), RECORD_FILE)
        except FileNotFoundError:
            return None
        except OSError as exc:  # the store had a hiccup: no news this time (a long outage stalls the group too)
            self.logger.warning("could not read the record of group %d's flow run %s: %s", group.number, run.name, exc)
            return run.record

    def watch(self) -> None:
        """Until every group has completed, or failed past its retries."""
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        total = sum(r.rows for r in self.job.ranges)
        tracker = artifacts.ProgressTracker(f"Scoring {total} rows of run {self.context.run_id} in {len(self.groups)} groups")
        last_status = self.clock.now()
        while running := [g for g in self.groups if g.status == "running"]:
            time.sleep(POLL_S)
            ids = [UUID(g.latest.flow_run_id) for g in running]
            flow_runs = {str(fr.id): fr for fr in self.client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)))}
            now = self.clock.now()
            for group in running:
                run = group.latest
                flow_run = flow_runs.get(run.flow_run_id)
                state = flow_run.state if flow_run is not None else None
                state_type = state.type.value if state is not None else "SCHEDULED"
                record = self.read_record(group, run) if state_type != "SCHEDULED" else None
                first_record = run.record is None and record is not None
                run.observe(state_type, (state.message or "") if state is not None else "", record, now)
                if first_record and state_type == "RUNNING":
                    self.logger.info("group %d: running on %s", group.number, run.where)
                if state_type == "COMPLETED":
                    group.status = "completed"
                    scoring = (record or {}).get("scoring") or {}
                    self.logger.info(
                        "group %d: completed on %s, %s rows at %s rows/s",
                        group.number, run.where, scoring.get("rows_scored"), scoring.get("rows_per_s"),
                    )  # fmt: skip
                elif state_type in _FINAL_FAILURES:
                    self.failed(group, (record or {}).get("error") or run.message or state_type.lower())
                elif run.lost(now, self.request.group_stall_timeout_s):
                    self.mark_lost(run)
                    self.failed(group, run.message)
                else:
                    self.check_started(group, run, now)
            done = self.committed_rows()
            tracker.update(100.0 * done / max(total, 1))
            if now - last_status >= STATUS_LOG_S:
                last_status = now
                self.logger.info("%s; %d/%d rows committed", self.status_line(), done, total)

    def failed(self, group: Group, reason: str) -> None:
        run = group.latest
        run.message = reason
        if len(group.runs) <= self.request.group_retries:
            self.logger.warning("group %d: flow run %s on %s failed (%s); dispatching it again", group.number, run.name, run.where, reason)
            self.dispatch(group)
        else:
            group.status = "failed"
            self.logger.error("group %d: flow run %s on %s failed (%s); no retries left", group.number, run.name, run.where, reason)

    def start_worker_hint(self) -> str:
        return f"start one with `prefect worker start --pool {self.pool} --limit 1` on a scoring machine"

    def check_started(self, group: Group, run: GroupRun, now: float) -> None:
        """Every wait is bounded: a group no worker has started within group_start_timeout_s fails the
        run (a retry would wait the same way), with a warning at each quarter of the time before."""
        waited, limit = run.waiting_for_worker(now), self.request.group_start_timeout_s
        if not waited:
            return
        if waited > limit:
            from prefect.states import Cancelled

            run.message = (
                f"no worker of pool '{self.pool}' started it within group_start_timeout_s ({limit:.0f} s): " + self.start_worker_hint()
            )
            self.client.set_flow_run_state(run.flow_run_id, Cancelled(message=run.message), force=True)  # a late worker must not take it
            run.state, group.status = "CANCELLED", "failed"
            self.logger.error("group %d: flow run %s %s", group.number, run.name, run.message)
        elif waited > limit * (run.warned + 1) / 4:
            run.warned += 1
            self.logger.warning(
                "group %d: flow run %s has waited %.0f s for a worker of pool '%s' (the run fails after %.0f s): %s",
                group.number, run.name, waited, self.pool, limit, self.start_worker_hint(),
            )  # fmt: skip

    def mark_lost(self, run: GroupRun) -> None:
        from prefect.states import Crashed

        run.message = (
            f"lost: no sign of life for {self.clock.now() - run.last_sign_at:.0f} s while {run.state.lower()} "
            "(its machine or worker died, or cannot reach the object store)"
        )
        self.client.set_flow_run_state(run.flow_run_id, Crashed(message=run.message), force=True)
        run.state = "CRASHED"

    def committed_rows(self) -> int:
        names = set(self.run.list_names(RunFolder.COMMIT_DIR))
        return sum(r.rows for r in self.job.ranges if posixpath.basename(RunFolder.commit_name(r.index)) in names)

    def status_line(self) -> str:
        counts: dict[str, int] = {}
        for g in self.groups:
            key = g.status if g.status != "running" else g.latest.state.lower()
            counts[key] = counts.get(key, 0) + 1
        return "groups: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))

    def summary(self, seconds: float) -> ScoringSummary:
        """The scoring step's numbers for the report, with one entry per group (metrics.json's
        `scoring.groups`), read back from the commit records and the groups' records."""
        commits = committed_ranges(self.run, self.job.scoring_fingerprint)
        groups = [group_summary(g, commits) for g in self.groups]
        mine = [commits[i] for g in self.groups for i in g.indices if i in commits]
        rows = sum(c.rows for c in mine)
        tokens = sum(c.tokens for c in mine)
        last_scoring = [(g.latest.record or {}).get("scoring") or {} for g in self.groups]
        return ScoringSummary.measured(
            rows,
            tokens,
            sum(s.get("padded_tokens", 0) for s in last_scoring),
            sum(c.truncated for c in mine),
            seconds,
            processes=sum(s.get("processes", 0) for s in last_scoring),
            fan_out=self.request.fan_out,
            groups=groups,
        )

    def failure(self) -> ScoringFailed | None:
        failed = [g for g in self.groups if g.status == "failed"]
        if not failed:
            return None
        commits = committed_ranges(self.run, self.job.scoring_fingerprint)
        parts = []
        for g in failed:
            run = g.latest
            missing = [i for i in g.indices if i not in commits]
            parts.append(
                f"group {g.number} of {len(self.groups)} ({g.describe()}) failed {len(g.runs)} time(s), last on {run.where} "
                f"in flow run {run.name} ({run.flow_run_id}): {run.message}; ranges {spans(missing) or 'none'} are not committed"
            )
        return ScoringFailed(
            "; ".join(parts) + ". Every committed range is kept: rerun with the same run_name (or retry this flow run) "
            "to score only what is missing"
        )


def group_summary(group: Group, commits: dict[int, CommitRecord]) -> dict:
    """Which run (machine, worker) of a group committed which of its ranges, and how fast."""
    runs = []
    for run in group.runs:
        prefix = group_attempt(group.number, run.flow_run_id) + "-"
        committed = [i for i in group.indices if i in commits and commits[i].attempt.startswith(prefix)]
        scoring = (run.record or {}).get("scoring") or {}
        runs.append(
            {
                "flow_run_id": run.flow_run_id,
                "flow_run_name": run.name,
                "machine": (run.record or {}).get("machine"),
                "worker": (run.record or {}).get("worker"),
                "state": run.state,
                "ranges": committed,
                "rows": sum(commits[i].rows for i in committed),
                "rows_per_s": scoring.get("rows_per_s"),
                "dtype": scoring.get("dtype"),
                **({"error": run.message} if run.state != "COMPLETED" and run.message else {}),
            }
        )
    last = runs[-1]
    return {
        "group": group.number,
        "status": group.status,
        "machine": last["machine"],
        "worker": last["worker"],
        "flow_run_id": last["flow_run_id"],
        "ranges": group.indices,
        "rows": sum(commits[i].rows for i in group.indices if i in commits),
        "rows_per_s": last["rows_per_s"],
        "dtype": last["dtype"],
        "attempts": len(runs),
        "runs": runs,
    }


def score_groups(request: ScoreRequest, context: RunContext, job: Job) -> ScoringSummary:
    """Dispatch the groups, wait for all of them, and summarise; raise naming the groups that failed."""
    from prefect.client.orchestration import get_client

    logger = get_run_logger()
    if not job.ranges:
        logger.info("every range is committed already; nothing to score")
        return ScoringSummary.measured(0, 0, 0, 0, 0.0, processes=0, fan_out=request.fan_out, groups=[])
    started = time.time()
    with get_client(sync_client=True) as client:
        fan_out = FanOut(request, context, job, client)
        logger.info(
            "scoring %d ranges in %d groups on the workers of deployment '%s'",
            len(job.ranges),
            len(fan_out.groups),
            request.fan_out_deployment,
        )
        for group in fan_out.groups:
            fan_out.dispatch(group)
        fan_out.watch()
    summary = fan_out.summary(time.time() - started)
    if (error := fan_out.failure()) is not None:
        raise error
    return summary


@task(name="check fan-out", cache_policy=NO_CACHE)
@raises_redacted
def check_fan_out_task(request: ScoreRequest) -> None:
    """A Prefect server and the scoring-group deployment are there, before any input is read."""
    check_fan_out(request)


@task(name="score groups", cache_policy=NO_CACHE)
@raises_redacted
def score_groups_task(request: ScoreRequest, context: RunContext, job: Job) -> ScoringSummary:
    """Score the uncommitted ranges in fan_out groups, each a child flow run on some machine."""
    return score_groups(request, context, job)

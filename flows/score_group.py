"""The scoring-group flow: one group of a fanned-out run's ranges, scored on this machine.

A parent run with fan_out > 1 starts it through the scoring-group deployment (prefect.yaml), once
per group, as a child flow run; whichever worker of the deployment's pool is free picks it up.
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from scorekeeper.tasks.credentials import storage_credentials
from scorekeeper.tasks.group import group_record, open_group_task, score_group_task


@flow(name="scorekeeper-group", log_prints=False)
def score_group(
    run_uri: str,
    group: int,
    ranges: list[int],
    scoring_fingerprint: str,
    storage_block: str | None = None,
    stall_timeout_s: float = 180.0,
) -> dict:
    """Score one group of a run's planned ranges on this machine, with all of its GPUs.

    Args:
        run_uri: the parent run's folder ({output_uri}/{run_id}), planned by the parent.
        group: the group's number (1 to fan_out).
        ranges: the indices of the plan's ranges this group scores (those already committed are skipped).
        scoring_fingerprint: the plan's scoring fingerprint; a run planned again since is refused.
        storage_block: the Prefect block with the object-storage credentials, as in the parent run.
        stall_timeout_s: the parent's group_stall_timeout_s: this run's heartbeat beats well within it.
    """
    flow_run_id = str(flow_run.get_id())
    with storage_credentials(storage_block), group_record(run_uri, group, ranges, flow_run_id, stall_timeout_s) as record:
        group_job = open_group_task(run_uri, group, ranges, scoring_fingerprint, flow_run_id)
        record.update(pending=[r.index for r in group_job.job.ranges])
        throughput = score_group_task(group_job)
        record.update(scoring=throughput.as_dict())  # the group's record is JSON
    return {"group": group, "flow_run_id": flow_run_id, **throughput.as_dict()}

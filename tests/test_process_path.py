"""The process-pool path as the README gives it, against a real Prefect server: the pools its
commands create are all `prefect deploy --all` needs; and with no worker on the group pool, a
fanned-out run fails once group_start_timeout_s has passed, naming the pool and the command that
starts a worker, with warnings before (every wait is bounded).
"""

from __future__ import annotations

import re
import uuid

import pytest

from scorekeeper.errors import ScoringFailed
from tests.helpers import make_rows, write_rows

pytestmark = pytest.mark.integration


def test_deploy_all_needs_only_the_process_pools_the_readme_creates(deployed):
    """The session's server was given README's pool commands only, then `prefect deploy --all`
    (tests/prefect_deployed.py; it fails if prefect.yaml names a pool not created), and held these."""
    from scorekeeper.params import ScoreRequest

    assert deployed.deploy_all == {
        "scorekeeper/nightly": "scorekeeper",
        "scorekeeper/adhoc": "scorekeeper",
        "scorekeeper/monitor": "scorekeeper",
        ScoreRequest.model_fields["fan_out_deployment"].default: "scorekeeper-groups",
    }


def test_a_group_no_worker_starts_fails_the_run_naming_the_pool_and_the_command(deployed, tmp_path, models):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName, LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from scorekeeper.flows.score import score_dataset

    write_rows(tmp_path / "in.csv", make_rows(6))
    run_name = "unstarted-" + uuid.uuid4().hex[:6]
    with temporary_settings(updates={PREFECT_API_URL: deployed.api_url}):
        with pytest.raises(ScoringFailed) as failed:
            score_dataset(
                input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "out"),
                run_name=run_name, fan_out=2, rows_per_range=3, group_start_timeout_s=6,
            )  # fmt: skip
        with get_client(sync_client=True) as client:  # this run's, on a server other tests use too
            groups = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=run_name + "-g")))
            parent = {client.read_task_run(r.parent_task_run_id).flow_run_id for r in groups}
            logs = [log.message for log in client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=list(parent))))]
    message = str(failed.value)
    assert "no worker of pool 'scorekeeper-groups' started it within group_start_timeout_s (6 s)" in message
    assert "prefect worker start --pool scorekeeper-groups" in message
    assert len(groups) == 2 and {r.state.type.value for r in groups} == {"CANCELLED"}  # a late worker takes neither
    warnings = [m for m in logs if re.search(r"has waited \d+ s for a worker of pool 'scorekeeper-groups'", m)]
    assert warnings, logs[-20:]


def test_fan_out_with_a_relative_local_path_is_refused_up_front(deployed, tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from scorekeeper.errors import InputError
    from scorekeeper.params import ScoreRequest
    from scorekeeper.tasks.fan_out import check_fan_out

    monkeypatch.chdir(tmp_path)
    with temporary_settings(updates={PREFECT_API_URL: deployed.api_url}):
        request = ScoreRequest(input_uri="s3://b/in.csv", model_uri="./model", output_uri="s3://b/out", fan_out=2)
        with pytest.raises(InputError, match=r"model_uri '\./model' is a relative path, which the group machines"):
            check_fan_out(request)
        check_fan_out(request.model_copy(update={"model_uri": str(tmp_path / "model")}))  # absolute: accepted

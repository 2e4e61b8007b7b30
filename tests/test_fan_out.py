"""Fan-out over several machines (fan_out > 1): groups of ranges as child flow runs of the
scoring-group deployment, on whichever worker of its pool is free.

The integration tests share one stack: the session's real `prefect server start` with the group
deployment deployed (tests/prefect_deployed.py), the moto S3 server holding the data, the model and
the outputs, and two "machines": process workers on the groups pool, each started from a folder of
its own with its own SCOREKEEPER_CACHE and no AWS credentials (they come from a storage block). The parent run is the flow called in this process against that server.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest
import yaml

from scorekeeper.cli import main
from scorekeeper.errors import ScoringFailed
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import ScoreRequest
from scorekeeper.report.report import groups_markdown, render_html
from scorekeeper.run_folder import CommitRecord, cut_ranges
from scorekeeper.scoring_summary import GroupSummary, ScoringSummary
from scorekeeper.tasks.fan_out import PENDING_GRACE_S, GroupRun, spans, split_groups
from tests.helpers import make_rows, probabilities, run_flow, write_rows
from tests.prefect_deployed import PREFECT, REPO, AwsCredentialsShape, PrefectServer, lose_at_once, scoring_processes, stop_process_group
from tests.s3server import MotoServer

GROUP_POOL = "scorekeeper-groups"
GROUP_DEPLOYMENT = "scorekeeper-group/group"
BLOCK = "fan-out-s3"
ROWS = 24
ROWS_PER_RANGE = 2


# -- the pure parts ----------------------------------------------------------------------------------


def test_split_groups_is_contiguous_balanced_and_covers_every_range_once():
    ranges = cut_ranges(23, 2)  # 12 ranges, the last one short
    groups = split_groups(ranges, 5)
    assert [len(g) for g in groups] == [3, 3, 2, 2, 2]
    assert [r for g in groups for r in g] == ranges  # in order, each once
    assert split_groups(ranges, 5) == groups  # deterministic
    assert [len(g) for g in split_groups(ranges[:3], 8)] == [1, 1, 1]  # no empty group
    assert split_groups([], 4) == []
    assert spans([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_a_started_group_run_is_lost_only_after_the_stall_timeout_without_a_sign_of_life():
    run = GroupRun("id", "name")
    run.observe("SCHEDULED", "", None, now=0.0)
    assert not run.lost(now=1000.0, stall_timeout_s=10)  # waiting for a free machine is not a failure
    run.observe("RUNNING", "", {"beats": 1}, now=1000.0)
    run.observe("RUNNING", "", {"beats": 2}, now=1008.0)  # a heartbeat
    assert not run.lost(now=1017.0, stall_timeout_s=10)
    run.observe("RUNNING", "", {"beats": 2}, now=1019.0)  # no new beat
    assert run.lost(now=1019.0, stall_timeout_s=10)
    # Taken by a worker but not started yet: a slow start on a loaded machine is no death.
    pending = GroupRun("id", "name")
    pending.observe("PENDING", "", None, now=0.0)
    assert not pending.lost(now=PENDING_GRACE_S - 1, stall_timeout_s=10) and pending.lost(now=PENDING_GRACE_S + 1, stall_timeout_s=10)
    # Paused (or being cancelled) from the UI: still beating is alive; silent past the stall timeout is lost.
    for state in ("PAUSED", "CANCELLING"):
        paused = GroupRun("id", "name")
        paused.observe("RUNNING", "", {"beats": 1}, now=0.0)
        paused.observe(state, "", {"beats": 1}, now=5.0)
        paused.observe(state, "", {"beats": 2}, now=14.0)
        assert not paused.lost(now=23.0, stall_timeout_s=10) and paused.lost(now=25.0, stall_timeout_s=10), state


def test_fan_out_settings_change_no_prediction_so_a_rerun_with_others_resumes():
    from scorekeeper.request_record import check_resumable
    from scorekeeper.tasks.open_run import RunContext, request_record

    base = dict(input_uri="in.csv", model_uri="m", output_uri="out")
    context = RunContext("r", "out/r", "m", "fp", None, None, ["a", "b"], False)
    one, many = ScoreRequest(**base), ScoreRequest(**base, fan_out=8, group_retries=0, group_stall_timeout_s=30)
    assert request_record(one, context).scoring_fingerprint("in") == request_record(many, context).scoring_fingerprint("in")
    check_resumable(request_record(one, context), request_record(many, context))
    with pytest.raises(ValueError, match="flow name/deployment name"):
        ScoreRequest(**base, fan_out_deployment="no-slash")


def test_report_shows_which_machine_scored_which_ranges():
    groups = [
        {"group": 1, "worker": "gpu-a", "machine": "host-a", "ranges": [0, 1, 2], "rows": 6, "rows_per_s": 12.5, "attempts": 1},
        {"group": 2, "worker": "gpu-b", "machine": "host-b", "ranges": [3, 4], "rows": 3, "rows_per_s": None, "attempts": 2},
    ]
    groups = [GroupSummary.model_validate(g | {"status": "completed", "flow_run_id": "f", "dtype": None, "runs": []}) for g in groups]
    scoring = ScoringSummary.measured(9, 90, 90, 0, 1.0, processes=2, fan_out=2, groups=groups)
    markdown = "\n".join(groups_markdown(scoring))
    assert "| 1 | gpu-a (host-a) | 0-2 | 6 | 12.5 | 1 |" in markdown and "| 2 | gpu-b (host-b) | 3-4 | 3 | n/a | 2 |" in markdown
    assert groups_markdown(ScoringSummary.measured(3, 30, 30, 0, 1.0)) == [] and groups_markdown(None) == []
    metrics = {"rows": 9, "scored": 9, "evaluated": 0, "ground_truth_source": None, "scoring_only": True, "head": "single_label"}
    metrics |= {"per_class": {}, "confusion": {}, "unknown_labels": {}}
    run_info = {"run_id": "r", "input_uri": "in", "model_uri": "m", "mode": "replica", "num_processes": 2}
    page = render_html(MetricsDocument.model_validate(metrics | {"scoring": scoring.as_dict()}), run_info)
    assert 'id="groups"' in page and "<td>gpu-b (host-b)</td><td>3-4</td>" in page
    assert 'id="groups"' not in render_html(MetricsDocument.model_validate(metrics), run_info)


def test_prefect_yaml_group_deployment_runs_from_the_installed_package_on_its_own_pool():
    from prefect.flows import load_flow_from_entrypoint

    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    (group,) = [d for d in config["deployments"] if d["name"] == "group"]
    assert f"{group['flow_name']}/{group['name']}" == ScoreRequest.model_fields["fan_out_deployment"].default == GROUP_DEPLOYMENT
    assert group["work_pool"]["name"] == GROUP_POOL and group["pull"] == [] and not group["schedules"]
    # A module path, no file path: a fresh machine needs the package installed, not a checkout here.
    assert ":" not in group["entrypoint"]
    assert load_flow_from_entrypoint(group["entrypoint"]).name == group["flow_name"]


def test_a_group_refuses_a_model_that_differs_from_the_planned_one_or_a_run_planned_again(tmp_path, models):
    import shutil

    from scorekeeper.errors import ModelError, RunConflict
    from scorekeeper.tasks.group import group_attempt, open_group
    from tests.helpers import open_run_and_plan

    model = shutil.copytree(models["bert"], tmp_path / "model")
    rows = write_rows(tmp_path / "in.jsonl", make_rows(6, seed=3))
    _, context, _, job = open_run_and_plan(input_uri=str(rows), model_uri=str(model), output_uri=str(tmp_path / "runs"), rows_per_range=2)
    opened = open_group(context.run_uri, 2, [1, 2], job.scoring_fingerprint, "0f1e2d3c-aaaa-bbbb-cccc-000000000000")
    assert [r.index for r in opened.job.ranges] == [1, 2] and opened.job.model_path == str(model)
    assert opened.job.attempt == group_attempt(2, "0f1e2d3c-aaaa-bbbb-cccc-000000000000")
    assert opened.job_uri.endswith("work/groups/g2/0f1e2d3c-aaaa-bbbb-cccc-000000000000/job.json")
    with pytest.raises(RunConflict, match="planned again with other settings"):
        open_group(context.run_uri, 2, [1, 2], "another-fingerprint", "x")
    (model / "config.json").write_text((model / "config.json").read_text() + " ")  # this machine's copy differs
    with pytest.raises(ModelError, match="differs from the one the run was planned with"):
        open_group(context.run_uri, 2, [1, 2], job.scoring_fingerprint, "x")


def test_cli_refuses_fan_out_without_a_prefect_server(tmp_path, monkeypatch, capsys):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from scorekeeper.errors import InputError
    from scorekeeper.tasks.fan_out import check_fan_out

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        code = main(["run", "--input-uri", str(tmp_path / "in.csv"), "--model-uri", str(tmp_path / "m"), "--output-uri", str(tmp_path / "out"), "--fan-out", "3"])  # fmt: skip
        # The flow itself refuses too (called from Python, or by a deployment on a misconfigured worker).
        with pytest.raises(InputError, match="needs a Prefect server"):
            check_fan_out(ScoreRequest(input_uri="s3://b/in.csv", model_uri="s3://b/m", output_uri="s3://b/out", fan_out=3))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "needs a Prefect server" in err and GROUP_DEPLOYMENT in err and "worker" in err
    assert not (tmp_path / "out").exists()


# -- the stack: the session's deployed Prefect server, S3, two machines -----------------------------


class Machine:
    """`prefect worker start` on the groups pool, from a folder of its own: one scoring machine.
    --limit 1: a machine scores one group at a time."""

    def __init__(self, server: PrefectServer, folder: Path, name: str):
        self.server, self.folder, self.name = server, folder, name
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = open(self.folder / f"worker-{uuid.uuid4().hex[:6]}.log", "wb")
        env = {**os.environ, **self.server.env, "SCOREKEEPER_CACHE": str(self.folder / "cache")}
        self.process = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", GROUP_POOL, "--type", "process", "--limit", "1", "--name", self.name],
            cwd=self.folder, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def scoring_processes(self) -> list[psutil.Process]:
        try:
            return scoring_processes(psutil.Process(self.process.pid).children(recursive=True))
        except psutil.Error:
            return []

    def die(self) -> None:
        """The machine is gone: the worker, its flow runs and their scoring processes, at once."""
        lose_at_once(psutil.Process(self.process.pid).children(recursive=True) + [psutil.Process(self.process.pid)])
        self.process.wait()
        self._log.close()

    def stop(self) -> None:
        if self.alive():
            stop_process_group(self.process, first=signal.SIGINT)
        self._log.close()


def kill_when(machine: Machine, what: str) -> tuple[threading.Thread, list[str]]:
    """In the background: as soon as `machine` runs a scoring process, kill that process
    (`what="scoring"`) or the whole machine (`what="machine"`), once."""
    done: list[str] = []

    def watch() -> None:
        deadline = time.time() + 300
        while time.time() < deadline:
            found = machine.scoring_processes()  # mid-group: the group is open, its processes start scoring
            if found and what == "machine":
                machine.die()
                done.append(what)
                return
            for p in found:
                try:
                    p.kill()
                    done.append(what)
                except psutil.Error:
                    pass
            if done:
                return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, done


class Stack:
    def __init__(self, root: Path, server: PrefectServer, s3: MotoServer, bucket: str, rows: list[dict], reference):
        self.root, self.server, self.s3, self.bucket, self.rows, self.reference = root, server, s3, bucket, rows, reference
        self.machines = {name: Machine(server, root / name, name) for name in ("machine-a", "machine-b")}

    def ensure_machines(self) -> None:
        for m in self.machines.values():
            if not m.alive():
                m.start()

    def parameters(self, run_name: str, **overrides) -> dict:
        return {
            "input_uri": f"s3://{self.bucket}/eval/reviews.jsonl",
            "id_column": "review_id",
            "model_uri": f"s3://{self.bucket}/models/bert",
            "output_uri": f"s3://{self.bucket}/runs",
            "run_name": run_name,
            "rows_per_range": ROWS_PER_RANGE,
            "num_processes": 1,
            "storage_block": BLOCK,
            "group_stall_timeout_s": 20,
            **overrides,
        }

    def read(self, run: str, *path: str):
        data = self.s3.filesystem().cat_file("/".join([self.bucket, "runs", run, *path]))
        return json.loads(data) if path[-1].endswith(".json") else data

    def commits(self, run: str) -> dict[int, dict]:
        fs = self.s3.filesystem()
        return {
            json.loads(fs.cat_file(p))["range_index"]: json.loads(fs.cat_file(p)) for p in fs.find(f"{self.bucket}/runs/{run}/work/commits")
        }

    def check_predictions(self, run: str) -> None:
        """One prediction per row, in row order, equal to a single-process run's."""
        table = pq.read_table(io.BytesIO(self.read(run, "predictions.parquet")))
        assert table.column("row_index").to_pylist() == list(range(len(self.rows)))
        assert table.column("id").to_pylist() == [r["review_id"] for r in self.rows]
        assert table.column("predicted_label").to_pylist() == self.reference.column("predicted_label").to_pylist()
        assert np.abs(probabilities(table) - probabilities(self.reference)).max() < 1e-9
        # the groups' embeddings and token counts, gathered, are the single-process run's (SPEC 14)
        single = next((self.root / "local" / "runs").iterdir())
        embeddings = pq.read_table(io.BytesIO(self.read(run, "embeddings.parquet")))
        alone = pq.read_table(single / "embeddings.parquet")
        assert embeddings.column("row_index").to_pylist() == alone.column("row_index").to_pylist() == list(range(len(self.rows)))
        got, want = (np.array(t.column("embedding").to_pylist()) for t in (embeddings, alone))
        assert np.abs(got - want).max() < 1e-4
        # the published counts, or the gather's sum where only the gather ran (RunFolder.TOKEN_COUNTS_WORK)
        published = self.s3.filesystem().exists(f"{self.bucket}/runs/{run}/report/token_counts.parquet")
        words = pq.read_table(io.BytesIO(self.read(run, "report" if published else "work", "token_counts.parquet")))
        assert words.equals(pq.read_table(single / "report" / "token_counts.parquet"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory, models, deployed):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = tmp_path_factory.mktemp("fan-out")
    rows = make_rows(ROWS, seed=21)
    single = run_flow(  # the single-process run to compare with
        input_uri=str(write_rows(root / "local" / "reviews.jsonl", rows)), id_column="review_id",
        model_uri=models["bert"], output_uri=str(root / "local" / "runs"), rows_per_range=ROWS_PER_RANGE,
    )  # fmt: skip
    s3 = MotoServer(root / "moto.log")
    built = None
    try:
        bucket = s3.create_bucket("fan-out")
        s3.filesystem().pipe_file(f"{bucket}/eval/reviews.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
        s3.upload_folder(models["bert"], f"s3://{bucket}/models/bert")
        with temporary_settings(updates={PREFECT_API_URL: deployed.api_url}):
            AwsCredentialsShape.save(BLOCK, s3.key, s3.secret, s3.endpoint)
            built = Stack(root, deployed.server, s3, bucket, rows, single.predictions)
            yield built
    finally:
        if built is not None:
            for machine in built.machines.values():
                machine.stop()
        s3.stop()


def _flow_runs(ids: list[str]):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[uuid.UUID(i) for i in ids])))


@pytest.mark.integration
def test_fan_out_is_refused_before_reading_when_the_group_deployment_is_not_deployed(stack):
    from scorekeeper.errors import InputError
    from scorekeeper.tasks.fan_out import check_fan_out

    check_fan_out(ScoreRequest(**stack.parameters("checked", fan_out=2)))
    with pytest.raises(InputError, match="fan_out_deployment 'scorekeeper-group/elsewhere' is not deployed"):
        check_fan_out(ScoreRequest(**stack.parameters("checked", fan_out=2, fan_out_deployment="scorekeeper-group/elsewhere")))


@pytest.mark.integration
def test_three_groups_over_two_machines_score_every_row_once_and_a_killed_group_is_retried(stack):
    """One group more than machines: machine-b's first group is killed while scoring, so machine-b
    is free again while the third group still waits, and scores it (or the retry)."""
    from scorekeeper.flows.score import score_dataset

    stack.ensure_machines()
    watcher, killed = kill_when(stack.machines["machine-b"], "scoring")
    result = score_dataset(**stack.parameters("three-groups", fan_out=3))
    watcher.join(timeout=1)
    assert killed == ["scoring"]
    stack.check_predictions("three-groups")
    assert result["rows"] == ROWS

    groups = stack.read("three-groups", "report", "metrics.json")["scoring"]["groups"]
    assert [g["group"] for g in groups] == [1, 2, 3] and all(g["status"] == "completed" for g in groups)
    assert sorted(i for g in groups for i in g["ranges"]) == list(range(ROWS // ROWS_PER_RANGE))
    assert sum(g["rows"] for g in groups) == ROWS
    runs = [run for g in groups for run in g["runs"]]
    # Every range was committed by exactly one group run, and both machines scored some of them.
    committed = sorted(i for run in runs for i in run["ranges"])
    assert committed == list(range(ROWS // ROWS_PER_RANGE))
    assert {run["worker"] for run in runs if run["rows"]} == {"machine-a", "machine-b"}
    # The group whose scoring process was killed failed on machine-b and was dispatched again.
    (retried,) = [g for g in groups if g["attempts"] > 1]
    assert retried["runs"][0]["worker"] == "machine-b" and retried["runs"][0]["state"] == "FAILED"
    assert "killed by SIGKILL" in retried["runs"][0]["error"]
    assert retried["runs"][-1]["state"] == "COMPLETED"
    report = stack.read("three-groups", "report", "report.md").decode()
    assert "## Scoring groups" in report and "machine-b" in report
    # The machines ran the group flow from the installed package: nothing pointed them at this checkout.
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(GROUP_DEPLOYMENT)
    assert deployment.pull_steps == [] and str(REPO) not in str(deployment.path or "")


@pytest.mark.integration
def test_two_copies_of_the_same_group_at_once_count_each_range_once(stack):
    from prefect.deployments import run_deployment

    from scorekeeper.tasks.credentials import storage_credentials
    from scorekeeper.tasks.gather import gather_predictions
    from tests.helpers import open_run_and_plan

    stack.ensure_machines()
    with storage_credentials(BLOCK):
        _, context, _, job = open_run_and_plan(**{k: v for k, v in stack.parameters("same-group").items() if k != "num_processes"})
        ranges = [r.index for r in job.ranges]
        parameters = {
            "run_uri": context.run_uri, "group": 1, "ranges": ranges,
            "scoring_fingerprint": job.scoring_fingerprint, "storage_block": BLOCK,
        }  # fmt: skip
        copies = [str(run_deployment(GROUP_DEPLOYMENT, parameters=parameters, timeout=0, as_subflow=False).id) for _ in range(2)]
        deadline = time.time() + 300
        runs = _flow_runs(copies)
        while not all(fr.state.is_final() for fr in runs):
            assert time.time() < deadline, [fr.state for fr in runs]
            time.sleep(1)
            runs = _flow_runs(copies)
        assert all(fr.state.is_completed() for fr in runs), [fr.state for fr in runs]
        # Gathering proves the tiling: each range committed once, whoever committed it.
        gathered = gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)
    assert gathered.rows == ROWS
    stack.check_predictions("same-group")
    records = [stack.read("same-group", "work", "groups", "g1", copy, "record.json") for copy in copies]
    assert {r["worker"] for r in records} == {"machine-a", "machine-b"}  # the copies ran side by side
    commits = stack.commits("same-group")
    assert sorted(commits) == ranges
    # The commits were shared out between the copies; a copy that lost a range removed its shard
    # and the parts committed with it: the shard folder holds exactly what the commits name.
    fs = stack.s3.filesystem()
    named = sorted(f"{stack.bucket}/runs/same-group/{f}" for c in commits.values() for f in CommitRecord.model_validate(c).files())
    assert sorted(fs.find(f"{stack.bucket}/runs/same-group/work/shards")) == named


@pytest.mark.integration
def test_a_lost_machine_fails_the_parent_naming_its_group_and_a_rerun_scores_only_what_is_missing(stack):
    from scorekeeper.flows.score import score_dataset

    stack.ensure_machines()
    lost = stack.machines["machine-b"]
    watcher, killed = kill_when(lost, "machine")
    with pytest.raises(ScoringFailed) as failure:
        score_dataset(**stack.parameters("lost-machine", fan_out=2, group_retries=0, group_stall_timeout_s=12))
    watcher.join(timeout=1)
    assert killed == ["machine"]
    message = str(failure.value)
    assert "of 2" in message and "on machine-b" in message and "lost: no sign of life" in message, message
    assert "rerun with the same run_name" in message
    missing = sorted(set(range(ROWS // ROWS_PER_RANGE)) - set(stack.commits("lost-machine")))
    assert missing and f"ranges {spans(missing)} are not committed" in message

    lost.start()  # the machine comes back (or another one joins)
    score_dataset(**stack.parameters("lost-machine", fan_out=2))
    job = stack.read("lost-machine", "work", "job.json")
    assert [r[0] for r in job["ranges"]] == missing  # the rerun scored only what was missing
    stack.check_predictions("lost-machine")

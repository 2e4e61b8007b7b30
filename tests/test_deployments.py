"""prefect.yaml against a real Prefect server: deploy, a process worker, runs with parameters and a
storage block, and a failed run retried through Prefect that resumes where it stopped.

The session's `prefect server start` on loopback (temporary PREFECT_HOME, SQLite), with prefect.yaml
and infra/prefect-containers.yaml deployed (tests/prefect_deployed.py), serves the module; the data, model, adapter and outputs live in moto's S3 server (tests/s3server.py), and the worker
has no AWS credentials of its own: they come from an AwsCredentials block named in the parameters.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from scorekeeper.params import ScoreRequest
from tests.helpers import LABELS, make_rows, probabilities, reference_probabilities
from tests.prefect_deployed import PREFECT, REPO, AwsCredentialsShape, PrefectServer, stop_process_group
from tests.s3server import MotoServer
from tests.waiting import poll

FLOW = "scorekeeper"
POOL = "scorekeeper"
ENTRYPOINT = "flows/score.py:score_dataset"
BLOCK = "moto-s3"


def _deployments() -> dict[str, dict]:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    return {d["name"]: d for d in config["deployments"]}


def test_the_monitor_deployment_checks_new_data_for_drift_every_night():
    """Scheduled, unlabelled, against a fixed reference run, failing on any drifted signal (docs/drift.md)."""
    monitor = _deployments()["monitor"]
    assert (monitor["entrypoint"], monitor["flow_name"], monitor["work_pool"]["name"]) == (ENTRYPOINT, FLOW, POOL)
    assert monitor["schedules"] and monitor["schedules"][0]["active"]
    request = ScoreRequest(**monitor["parameters"])
    assert request.label_column is None and request.drift_reference not in (None, "previous")
    assert request.gates == {"drifted_signals": "<=0"}
    assert request.label_budget > 0 and request.label_sampling == "active"  # a labelling plan every night (docs/labelling.md)
    # Dated (docs/inputs.md): the day that ended, into a run of its own named after it.
    assert request.dated_templates() == {"input_uri": "s3://scorekeeper/incoming/{date-1d}/", "run_name": "monitor-{date-1d}"}
    assert ScoreRequest(**_deployments()["nightly"]["parameters"]).dated_templates() == {"run_name": "nightly-{date}"}


def test_prefect_yaml_defines_a_scheduled_and_an_adhoc_deployment_of_the_flow():
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    config = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = _deployments()
    assert {"nightly", "adhoc"} <= set(deployments)  # beside them: the scoring-group deployment (test_fan_out.py)
    for d in (deployments["nightly"], deployments["adhoc"]):
        assert (d["entrypoint"], d["flow_name"], d["work_pool"]["name"]) == (ENTRYPOINT, FLOW, POOL)
    nightly, adhoc = deployments["nightly"], deployments["adhoc"]
    assert [s["cron"] for s in nightly["schedules"]] == ["0 2 * * *"] and nightly["schedules"][0]["active"]
    ScoreRequest(**nightly["parameters"])  # the scheduled run's parameters are a valid request
    assert not adhoc["schedules"] and not adhoc["parameters"]
    # A fresh clone runs from wherever `prefect deploy` was run: the build step records it.
    (build,) = config["build"]
    (pull,) = config["pull"]
    step_id = build["prefect.deployments.steps.run_shell_script"]["id"]
    assert pull["prefect.deployments.steps.set_working_directory"]["directory"] == "{{ " + step_id + ".stdout }}"
    flow = load_flow_from_entrypoint(str(REPO / ENTRYPOINT))
    schema = parameter_schema(flow)
    assert flow.name == FLOW and list(schema.properties) == list(ScoreRequest.model_fields)
    assert set(schema.required) == {n for n, f in ScoreRequest.model_fields.items() if f.is_required()}


# -- the stack: the session's deployed Prefect server, S3, a worker, the block, data -------------------


class Worker:
    """`prefect worker start --pool scorekeeper` as an operator starts it, in a folder of its own."""

    def __init__(self, server: PrefectServer, folder: Path, extra_env: dict[str, str]):
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", POOL, "--type", "process"],
            cwd=folder, env={**os.environ, **server.env, **extra_env},
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def stop(self) -> None:
        stop_process_group(self.process, first=signal.SIGINT)
        self._log.close()


class Stack:
    def __init__(self, root: Path, server: PrefectServer, s3: MotoServer, bucket: str, rows: list[dict], models: dict):
        self.root, self.server, self.s3, self.bucket, self.rows, self.models = root, server, s3, bucket, rows, models
        self.worker: Worker | None = None
        self.worker_env: dict[str, str] | None = None
        self.worker_logs: list[Path] = []

    def use_worker(self, **extra_env: str) -> None:
        """A worker whose environment is exactly this (restarted when it changes)."""
        if self.worker is not None and self.worker_env == extra_env:
            return
        if self.worker is not None:
            self.worker.stop()
        env = {"SCOREKEEPER_CACHE": str(self.root / "cache"), **extra_env}
        self.worker = Worker(self.server, self.root / "worker", env)
        self.worker_env = extra_env
        self.worker_logs.append(self.worker.log_path)

    def parameters(self, **overrides) -> dict:
        return {
            "input_uri": f"s3://{self.bucket}/eval/reviews.jsonl",
            "id_column": "review_id",
            "model_uri": f"s3://{self.bucket}/models/bert",
            "adapter_uri": f"s3://{self.bucket}/models/lora",
            "output_uri": f"s3://{self.bucket}/runs",
            "rows_per_range": 2,
            "storage_block": BLOCK,
            **overrides,
        }

    def run_deployment(self, parameters: dict) -> tuple[str, subprocess.CompletedProcess]:
        out = self.server.cli(
            "deployment", "run", f"{FLOW}/adhoc", "--params", json.dumps(parameters), "--watch", "--watch-timeout", "400",
            timeout=450, check=False,
        )  # fmt: skip
        found = re.search(r"UUID: ([0-9a-f-]{36})", out.stdout)
        assert found, out.stdout[-3000:] + out.stderr[-3000:]
        return found.group(1), out

    def commits(self, run_id: str) -> dict[str, bytes]:
        fs = self.s3.filesystem()
        folder = f"{self.bucket}/runs/{run_id}/work/commits"
        return {p.rsplit("/", 1)[1]: fs.cat_file(p) for p in fs.find(folder)}

    def check_predictions(self, run_folder: str) -> None:
        """Exactly one prediction per input row, in row order, equal to an independent reference
        (`run_folder`: bucket/path of the run)."""
        fs = self.s3.filesystem()
        table = pq.read_table(io.BytesIO(fs.cat_file(f"{run_folder}/predictions.parquet")))
        assert table.column("row_index").to_pylist() == list(range(len(self.rows)))
        assert table.column("id").to_pylist() == [r["review_id"] for r in self.rows]
        expected = reference_probabilities(self.models["bert"], [r["text"] for r in self.rows], adapter_dir=self.models["bert_adapter"])
        assert np.abs(probabilities(table) - expected).max() < 1e-4
        assert table.column("predicted_label").to_pylist() == [LABELS[i] for i in expected.argmax(axis=1)]
        metrics = json.loads(fs.cat_file(f"{run_folder}/report/metrics.json"))
        assert metrics["rows"] == metrics["scored"] == metrics["evaluated"] == len(self.rows)


DEPLOY_MD = REPO / "infra" / "DEPLOY.md"


def _config() -> dict:
    return yaml.safe_load((REPO / "prefect.yaml").read_text())


def test_deploy_md_is_held_to_prefect_yaml():
    """infra/DEPLOY.md's table has one row per deployment of prefect.yaml, with its schedule, work
    pool and gates; every deployment it runs, and every pool it creates, is prefect.yaml's."""
    config, text = _config(), DEPLOY_MD.read_text()
    expected = {}
    for d in config["deployments"]:
        schedules = d.get("schedules") or []
        schedule = "; ".join(f"cron `{s['cron']}` ({s.get('timezone', 'UTC')})" for s in schedules) or "none"
        gates = (d.get("parameters") or {}).get("gates") or {}
        shown = ", ".join(f"`{metric} {condition}`" for metric, condition in gates.items()) or "none"
        expected[f"{d['flow_name']}/{d['name']}"] = f"| {schedule} | `{d['work_pool']['name']}` | {shown} |"
    rows = dict(re.findall(r"^\| `([\w-]+/[\w-]+)` (\|.*\|)$", text, re.M))
    assert rows == expected
    run = set(re.findall(r"prefect deployment run '([\w-]+/[\w-]+)'", text))
    assert run and run <= set(expected), run - set(expected)
    pools = {d["work_pool"]["name"] for d in config["deployments"]}
    assert pools <= set(re.findall(r"prefect work-pool create ([\w-]+)", text))
    for name in ("monitor", "as_of", "if_empty", "PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "Crashed"):
        assert name in text, f"infra/DEPLOY.md does not mention {name}"


@pytest.mark.integration
def test_the_crash_automation_in_deploy_md_is_created_by_a_real_server():
    """The zombie-run automation DEPLOY.md gives, run as written against a Prefect server: it exists
    there afterwards, proactive on heartbeats, marking the run Crashed."""
    from prefect.client.orchestration import get_client

    from tests import prefect_session

    code = DEPLOY_MD.read_text().split("## 9.", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    with prefect_session.api():
        exec(compile(code, "infra/DEPLOY.md", "exec"), {})
        with get_client(sync_client=True) as client:
            found = [a for a in client.read_automations() if a.name.startswith("scorekeeper: crash flow runs")]
            assert len(found) >= 1
            automation = found[-1]
            try:
                assert automation.trigger.posture == "Proactive" and automation.trigger.after == {"prefect.flow-run.heartbeat"}
                assert [a.type for a in automation.actions] == ["change-flow-run-state"]
                assert automation.actions[0].state == "CRASHED"
            finally:
                for a in found:
                    client.delete_automation(a.id)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, models, deployed):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = tmp_path_factory.mktemp("deployments")
    s3 = MotoServer(root / "moto.log")
    server = deployed.server
    stack = None
    try:
        bucket = s3.create_bucket("deploy")
        rows = make_rows(12, seed=11)
        s3.filesystem().pipe_file(f"{bucket}/eval/reviews.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
        s3.upload_folder(models["bert"], f"s3://{bucket}/models/bert")
        s3.upload_folder(models["bert_adapter"], f"s3://{bucket}/models/lora")
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            AwsCredentialsShape.save(BLOCK, s3.key, s3.secret, s3.endpoint)
            stack = Stack(root, server, s3, bucket, rows, models)
            yield stack
    finally:
        if stack is not None and stack.worker is not None:
            stack.worker.stop()
        s3.stop()


def _client():
    from prefect.client.orchestration import get_client

    return get_client(sync_client=True)


def _wait_final(flow_run_id: str, timeout: float = 400):
    with _client() as client:

        def final():
            flow_run = client.read_flow_run(uuid.UUID(flow_run_id))
            return flow_run if flow_run.state is not None and flow_run.state.is_final() else None

        flow_run = poll(final, timeout, interval=1)
    assert flow_run is not None, f"flow run {flow_run_id} did not finish within {timeout:.0f} s"
    return flow_run


@pytest.mark.integration
def test_deploy_registers_the_cron_schedule_parameters_and_working_directory(stack):
    with _client() as client:
        nightly = client.read_deployment_by_name(f"{FLOW}/nightly")
        adhoc = client.read_deployment_by_name(f"{FLOW}/adhoc")
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]
    assert nightly.parameters == _deployments()["nightly"]["parameters"]
    assert not adhoc.schedules and adhoc.work_pool_name == POOL == nightly.work_pool_name
    for d in (nightly, adhoc):
        assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}]
    assert set(adhoc.parameter_openapi_schema["required"]) == {"input_uri", "model_uri", "output_uri"}


@pytest.mark.integration
def test_the_group_deploys_on_process_docker_and_kubernetes_pools(stack):
    """The container variants register with their pools' job variables, and what the Docker and
    Kubernetes workers would build from them is valid: the Docker host config accepts the GPU and
    shared-memory requests, and the Kubernetes Job renders with the GPUs asked for."""
    import docker.types
    from prefect_docker.worker import DockerWorkerJobConfiguration

    from tests.test_infra import _render

    with _client() as client:
        found = {
            name: client.read_deployment_by_name(f"scorekeeper-group/{name}") for name in ("group", "group-docker", "group-kubernetes")
        }
        pools = {d.work_pool_name: client.read_work_pool(d.work_pool_name) for d in found.values()}
    assert {d.work_pool_name for d in found.values()} == {"scorekeeper-groups", "scorekeeper-groups-docker", "scorekeeper-groups-k8s"}
    for d in found.values():
        assert d.entrypoint == "scorekeeper.flows.score_group.score_group" and not d.pull_steps

    docker_vars = found["group-docker"].job_variables
    template = pools["scorekeeper-groups-docker"].base_job_template
    config = DockerWorkerJobConfiguration(
        **{k: v for k, v in (_defaults(template) | docker_vars).items() if k in DockerWorkerJobConfiguration.model_fields}
    )
    kwargs = config.container_create_kwargs
    host = docker.types.HostConfig(version="1.44", device_requests=kwargs["device_requests"], shm_size=kwargs["shm_size"])
    assert host["DeviceRequests"][0]["Count"] == -1 and host["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert config.image == docker_vars["image"]

    k8s_vars = found["group-kubernetes"].job_variables
    manifest = _render(pools["scorekeeper-groups-k8s"].base_job_template, k8s_vars | {"command": "prefect flow-run execute"})
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == k8s_vars["gpus"]
    assert container["image"] == k8s_vars["image"]


def _defaults(template: dict) -> dict:
    return {k: v["default"] for k, v in template["variables"]["properties"].items() if "default" in v}


@pytest.mark.integration
def test_storage_block_is_read_by_name_as_aws_credentials_or_secret(stack):
    from prefect.blocks.system import Secret

    from scorekeeper.errors import InputError
    from scorekeeper.storage import fs_and_path, use_storage_access
    from scorekeeper.tasks.credentials import load_storage_access

    s3 = stack.s3
    Secret(value={"aws_access_key_id": s3.key, "aws_secret_access_key": s3.secret, "endpoint_url": s3.endpoint}).save(
        "moto-secret", overwrite=True
    )
    by_secret, by_type = load_storage_access("moto-secret"), load_storage_access(f"aws-credentials/{BLOCK}")
    assert by_secret.source == "'secret/moto-secret'" and by_type.source == f"'aws-credentials/{BLOCK}'"
    for access in (by_secret, by_type):
        assert access.environment["AWS_SECRET_ACCESS_KEY"] == s3.secret and access.environment["AWS_ENDPOINT_URL_S3"] == s3.endpoint
        with use_storage_access(access):
            fs, path = fs_and_path(f"s3://{stack.bucket}/eval/reviews.jsonl")
            assert fs.cat_file(path).count(b"\n") == len(stack.rows)
    with pytest.raises(InputError, match="'no-such-block' not found"):
        load_storage_access("no-such-block")


@pytest.mark.integration
def test_a_failed_flow_run_retried_through_prefect_resumes_where_it_stopped(stack):
    # The first attempt runs on a machine that dies right after committing its first range.
    stack.use_worker(SCOREKEEPER_FAULT_AFTER_RANGES="1")
    flow_run_id, out = stack.run_deployment(stack.parameters(num_processes=1))
    assert out.returncode == 1 and "Failed" in out.stdout, out.stdout[-3000:]
    first = stack.commits(flow_run_id)  # the run is named after the flow run: a retry finds it
    assert list(first) == ["range-0000000.json"]

    stack.use_worker()  # a healthy machine
    stack.server.cli("flow-run", "retry", flow_run_id)
    flow_run = _wait_final(flow_run_id)
    assert flow_run.state.is_completed(), flow_run.state
    assert flow_run.run_count == 2

    after = stack.commits(flow_run_id)
    assert len(after) == 6 and after["range-0000000.json"] == first["range-0000000.json"]
    fs = stack.s3.filesystem()
    job = json.loads(fs.cat_file(f"{stack.bucket}/runs/{flow_run_id}/work/job.json"))
    assert [r[0] for r in job["ranges"]] == [1, 2, 3, 4, 5]  # the retry scored only what was missing
    assert {json.loads(after[n])["attempt"] for n in after if n != "range-0000000.json"} == {job["attempt"] + "-r0"}
    stack.check_predictions(f"{stack.bucket}/runs/{flow_run_id}")


def _monitor_folders(stack) -> dict[str, str]:
    """The monitor deployment's input and output templates, in this module's bucket under dated/."""
    deployed = _deployments()["monitor"]["parameters"]
    return {name: deployed[name].replace("s3://scorekeeper/", f"s3://{stack.bucket}/dated/") for name in ("input_uri", "output_uri")}


@pytest.fixture(scope="module")
def validation(stack) -> tuple[str, subprocess.CompletedProcess]:
    """The labelled validation set scored once by a deployment run on 2 processes with the storage
    block, named `validation` in the monitor's output folder: the run the artifacts test reads back
    and the monitor test's drift reference. Its flow run id and `prefect deployment run`'s output."""
    stack.use_worker()
    output_uri = _monitor_folders(stack)["output_uri"]
    return stack.run_deployment(stack.parameters(num_processes=2, output_uri=output_uri, run_name="validation"))


@pytest.mark.integration
def test_deployment_run_with_a_storage_block_scores_publishes_artifacts_and_leaks_no_secret(stack, validation):
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, LogFilter, LogFilterFlowRunId

    flow_run_id, out = validation
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run_folder = _monitor_folders(stack)["output_uri"].removeprefix("s3://") + "validation"
    stack.check_predictions(run_folder)

    with _client() as client:
        run_filter = [uuid.UUID(flow_run_id)]
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=run_filter)))
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=run_filter)))
    by_key = {a.key: a for a in artifacts}
    assert by_key["scorekeeper-summary"].type == "markdown" and f"s3://{run_folder}" in by_key["scorekeeper-summary"].data
    assert by_key["scorekeeper-per-class"].type == "table"
    assert {row["label"] for row in json.loads(by_key["scorekeeper-per-class"].data)} <= set(LABELS)
    report_uri = f"s3://{run_folder}/report/report.html"
    assert report_uri in by_key["scorekeeper-report"].data  # a link artifact (rendered as markdown)
    progress = by_key["scorekeeper-progress"]
    assert progress.type == "progress" and float(progress.data) == 100.0 and progress.updated > progress.created
    messages = [log.message for log in logs]
    assert any(f"credentials from block 'aws-credentials/{BLOCK}'" in m for m in messages)

    # No credential in what Prefect stored, printed or logged, nor in any object in the bucket.
    stored = json.dumps([a.model_dump(mode="json") for a in artifacts]) + "\n".join(messages)
    assert not stack.s3.credentials_in(stored)
    assert not stack.s3.credentials_in(out.stdout + out.stderr)
    for log_path in stack.worker_logs:
        assert not stack.s3.credentials_in(log_path.read_bytes()), log_path
    leaked = {path: found for path, data in stack.s3.objects(stack.bucket).items() if (found := stack.s3.credentials_in(data))}
    assert not leaked


@pytest.mark.integration
def test_a_dated_monitor_deployment_runs_two_nights_and_a_backfill(stack, validation):
    """prefect.yaml's monitor deployment, its dated templates as deployed, pointed at this test's
    bucket: two nights scheduled in the past, run side by side (each fills its folder and run name
    from its own scheduled time), the second without data (skipped: Completed, "no data tonight",
    nothing written), then that night backfilled with `prefect deployment run -p as_of` once its
    data came. The drift reference is the `validation` run (fixture `validation`)."""
    from prefect.states import Scheduled

    stack.use_worker()
    deployed = _deployments()["monitor"]["parameters"]
    here = _monitor_folders(stack)  # the deployment's own templates and reference, in this test's bucket with its model
    assert "{date-1d}" in here["input_uri"] and "{date-1d}" in deployed["run_name"]
    overrides = stack.parameters(**here) | {
        "gates": {},  # a dozen rows a night: under the 100 rows from which drift is judged (docs/drift.md)
        "if_empty": "skip",
    }
    del overrides["rows_per_range"]
    fs = stack.s3.filesystem()
    nights = {"2026-11-28": make_rows(12, seed=21)}
    for day, rows in nights.items():
        fs.pipe_file(here["input_uri"].replace("{date-1d}", day) + "reviews.jsonl", _jsonl(rows))

    # The labelled reference the deployment measures against: the validation set scored once as `validation`.
    assert validation[1].returncode == 0, validation[1].stdout[-3000:] + validation[1].stderr[-3000:]

    scheduled = {day: datetime.fromisoformat(f"{day}T02:30:00+00:00") for day in ("2026-11-29", "2026-12-01")}
    with _client() as client:
        monitor = client.read_deployment_by_name(f"{FLOW}/monitor")
        assert monitor.parameters["input_uri"] == deployed["input_uri"] and monitor.parameters["run_name"] == deployed["run_name"]
        runs = {
            day: client.create_flow_run_from_deployment(monitor.id, parameters=overrides, state=Scheduled(scheduled_time=moment)).id
            for day, moment in scheduled.items()
        }
    finished = {day: _wait_final(str(run_id)) for day, run_id in runs.items()}
    assert all(f.state.is_completed() for f in finished.values()), {d: f.state for d, f in finished.items()}

    output = here["output_uri"].removeprefix("s3://")
    written = sorted(fs.find(f"{stack.bucket}/dated"))
    said = {day: (f.state.name, f.state.message, f.expected_start_time) for day, f in finished.items()}
    assert f"{output}monitor-2026-11-28/request.json" in written, f"{said}\n{written}"
    for day, data_day in (("2026-11-29", "2026-11-28"),):
        record = json.loads(fs.cat_file(f"{output}monitor-{data_day}/request.json"))
        assert record["input_uri"] == here["input_uri"].replace("{date-1d}", data_day)
        assert record["as_of"] == f"{day}T02:30:00Z" and record["run_name"] == f"monitor-{data_day}"
        assert record["templates"] == {"input_uri": here["input_uri"], "run_name": deployed["run_name"]}
        metrics = json.loads(fs.cat_file(f"{output}monitor-{data_day}/report/metrics.json"))
        assert metrics["rows"] == len(nights[data_day]) and metrics["drift"]["reference"] == "validation"
    skipped = finished["2026-12-01"].state
    assert skipped.type.value == "COMPLETED" and skipped.message.startswith("no data tonight: input not found: ")
    assert "dated/incoming/2026-11-30/" in skipped.message and not fs.exists(f"{output}monitor-2026-11-30")

    # The night's data arrives late: backfill it as the operator does (README), as_of its scheduled day.
    fs.pipe_file(f"{stack.bucket}/dated/incoming/2026-11-30/reviews.jsonl", _jsonl(make_rows(7, seed=23)))
    out = stack.server.cli(
        "deployment", "run", f"{FLOW}/monitor", "--params", json.dumps(overrides | {"as_of": "2026-12-01"}),
        "--watch", "--watch-timeout", "400", timeout=450, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    record = json.loads(fs.cat_file(f"{output}monitor-2026-11-30/request.json"))
    assert record["as_of"] == "2026-12-01T00:00:00Z" and record["input_uri"].endswith("/dated/incoming/2026-11-30/")
    metrics = json.loads(fs.cat_file(f"{output}monitor-2026-11-30/report/metrics.json"))
    assert metrics["rows"] == 7 and metrics["drift"]["reference"] == "validation"
    history = [h["run_id"] for h in metrics["history"]]  # oldest first
    assert history == ["validation", "monitor-2026-11-28", "monitor-2026-11-30"]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()

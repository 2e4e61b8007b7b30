"""One `prefect server start` with the project's deployments, for the whole test session: the tests
of deployments (test_deployments.py), fan-out (test_fan_out.py) and the process-pool path
(test_process_path.py) share it (tests/conftest.py `deployed`).

A server of their own (not the session's temporary API server of tests/prefect_session.py): workers
poll it, so nothing else may schedule runs on its pools, and it runs Prefect's services as an
operator's server does. Deploying is done once, in the order an operator follows: README's process
pools, `prefect deploy --all` (which must need nothing more), then the Docker and Kubernetes pools
and the container variants (infra/prefect-containers.yaml). Starting and deploying cost about a
minute on 2 cores; once per session instead of once per module.

Tests that share it do not depend on each other's runs: each names its own runs, blocks and buckets,
and reads back what it made by id or name, never "everything on the server". A module's workers
stop when the module ends (module-scoped fixtures), so a test that needs a pool without a worker
gets one whichever module ran before.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from scorekeeper.launch.command import free_port
from tests.s3server import isolated_aws_environment
from tests.waiting import wait_for_server

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
K8S_TEMPLATE = REPO / "infra" / "kubernetes" / "base-job-template.json"


class PrefectServer:
    """`prefect server start` on a free loopback port with its own home and SQLite database."""

    def __init__(self, home: Path):
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.api_url = f"http://127.0.0.1:{free_port()}/api"
        self.env = isolated_aws_environment() | {
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home}/prefect.db",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "false",
            # The nightly cron must not fire while the test runs.
            "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
        }
        self._log = open(home / "server.log", "wb")
        port = self.api_url.split(":")[2].split("/")[0]
        self.process = subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", port],
            env={**os.environ, **self.env}, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            self._wait_healthy()
        except BaseException:  # one that never answered would run on, unowned, after the session
            self.stop()
            raise

    def _wait_healthy(self, timeout: float = 180.0) -> None:
        wait_for_server(self.process, self.api_url + "/health", "prefect server", self.home / "server.log", timeout, expect=b"true")

    def cli(self, *args: str, timeout: float = 120, check: bool = True, cwd: Path = REPO) -> subprocess.CompletedProcess:
        out = subprocess.run([PREFECT, *args], cwd=cwd, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError(f"prefect {' '.join(args)} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out

    def cli_side_by_side(self, *commands: list[str], timeout: float = 240) -> None:
        """Independent `prefect` commands at once (each is mostly Python start-up: two cores share them)."""
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            for done in [pool.submit(self.cli, *args, timeout=timeout) for args in commands]:
                done.result()

    def stop(self) -> None:
        stop_process_group(self.process, first=signal.SIGTERM)
        self._log.close()


def stop_process_group(process: subprocess.Popen, first: signal.Signals) -> None:
    """Ask politely (Prefect's CLI wants a second SIGINT to stop at once), then insist."""
    for sig, wait in ((first, 5), (signal.SIGINT, 5), (signal.SIGKILL, 30)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def scoring_processes(processes: list) -> list:
    """Those of `processes` (psutil.Process) that are the job's scoring processes (scorekeeper.worker);
    gone ones are passed over."""
    import psutil

    found = []
    for p in processes:
        try:
            if "scorekeeper.worker" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:
            pass
    return found


def lose_at_once(processes: list) -> None:
    """A machine is gone: every one of `processes` (psutil.Process) stopped before any is killed.
    Killed one by one, a survivor could see its child die and report it (a worker: "Process exited
    with status code: -9" as the group's crash; a group flow run: its scoring process's SIGKILL),
    which a lost machine never does."""
    import psutil

    for how in ("suspend", "kill"):
        for p in processes:
            try:
                getattr(p, how)()
            except psutil.Error:
                pass


def readme_pool_commands() -> list[list[str]]:
    """The `prefect work-pool create` lines of README.md's Deployments section, as arguments."""
    section = (REPO / "README.md").read_text().split("## Deployments (Prefect)", 1)[1].split("\n## ", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in section.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("prefect work-pool create")]


@dataclass
class Deployed:
    """The server, and what `prefect deploy --all` registered when only README's pools existed:
    {flow name/deployment name: work pool}."""

    server: PrefectServer
    deploy_all: dict[str, str]

    @property
    def api_url(self) -> str:
        return self.server.api_url


def deployments_on(api_url: str) -> dict[str, str]:
    """{flow name/deployment name: work pool} of every deployment the server holds."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        return {f"{client.read_flow(d.flow_id).name}/{d.name}": d.work_pool_name for d in client.read_deployments()}


def start_and_deploy(home: Path) -> Deployed:
    """A server with README's process pools, `prefect deploy --all`, then the container variants
    with their pools (the Kubernetes one with the shipped base job template, which the server
    validates). The caller stops the server."""
    server = PrefectServer(home)
    try:
        commands = readme_pool_commands()
        assert commands and all(c[c.index("--type") + 1] == "process" for c in commands), commands
        server.cli_side_by_side(*commands)
        server.cli("--no-prompt", "deploy", "--all", timeout=240)  # fails if prefect.yaml names a pool not created
        deploy_all = deployments_on(server.api_url)
        server.cli_side_by_side(
            ["work-pool", "create", "scorekeeper-groups-docker", "--type", "docker"],
            ["work-pool", "create", "scorekeeper-groups-k8s", "--type", "kubernetes", "--base-job-template", str(K8S_TEMPLATE)],
        )
        server.cli("--no-prompt", "deploy", "--all", "--prefect-file", "infra/prefect-containers.yaml", timeout=240)
    except BaseException:
        server.stop()
        raise
    return Deployed(server, deploy_all)


class AwsCredentialsShape:
    """An AwsCredentials block as prefect-aws stores it, without prefect-aws (not installed here)."""

    @staticmethod
    def save(name: str, key: str, secret: str, endpoint: str) -> None:
        from prefect.blocks.core import Block
        from pydantic import SecretStr

        class AwsCredentials(Block):
            _block_type_name = "AWS Credentials"
            _block_type_slug = "aws-credentials"
            aws_access_key_id: str | None = None
            aws_secret_access_key: SecretStr | None = None
            aws_session_token: SecretStr | None = None
            profile_name: str | None = None
            region_name: str | None = None
            aws_client_parameters: dict = {}

        AwsCredentials(
            aws_access_key_id=key, aws_secret_access_key=secret, region_name="us-east-1",
            aws_client_parameters={"endpoint_url": endpoint},
        ).save(name, overwrite=True)  # fmt: skip

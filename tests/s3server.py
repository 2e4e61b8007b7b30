"""A real S3 endpoint for tests: moto's standalone server on a free loopback port.

s3fs reaches it over HTTP exactly as it reaches S3 in production (no in-process mocking): only the
endpoint differs. Tests give every run fake but distinctive credentials, so they can search every
output, log and artifact for them afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scorekeeper.launch.command import free_port
from tests.waiting import wait_for_server

# The environment variables through which the standard AWS chain could find other credentials or
# endpoints; tests remove them so that only what a test hands over is used.
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)  # fmt: skip


def isolated_aws_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with no AWS credentials, profiles, endpoints or instance metadata."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in AWS_VARIABLES}
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


class MotoServer:
    """moto's server in a subprocess (tests/moto_atomic.py: its conditional writes atomic, as S3's
    are); credentials are new random strings for every server."""

    def __init__(self, log_path: Path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.key = "AKIA" + uuid.uuid4().hex[:16].upper()
        self.secret = "sk-test-" + uuid.uuid4().hex
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("moto_atomic.py")), "127.0.0.1", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, env=isolated_aws_environment(), start_new_session=True,
        )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        try:
            wait_for_server(self.process, self.endpoint + "/", "moto_server", self.log_path, timeout)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()

    # -- ways in -------------------------------------------------------------------------------
    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The standard AWS chain's variables pointing at this server (endpoint included)."""
        return isolated_aws_environment(base) | {
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }

    @contextlib.contextmanager
    def in_this_process(self, monkeypatch, extra: dict[str, str] | None = None) -> Iterator[None]:
        """This process, and what it starts, reaches this server through the standard AWS chain
        inside the block: the AWS variables of the environment replaced by `environment()`'s and
        `extra`'s. fsspec caches filesystems by their options, not by the environment they were made
        in, so s3fs's cache is emptied on the way in and out: a filesystem cached by another test
        would still talk to another endpoint."""
        import s3fs

        for name in AWS_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in (self.environment() | (extra or {})).items():
            if os.environ.get(name) != value:
                monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield
        finally:
            s3fs.S3FileSystem.clear_instance_cache()

    def storage_options(self) -> dict:
        """s3fs options for this server, for the tests' own reads and writes."""
        return {"key": self.key, "secret": self.secret, "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}}

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **self.storage_options())

    def create_bucket(self, prefix: str = "bucket") -> str:
        """A new bucket (the S3 API: s3fs's mkdir asks for a location constraint moto refuses)."""
        import boto3

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        client = boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=self.key, aws_secret_access_key=self.secret, region_name="us-east-1"
        )
        client.create_bucket(Bucket=name)
        return name

    def upload_folder(self, local: str | Path, uri: str) -> str:
        fs = self.filesystem()
        root = Path(local)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            fs.put_file(str(path), uri.removeprefix("s3://").rstrip("/") + "/" + path.relative_to(root).as_posix())
        return uri

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in a bucket with its content."""
        fs = self.filesystem()
        return {path: fs.cat_file(path) for path in fs.find(bucket)}

    def credentials_in(self, text: str | bytes) -> list[str]:
        """Which of this server's credentials a text contains (none, we hope)."""
        data = text.encode() if isinstance(text, str) else text
        return [name for name, value in (("access key id", self.key), ("secret", self.secret)) if value.encode() in data]


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()

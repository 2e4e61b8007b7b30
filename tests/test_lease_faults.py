"""The run's lease through storage faults (scorekeeper/lease.py), against moto's real S3 server on
loopback: killed, paused, and dropping connections (tests/faultproxy.py).

Every storage error is one kind of failure to the lease (botocore's EndpointConnectionError and
ConnectionClosedError are not OSErrors): a renewal that fails is retried and the lease stays fresh
once the store answers again; a store that does not answer within STOP_AFTER of the TTL stops the
holder (LeaseLost, exit 3, one line) before the TTL lets another job take the folder over; the
release never replaces the block's own error. A holder is a real process of its own (the lease
stops it with SIGINT, as it stops a flow), with a short TTL and AWS_MAX_ATTEMPTS=1 so that each
request fails at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scorekeeper import lease
from scorekeeper.lease import generation_name, generations
from scorekeeper.run_folder import RunFolder
from tests.faultproxy import FaultProxy
from tests.s3server import MotoServer
from tests.test_completion import _fill, small_disk  # noqa: F401  (small_disk is a fixture)
from tests.waiting import poll

pytestmark = pytest.mark.integration

TTL_S = 6.0  # the holder stops after STOP_AFTER of it (4 s) without a written renewal

HOLDER = textwrap.dedent(
    """
    import logging, signal, sys, time
    from scorekeeper import lease
    from scorekeeper.errors import ScorekeeperError
    from scorekeeper.run_folder import RunFolder

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    uri, ttl, work, mode, sigint = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
    if sigint == "ignored":  # as in a job a script started in the background (`job &`)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    lease.RENEW_EVERY_S = ttl / 10
    lease.RETRY_EVERY_S = ttl / 20
    run = RunFolder.from_uri(uri)
    try:
        with lease.run_lease(run, "r", owner="holder", ttl_s=ttl):
            print("held", flush=True)
            sys.stdin.readline()  # the test's fault is in place
            if mode == "fail":
                raise ValueError("the run's own error")
            time.sleep(work)  # the job's work (a blocking call, as waiting on a subprocess is)
    except ScorekeeperError as exc:
        print("lost", time.time(), flush=True)
        print("message", exc, flush=True)
        sys.exit(exc.exit_code)
    print("done", time.time(), flush=True)
    """
)


class Holder:
    def __init__(self, uri: str, env: dict[str, str], work_s: float, mode: str = "work", sigint: str = "python"):
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, uri, str(TTL_S), str(work_s), mode, sigint],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env | {"AWS_MAX_ATTEMPTS": "1", "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert self.process.stdout.readline().strip() == "held", self.process.stderr.read()[-3000:]

    def go(self) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return time.time()

    def finish(self, timeout: float) -> tuple[int, dict[str, str], str]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            pytest.fail(f"the holder went on for over {timeout} s: {out}\n{err[-3000:]}")
        said = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        return self.process.returncode, said, err


@pytest.fixture
def server(tmp_path):
    """A moto server of this test's own: the test kills or pauses it."""
    moto = MotoServer(tmp_path / "moto.log")
    yield moto
    if moto.process.poll() is None:
        os.killpg(moto.process.pid, signal.SIGCONT)
    moto.stop()


def _lease_record(moto: MotoServer, bucket: str) -> dict:
    run = RunFolder(moto.filesystem(), f"{bucket}/runs/r")
    return json.loads(run.read_bytes(generation_name(generations(run)[-1])))


def test_a_killed_store_stops_the_holder_in_one_line_before_the_lease_could_be_taken_over(server):
    bucket = server.create_bucket("lease")
    holder = Holder(f"s3://{bucket}/runs/r", server.environment(dict(os.environ)), work_s=60)
    renewed = _lease_record(server, bucket)["renewed_at"]
    os.killpg(server.process.pid, signal.SIGKILL)
    holder.go()
    code, said, err = holder.finish(timeout=TTL_S * 3)
    assert code == 3, err[-3000:]
    # Stopped before the lease's TTL could pass: no other job can have judged it expired yet.
    assert float(said["lost"]) < renewed + TTL_S + 2 * TTL_S / 10, (said, renewed)
    message = said["message"]
    assert "\n" not in message and "lease on its folder s3://" in message and "rerun with the same run name" in message
    assert "EndpointConnectionError" in message, message  # the store's own error, not a renewal thread's death
    assert "Traceback" not in err, err[-3000:]


@pytest.mark.parametrize("sigint", ["python", "ignored"])
def test_a_paused_store_stops_the_holder_before_the_ttl_of_its_last_written_renewal(server, sigint):
    """Also where the holder's SIGINT is ignored (a background job of a script): the lease still
    interrupts it (without a handler of its own the block would sleep on past the TTL)."""
    bucket = server.create_bucket("lease")
    holder = Holder(f"s3://{bucket}/runs/r", server.environment(dict(os.environ)), work_s=60, sigint=sigint)
    os.killpg(server.process.pid, signal.SIGSTOP)  # requests hang: no error ever comes back
    paused = holder.go()
    code, said, err = holder.finish(timeout=TTL_S * 3)
    os.killpg(server.process.pid, signal.SIGCONT)
    assert code == 3, err[-3000:]
    renewed = _lease_record(server, bucket)["renewed_at"]  # the last renewal the store took
    assert float(said["lost"]) < renewed + TTL_S, (said, renewed)
    assert float(said["lost"]) - paused < TTL_S * lease.STOP_AFTER + 2.5, (said, paused)
    assert "could not be renewed" in said["message"]


def test_renewals_that_fail_are_retried_and_the_lease_stays_fresh(server):
    """Connections dropped for a quarter of the TTL (botocore's ConnectionClosedError, not an OSError): the
    renewal retries, and once the store answers the lease is fresh again; the job ends normally."""
    bucket = server.create_bucket("lease")
    with FaultProxy(server.endpoint) as proxy:
        env = server.environment(dict(os.environ)) | {"AWS_ENDPOINT_URL_S3": proxy.endpoint}
        holder = Holder(f"s3://{bucket}/runs/r", env, work_s=TTL_S * 2)
        proxy.add("lease unreachable", "drop", rf"/{bucket}/")
        began = holder.go()
        time.sleep(TTL_S / 4)  # several renewals fail; the watchdog would stop the job after TTL_S * STOP_AFTER
        assert proxy.exchanges("lease unreachable"), "no renewal was tried while the store dropped connections"
        proxy.clear()
        dropped = time.time()
        fresh = poll(lambda: _lease_record(server, bucket)["renewed_at"] > dropped, timeout=TTL_S)
        code, said, err = holder.finish(timeout=TTL_S * 3)
    assert fresh, "the lease was not renewed once the store answered again"
    assert code == 0 and "done" in said, err[-3000:]
    assert float(said["done"]) - began >= TTL_S * 2  # the job ran its whole work, past the TTL
    assert "could not renew the lease of run r" in err and "Traceback" not in err, err[-3000:]


def test_the_release_never_hides_the_blocks_own_error(server):
    bucket = server.create_bucket("lease")
    holder = Holder(f"s3://{bucket}/runs/r", server.environment(dict(os.environ)), work_s=0, mode="fail")
    os.killpg(server.process.pid, signal.SIGKILL)
    holder.go()
    code, said, err = holder.finish(timeout=TTL_S * 3)
    last = err.strip().splitlines()[-1]
    assert code == 1 and last == "ValueError: the run's own error", err[-3000:]
    assert "During handling of the above exception" not in err, err[-3000:]


def test_a_full_disk_names_the_folder(small_disk):
    from scorekeeper.errors import storage_error

    run = RunFolder.from_uri(str(small_disk / "runs" / "r"))
    run.makedirs("work", "shards")
    _fill(small_disk)
    with pytest.raises(OSError) as full:
        run.publish_bytes(b"x" * 65536, "work", "shards", "s.parquet")
    message = str(storage_error(full.value))
    folder = str(small_disk / "runs" / "r" / "work" / "shards")
    assert message == f"could not write the run's files: no space left on the device holding {folder} (writing s.parquet)"
    assert not [p for p in os.listdir(folder) if p != "filler"]  # its temporary file removed


def test_a_store_killed_while_scoring_ends_the_cli_in_one_line(tmp_path, models, server):
    """The whole job: `scorekeeper run` writing to S3 whose server is killed once the first range is
    committed: exit 3, one error line, no traceback, within the retries' bound."""
    from tests import prefect_session
    from tests.helpers import make_rows, write_rows

    bucket = server.create_bucket("runs")
    write_rows(tmp_path / "in.csv", make_rows(400, seed=5))
    args = ["--input-uri", str(tmp_path / "in.csv"), "--model-uri", models["bert"], "--num-processes", "1", "--rows-per-range", "10"]
    env = prefect_session.cli_environment(server.environment(dict(os.environ)) | {"PREFECT_HOME": str(tmp_path / ".prefect")})
    cli = subprocess.Popen(
        [str(Path(sys.executable).with_name("scorekeeper")), "run", *args, "--output-uri", f"s3://{bucket}/runs", "--run-name", "r"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    fs = server.filesystem()
    committed = poll(
        lambda: fs.exists(f"{bucket}/runs/r/work/commits") and fs.ls(f"{bucket}/runs/r/work/commits"), timeout=120, interval=0.1
    )
    assert committed and cli.poll() is None, "the run did not commit a range while running"
    os.killpg(server.process.pid, signal.SIGKILL)
    killed = time.time()
    out, err = cli.communicate(timeout=240)
    elapsed = time.time() - killed
    print(f"\nstore killed while scoring: the CLI ended {elapsed:.1f} s later, exit {cli.returncode}")
    assert cli.returncode == 3, err[-3000:]
    assert "Traceback" not in err, err[-5000:]
    errors = [line for line in err.splitlines() if line.startswith("scorekeeper: error: ")]
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err[-5000:]
    assert "did not answer" in errors[0] or "lease on its folder" in errors[0], errors


@pytest.mark.parametrize("before", [signal.SIG_IGN, signal.default_int_handler])
def test_the_lease_leaves_sigint_as_it_found_it(tmp_path, before):
    """A handler of the lease's own only while the block runs, only where Python had none."""
    run = RunFolder.from_uri(str(tmp_path / "run"))
    previous = signal.signal(signal.SIGINT, before)
    try:
        with lease.run_lease(run, "r", owner="me"):
            inside = signal.getsignal(signal.SIGINT)
            assert (inside is before) == (before is signal.default_int_handler), inside
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, previous)

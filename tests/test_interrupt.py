"""Stopping `scorekeeper run` from outside: Ctrl-C in a terminal (SIGINT to the whole process
group), SIGTERM to the command, SIGKILL. Real processes: the CLI, Prefect's temporary server and
the scoring processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from scorekeeper.lease import lease_holder
from scorekeeper.run_folder import RunFolder
from tests import prefect_session
from tests.helpers import make_rows, write_rows

pytestmark = pytest.mark.integration
SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))


def _family(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def _running(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_stops_everything_with_one_line(tmp_path, models, how):
    """Ctrl-C: SIGINT to the CLI's whole process group, with its own temporary Prefect server and
    two ranks under `accelerate launch`. SIGTERM: to the CLI alone, which turns it into the same
    interrupt (cli._interrupt_on_signals) and stops the same way; here with one scoring process
    and the session's Prefect server, since the server's and the launcher's stop is the Ctrl-C case's."""
    write_rows(tmp_path / "in.csv", make_rows(400, max_words=60))
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")}
    if how == "ctrl-c":
        env.pop("PREFECT_API_URL", None)  # the CLI's temporary server
    else:
        env = prefect_session.cli_environment(env)
    args = ["run", "--input-uri", "in.csv", "--model-uri", models["bert"], "--output-uri", "runs", "--run-name", "stop"]
    cli = subprocess.Popen(
        [SCOREKEEPER, *args, "--rows-per-range", "10", "--num-processes", "2" if how == "ctrl-c" else "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )  # fmt: skip
    commits = tmp_path / "runs" / "stop" / "work" / "commits"
    seen: set[int] = set()
    deadline = time.time() + 300
    while time.time() < deadline and cli.poll() is None:
        seen |= _family(cli.pid)  # the server, the launcher and the ranks it starts
        if commits.is_dir() and any(p.suffix == ".json" for p in commits.iterdir()):
            break
        time.sleep(0.1)
    assert cli.poll() is None, "the run ended before it could be interrupted"
    seen |= _family(cli.pid)
    if how == "ctrl-c":
        os.killpg(cli.pid, signal.SIGINT)
    else:
        os.kill(cli.pid, signal.SIGTERM)
    sent = time.time()
    out, err = cli.communicate(timeout=120)
    took = time.time() - sent
    assert cli.returncode == 130, err[-3000:]
    assert took < 30, f"took {took:.1f} s to stop"
    assert "Traceback" not in out + err and "httpx" not in err
    line = re.search(r"scorekeeper: interrupted; (\d+) of 40 ranges committed; rerun with the same run name to resume", err)
    assert line, err[-3000:]
    assert int(line.group(1)) == len(list(commits.glob("*.json"))) >= 1
    time.sleep(1)
    assert not _running(seen), f"left behind: {[psutil.Process(p).cmdline() for p in _running(seen)]}"
    assert lease_holder(RunFolder.from_uri(str(tmp_path / "runs" / "stop"))) is None  # the name is free to resume


def test_the_temporary_server_dies_with_a_killed_cli(tmp_path):
    """SIGKILL leaves no clean-up to run: the kernel's parent-death signal takes the server."""
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from scorekeeper.api_server import TemporaryServer\n"
            "s = TemporaryServer(); s.wait_ready(); print(s.proc.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")},
    )
    server_pid = int(owner.stdout.readline())
    assert _running([server_pid])
    owner.kill()
    owner.wait()
    deadline = time.time() + 10
    while _running([server_pid]) and time.time() < deadline:
        time.sleep(0.1)
    assert not _running([server_pid]), "the temporary Prefect server outlived the killed CLI"

"""The Prefect flow under Prefect's test harness, and the command line as a user types it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests import prefect_session
from tests.helpers import make_rows, probabilities, reference_probabilities, write_rows
from tests.waiting import poll

pytestmark = pytest.mark.integration
SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))


def test_flow_runs_every_step_and_publishes_artifacts(tmp_path, models, prefect_api):
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from scorekeeper.flows.score import score_dataset
    from scorekeeper.launch import ScoringProcesses, offering
    from scorekeeper.params import ScoreRequest

    rows = make_rows(23)
    path = write_rows(tmp_path / "in.csv", rows)
    # Processes started and offered as the CLI does: the flow scores with them. One process: the
    # command's test below scores with two started ahead this way (and the gather across ranks has
    # tests of its own: tests/test_plan_gather.py, tests/test_replica.py).
    timeout = ScoreRequest.model_fields["collective_timeout_s"].default
    with ScoringProcesses(1, timeout).start() as ahead, offering(ahead):
        result = score_dataset(
            input_uri=str(path),
            model_uri=models["bert"],
            output_uri=str(tmp_path / "out"),
            num_processes=1,
            rows_per_range=6,
            slice_columns=["review_id"],
        )
    assert ahead.job_uri == result["run_uri"] + "/work/job.json"
    run_dir = Path(result["run_uri"])
    table = pq.read_table(run_dir / "predictions.parquet")
    assert table.column("row_index").to_pylist() == list(range(23))
    assert np.abs(probabilities(table) - reference_probabilities(models["bert"], [r["text"] for r in rows])).max() < 1e-4
    metrics = json.loads((run_dir / "report" / "metrics.json").read_text())
    assert metrics["evaluated"] == 23 and len(metrics["slices"]["review_id"]) == 23
    assert {"report.md", "report.html", "confusion.svg", "reliability.svg"} <= {p.name for p in (run_dir / "report").iterdir()}
    request = json.loads((run_dir / "request.json").read_text())
    assert request["run_id"] == run_dir.name and request["input_uri"] == str(path)

    import asyncio

    async def artifact_keys():  # this flow run's (the session's server holds every test's runs)
        async with get_client() as client:
            this_run = FlowRunFilter(id=FlowRunFilterId(any_=[UUID(result["run_id"])]))
            return {a.key for a in await client.read_artifacts(flow_run_filter=this_run)}

    expected = {"scorekeeper-summary", "scorekeeper-per-class", "scorekeeper-report", "scorekeeper-progress", "scorekeeper-confusion"}
    assert expected <= asyncio.run(artifact_keys())


def _cli(*args, cwd, temporary_server: bool = False):
    """The CLI in a subprocess, pointed at the session's Prefect server, or with no PREFECT_API_URL
    as a user types it (`temporary_server`: it starts its own); checks it left no process behind."""
    env = {**os.environ, "PREFECT_HOME": str(cwd / ".prefect")}
    if temporary_server:
        env.pop("PREFECT_API_URL", None)
    else:
        env = prefect_session.cli_environment(env)
    proc = subprocess.Popen([SCOREKEEPER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    out, err = proc.communicate(timeout=600)
    _assert_nothing_left(proc.pid, err)
    assert "Error logging to API" not in out + err  # logs were sent before the server stopped
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _assert_nothing_left(cli_pid: int, stderr: str) -> None:
    """No scoring process started ahead by this CLI survives it, nor its temporary Prefect server."""
    import re
    import socket

    import psutil

    def scoring_processes_left() -> list[int]:
        return [
            p.pid
            for p in psutil.process_iter(["cmdline", "status"])
            if p.info["status"] != psutil.STATUS_ZOMBIE
            and "--owner-pid" in (cmd := p.info["cmdline"] or [])
            and cmd[cmd.index("--owner-pid") + 1] == str(cli_pid)
        ]

    poll(lambda: not scoring_processes_left(), timeout=10)
    left = scoring_processes_left()
    assert not left, f"scoring processes left behind: {left}"
    port = re.search(r"temporary Prefect server on http://127\.0\.0\.1:(\d+)/api", stderr)
    if port:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", int(port.group(1)))) != 0, "the temporary Prefect server is still up"


def test_cli_as_a_user_types_it(tmp_path, models):
    write_rows(tmp_path / "test.csv", make_rows(11))
    done = _cli(
        "run",
        "--input-uri",
        "./test.csv",
        "--model-uri",
        models["bert"],
        "--output-uri",
        "./runs",
        "--num-processes",
        "2",
        "--run-name",
        "cli",
        "--rows-per-range",
        "4",
        cwd=tmp_path,
        temporary_server=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("scorekeeper: run cli scored 11 rows") and str(tmp_path / "runs" / "cli") in summary
    assert "scoring: 11/11 rows (100%)" in done.stderr  # progress was shown (plain lines: stderr is not a terminal)
    assert "temporary Prefect server on http://127.0.0.1:" in done.stderr  # the CLI's own, started first
    assert pq.read_table(tmp_path / "runs" / "cli" / "predictions.parquet").num_rows == 11


def test_cli_bad_input_is_one_clear_line_and_publishes_nothing(tmp_path, models):
    write_rows(tmp_path / "test.csv", make_rows(5))
    done = _cli(
        "run",
        "--input-uri",
        "test.csv",
        "--model-uri",
        models["bert"],
        "--output-uri",
        "runs",
        "--text-column",
        "body",
        "--run-name",
        "bad",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stdout + done.stderr
    assert "scorekeeper: error: column 'body' not found in" in done.stderr
    assert "its columns are: review_id, text, label" in done.stderr
    assert not (tmp_path / "runs" / "bad").exists()  # a refused input leaves no run folder
    bad_param = _cli("run", "--input-uri", "x.csv", "--model-uri", "m", "--output-uri", "runs", "--run-name", "../up", cwd=tmp_path)
    assert bad_param.returncode == 2 and "--run-name: run_name '../up'" in bad_param.stderr and "Traceback" not in bad_param.stderr

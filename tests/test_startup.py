"""Start-up and the CPU engine: scoring processes started ahead of their job, batch threads.

The ahead path end to end is covered by every flow and CLI test (the flow always starts its
scoring processes ahead); these tests pin what only shows when something goes wrong.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import psutil
import pyarrow as pa
import pytest
import torch

from scorekeeper.launch import Progress, ScoringProcesses, launch_command, offered, offering
from scorekeeper.run_folder import IndexRange
from scorekeeper.worker.model import load_model
from scorekeeper.worker.replica import prepare_range, score_batches, scored_ranges
from tests.helpers import make_rows, probabilities, reference_probabilities, write_rows
from tests.waiting import poll

CPU = torch.device("cpu")


def _gone(pid: int, within_s: float) -> bool:
    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return poll(gone, within_s, interval=0.1)


def test_batch_threads_score_each_batch_as_if_alone(models):
    """Batches side by side on single-threaded cores (the CPU path of `scored_ranges`, with the next
    range queued before this one is awaited) give what one batch at a time gives."""
    loaded = load_model(
        models["bert"], None, merge_adapter=False, dtype=torch.float32, device=CPU, trust_remote_code=False, max_length=None
    )
    texts = [r["text"] for r in make_rows(40, seed=4, max_words=50)]
    table = pa.table({"text": texts})
    ranges = [IndexRange(0, 0, 25), IndexRange(1, 25, 40)]
    prepared = [prepare_range(r, table.slice(r.start, r.rows), loaded, 120, 64, pin=False) for r in ranges]
    assert all(len(p.batches) > 2 for p in prepared)
    alone = np.concatenate([score_batches(loaded.model, p.batches, p.range.rows, len(loaded.labels), CPU) for p in prepared])
    threads_before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        scored = scored_ranges(prepared, loaded, CPU)
        first_range, first = next(scored)
        assert torch.get_num_threads() == 1 and first_range is prepared[0]  # a pool of 3 single-threaded batch threads
        together = np.concatenate([first, *(probabilities for _, probabilities in scored)])
        assert torch.get_num_threads() == 3  # restored
    finally:
        torch.set_num_threads(threads_before)
    assert np.abs(alone - together).max() < 1e-6
    assert (alone.argmax(1) == together.argmax(1)).all()
    assert np.abs(together - reference_probabilities(models["bert"], texts)).max() < 1e-4


@pytest.mark.integration
def test_processes_started_ahead_score_the_job_they_are_handed(tmp_path, models):
    from tests.helpers import open_run_and_plan

    rows = make_rows(9, seed=5)
    _, context, _, job = open_run_and_plan(
        input_uri=str(write_rows(tmp_path / "in.csv", rows)),
        model_uri=models["bert"],
        output_uri=str(tmp_path / "out"),
        run_name="ahead",
        rows_per_range=4,
    )
    with ScoringProcesses(1, 60.0).start() as processes:
        # They import meanwhile, and the job may come at any moment. Their start-up grace counts
        # from the hand-over, not the launch (the flow may read a big input for a quarter of an hour).
        time.sleep(1.0)
        assert processes.waiting
        processes.hand_over(context.run.uri + "/work/job.json")
        assert not processes.waiting
        progress = processes.follow(Progress(total_rows=9))
    assert progress.rows_done == 9 and progress.ranges_done == 3
    assert not os.path.exists(os.path.dirname(processes.job_file))  # the hand-over file is cleaned up
    from scorekeeper.tasks.gather import gather_predictions

    gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "ahead" / "predictions.parquet")
    assert np.abs(probabilities(table) - reference_probabilities(models["bert"], [r["text"] for r in rows])).max() < 1e-4


@pytest.mark.integration
def test_the_flow_takes_only_fitting_offered_processes_and_each_owner_stops_its_own():
    from scorekeeper.params import ScoreRequest
    from scorekeeper.tasks.score import scoring_processes

    request = ScoreRequest(input_uri="in.csv", model_uri="model", output_uri="out", num_processes=1, collective_timeout_s=30)
    with ScoringProcesses(1, 30.0).start() as cli:  # the CLI's
        assert offered(1, 30.0) is None  # not offered: nobody else sees them
        with offering(cli):
            assert offered(1, 30.0, {}) is cli
            assert offered(2, 30.0) is None  # another process count
            assert offered(1, 60.0) is None  # another collective timeout
            assert offered(1, 30.0, {"AWS_ACCESS_KEY_ID": "x"}) is None  # another environment
            with scoring_processes(request) as used:
                assert used is cli
            assert cli.waiting  # the flow does not stop what the CLI owns
            with scoring_processes(request.model_copy(update={"collective_timeout_s": 45.0})) as own:
                assert own is not cli and own.waiting  # a flow that needs others starts its own ...
            assert _gone(own.pid, 10)  # ... and stops them
            assert not os.path.exists(os.path.dirname(own.job_file))
            assert cli.waiting
    assert _gone(cli.pid, 10)  # the CLI stops its own on the way out
    assert not os.path.exists(os.path.dirname(cli.job_file))
    cli.stop()  # again: nothing to do


@pytest.mark.integration
def test_worker_waiting_for_a_job_leaves_when_its_owner_is_gone(tmp_path):
    # Gone before the worker has even imported torch (10 to 30 s on a busy machine): it leaves at
    # once, not after its imports. Python's import log shows how far it got.
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner.wait()
    cmd = launch_command(1, None, 30.0, job_from=str(tmp_path / "never"), owner_pid=owner.pid)
    worker = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert worker.returncode == 1, worker.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in worker.stderr.splitlines() if line.startswith("import time:")}
    assert "scorekeeper.worker" in imported or "scorekeeper.errors" in imported  # the log is there ...
    assert "torch" not in imported  # ... and the worker left before torch was imported


@pytest.mark.integration
def test_a_temporary_server_that_cannot_start_is_one_clear_error(tmp_path, monkeypatch):
    from scorekeeper.api_server import TemporaryServer
    from scorekeeper.errors import ScorekeeperError

    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", f"sqlite+aiosqlite:///{tmp_path}/not-a-folder/prefect.db")
    server = TemporaryServer()
    with pytest.raises(ScorekeeperError, match="Prefect's temporary server exited with code") as failed:
        server.wait_ready(timeout_s=90)  # at once: a failed start is not taken for a busy port
    assert "unable to open database file" in str(failed.value)  # the server's own last words
    server.stop()

"""Faults: a killed or stopped scoring process, a crash between shard and commit, two runs at
once. The job fails within a bounded time, names the rank, publishes nothing, and a rerun under
the same name completes with exactly one prediction per row."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from scorekeeper.errors import RunConflict, ScoringFailed
from scorekeeper.lease import generation_name, generations, lease_holder, run_lease
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from tests.helpers import make_rows, probabilities, reference_probabilities, run_flow, write_rows

pytestmark = pytest.mark.integration


def worker_pid(run_dir: Path, rank: int) -> int | None:
    """The pid of the scoring process of `rank` for this run (torchrun sets RANK in its env): one
    started ahead by this test process (its --owner-pid), or one launched with this run's job."""
    owner = ["--owner-pid", str(os.getpid())]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = any(cmdline[i : i + 2] == owner for i in range(len(cmdline))) or str(run_dir) in " ".join(cmdline)
        if "scorekeeper.worker" in cmdline and ours and f"RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


class Striker(threading.Thread):
    """Sends `signal` to a rank's scoring process once the run has committed its first range
    (read from the run folder's commit records): a machine lost in the middle of the job."""

    def __init__(self, run_dir: Path, rank: int, signal: int):
        super().__init__(daemon=True)
        self.run_dir, self.rank, self.signal = run_dir, rank, signal
        self.struck: int | None = None
        self.finished = threading.Event()

    def run(self) -> None:
        commits = self.run_dir / RunFolder.COMMIT_DIR
        while not self.finished.is_set():
            if any(commits.glob("*.json")) and (pid := worker_pid(self.run_dir, self.rank)):
                os.kill(pid, self.signal)
                self.struck = pid
                return
            time.sleep(0.01)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    data = make_rows(120, seed=7)
    return data, write_rows(tmp_path_factory.mktemp("faults") / "in.csv", data)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_lost_process_fails_the_job_and_a_rerun_completes_exactly_once(tmp_path, models, rows, how):
    """A rank killed (SIGKILL) or stopped (SIGSTOP, found by its silence after collective_timeout_s)
    fails the job naming the rank, publishes nothing and leaves nothing running; after SIGKILL a
    rerun with another process count scores exactly the missing rows (the resume is the same
    whichever way the process was lost, so it runs once)."""
    data, path = rows
    params = dict(input_uri=str(path), model_uri=models["bert"], output_uri=str(tmp_path), run_name="r", rows_per_range=2)
    run_dir = tmp_path / "r"
    striker = Striker(run_dir, 1, getattr(signal, how))

    started = time.time()
    striker.start()
    try:
        with pytest.raises(ScoringFailed) as failure:
            run_flow(2, collective_timeout_s=8, **params)
    finally:
        striker.finished.set()
    assert striker.struck, "the test never found rank 1 to strike"
    assert time.time() - started < 120
    expected = "rank 1 failed: killed by SIGKILL" if how == "SIGKILL" else "rank 1 stopped responding"
    assert expected in str(failure.value)
    assert not (run_dir / "predictions.parquet").exists()
    assert worker_pid(run_dir, 0) is None and worker_pid(run_dir, 1) is None  # nothing left running
    if how == "SIGSTOP":
        return  # the rerun below is the same resume either way: once, after SIGKILL
    # Ranges claimed by the lost process stay uncommitted; the others may all have been committed
    # by its peer (claims are dynamic), and the rerun scores exactly what is missing.
    committed = len(list((run_dir / "work" / "commits").glob("*.json")))

    resumed = run_flow(1, **params)  # another process count resumes the same plan
    assert resumed.scoring["rows_scored"] == 120 - 2 * committed
    assert resumed.predictions.column("row_index").to_pylist() == list(range(120))
    reference = reference_probabilities(models["bert"], [r["text"] for r in data])
    assert abs(probabilities(resumed.predictions) - reference).max() < 1e-4


def test_a_crash_between_shard_and_commit_leaves_the_range_uncommitted(tmp_path, models, rows, monkeypatch):
    """The shard is published first and counts only once its commit record exists."""
    import numpy as np
    import pyarrow as pa

    from scorekeeper.run_folder import IndexRange
    from scorekeeper.tasks.plan import committed_ranges
    from scorekeeper.worker.shards import commit_shard, prediction_table

    run = RunFolder.from_uri(str(tmp_path / "r"))
    table = prediction_table(
        pa.table({"row_index": pa.array([0, 1], pa.int64()), "id": pa.array([0, 1], pa.int64())}), np.full((2, 2), 0.5), ["a", "b"]
    )

    def die(*args, **kwargs):
        raise SystemExit("killed")

    with monkeypatch.context() as m:
        m.setattr(Location, "create_exclusive", die)
        with pytest.raises(SystemExit):
            commit_shard(run, IndexRange(0, 0, 2), table, scoring_fingerprint="fp", attempt="a", tokens=0, truncated=0)
    assert run.list_names("work/shards") and not committed_ranges(run, "fp")
    assert commit_shard(run, IndexRange(0, 0, 2), table, scoring_fingerprint="fp", attempt="b", tokens=0, truncated=0)
    assert list(committed_ranges(run, "fp")) == [0]


def test_two_runs_under_one_name_never_share_the_folder(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "r"))
    run.publish_bytes(b"{}", RunFolder.PLAN)  # a run that wrote something: its folder stays when the lease is released
    with run_lease(run, "r", owner="first"):
        with pytest.raises(RunConflict, match="is being written by another job"):
            with run_lease(run, "r", owner="second"):
                pass
        with run_lease(run, "r", owner="first"):  # a retry of the same flow run takes it over
            pass
    with run_lease(run, "r", owner="second"):  # released: the next run proceeds
        pass
    # A lease left behind by a crashed job expires.
    top = generations(run)[-1]
    run.publish_bytes(b'{"owner": "crashed", "renewed_at": 0}', generation_name(top + 1))
    with run_lease(run, "r", owner="third"):
        assert lease_holder(run)["owner"] == "third" and generations(run)[-1] == top + 2
    assert lease_holder(run) is None and generations(run) == [top + 2]  # released; the older generations removed

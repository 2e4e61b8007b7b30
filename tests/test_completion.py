"""A run is complete when, and only when, its completion record is written, last and atomically:
history, `compare_to previous` and `compare_to NAME` trust nothing else; a failure while publishing
(a really full disk: a small tmpfs) leaves no file that looks complete and ends in one line; an S3
output_uri whose bucket does not exist is one line too; metrics.json is strict JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scorekeeper.errors import InputError, OutputError
from scorekeeper.evaluation.history import completed_runs
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import ScoreRequest
from scorekeeper.report.publish import publish_complete
from scorekeeper.report.report import publish_report
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from scorekeeper.tasks.compare import resolve_baseline
from tests import prefect_session
from tests.helpers import make_rows, write_rows
from tests.report_fixture import full_metrics
from tests.s3server import moto  # noqa: F401  (a fixture)

SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))
METRICS = b'{"rows": 1, "scored": 1, "evaluated": 0}\n'  # a metrics.json as another run wrote it


@pytest.fixture
def small_disk(tmp_path):
    """A real file system that fills up: a tmpfs of 2 MiB (needs root; skipped where mounting is refused)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> None:
    """Leave the file system almost no room (a few KiB)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(folder / "filler", max(0, os.path.getsize(folder / "filler") - 8192))


def test_a_full_disk_while_publishing_leaves_nothing_that_looks_complete(small_disk):
    metrics, run_info = full_metrics(n=300)
    metrics = MetricsDocument.model_validate(metrics)
    output = small_disk / "runs"
    run = RunFolder.under(str(output), "full")
    files = publish_report(run, metrics, run_info)  # room enough: complete
    assert run.read_completion().files.keys() == {Path(u).name for u in files}
    assert [r["run_id"] for r in completed_runs(Location.from_uri(str(output)))] == ["full"]

    _fill(small_disk)  # the disk fills up; the next run's report does not fit
    with pytest.raises(OutputError) as failed:
        publish_report(RunFolder.under(str(output), "late"), metrics, run_info | {"run_id": "late"})
    message = str(failed.value)
    assert "\n" not in message and "no space left on the device" in message and "rerun with the same run_name" in message
    assert not (output / "late" / RunFolder.COMPLETION).exists()
    assert not (output / "late" / "report").exists()  # no metrics.json, no report.html left behind
    assert [r["run_id"] for r in completed_runs(Location.from_uri(str(output)))] == ["full"]


def test_only_the_completion_record_makes_a_run_complete(tmp_path):
    output = tmp_path / "runs"
    plan = {"files": [{"fingerprint": "f"}], "input_fingerprint": "i", "model_fingerprint": "m", "adapter_fingerprint": "a1"}
    for name in ("done", "left-behind", "tampered"):
        (output / name).mkdir(parents=True)
        (output / name / "plan.json").write_text(json.dumps(plan))
        (output / name / "predictions.parquet").write_bytes(b"")
    publish_complete(RunFolder.from_uri(str(output / "done")), {"metrics.json": METRICS}, "2026-12-01T00:00:00+00:00")
    # What a failure while publishing left behind on an earlier version: metrics.json and no record.
    (output / "left-behind" / "report").mkdir()
    (output / "left-behind" / "report" / "metrics.json").write_text('{"rows": 1}')
    # A record that vouches for another metrics.json than the one there.
    publish_complete(RunFolder.from_uri(str(output / "tampered")), {"metrics.json": METRICS}, "2026-12-01")
    (output / "tampered" / "report" / "metrics.json").write_text('{"rows": 2}')

    runs = completed_runs(Location.from_uri(str(output)))
    assert [r["run_id"] for r in runs] == ["done"] and runs[0]["adapter_fingerprint"] == "a1"
    request = ScoreRequest(input_uri=str(tmp_path), model_uri="m", output_uri=str(output), compare_to="left-behind")
    with pytest.raises(InputError, match="'left-behind' .* has not completed"):
        resolve_baseline(request, "now")
    with pytest.raises(InputError, match="'tampered' .*: metrics.json is not the file complete.json vouches for"):
        resolve_baseline(request.model_copy(update={"compare_to": "tampered"}), "now")


@pytest.mark.parametrize("limit", ["1e999", "inf", "-inf", "nan", "NaN", "Infinity"])
def test_non_finite_gate_limits_are_refused_up_front(limit, capsys):
    from scorekeeper.cli import main

    assert main(["run", "--input-uri", "x.csv", "--model-uri", "m", "--output-uri", "o", "--gates", f"accuracy>={limit}"]) == 2
    err = capsys.readouterr().err
    assert "gate 'accuracy'" in err and ("not a finite number" in err or "is not OP NUMBER" in err), err


@pytest.mark.integration
def test_an_s3_output_uri_whose_bucket_does_not_exist_is_one_line(tmp_path, models, moto, monkeypatch):
    """The flow's error, in this process, reaching S3 through the standard AWS chain: exit code 3
    and one line, which the CLI prints as its last (as the full-disk CLI run below shows)."""
    from tests.helpers import run_flow

    with moto.in_this_process(monkeypatch), pytest.raises(OutputError) as failed:
        run_flow(
            1, input_uri=str(write_rows(tmp_path / "in.csv", make_rows(4))), model_uri=models["bert"],
            output_uri="s3://no-such-bucket/runs", run_name="r",
        )  # fmt: skip
    assert failed.value.exit_code == 3
    assert str(failed.value) == (
        "cannot write into the run folder s3://no-such-bucket/runs/r: the bucket does not exist (create it, or fix output_uri)"
    )


@pytest.mark.integration
def test_a_full_disk_under_output_uri_ends_the_cli_in_one_line(tmp_path, models, small_disk):
    """A run on a real file system that is full when it publishes: one line, no traceback, nothing
    complete. The CLI runs once, for the run that fails (its exit code and its one line); the run
    that fills the folder and the run on a disk full from the start are flows in this process."""
    import shutil

    from scorekeeper.errors import ScorekeeperError
    from tests.helpers import run_flow

    params = dict(input_uri=str(write_rows(tmp_path / "in.csv", make_rows(8))), model_uri=models["bert"], run_name="r")

    # Full from the start: the run stops wherever it first writes (lease, staged input), in one line.
    _fill(small_disk)
    with pytest.raises(ScorekeeperError) as full:
        run_flow(1, output_uri=str(small_disk), **params)
    message = str(full.value)
    assert full.value.exit_code == 3 and "\n" not in message and "no space left on the device" in message, message
    os.unlink(small_disk / "filler")
    shutil.rmtree(small_disk / "r", ignore_errors=True)

    # Scored and published while there is room; then, without its report, rerun on a full disk.
    run_flow(1, output_uri=str(small_disk), **params)
    shutil.rmtree(small_disk / "r" / "report")
    os.unlink(small_disk / "r" / "complete.json")
    _fill(small_disk)
    args = ["run", "--input-uri", params["input_uri"], "--model-uri", models["bert"], "--num-processes", "1", "--run-name", "r"]
    env = prefect_session.cli_environment({**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")})
    done = subprocess.run([SCOREKEEPER, *args, "--output-uri", str(small_disk)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() or "no space" in line.lower()]
    assert len(errors) == 1 and "no space left on the device" in errors[0] and "report" in errors[0], done.stderr[-3000:]
    assert not (small_disk / "r" / "complete.json").exists() and not (small_disk / "r" / "report" / "metrics.json").exists()

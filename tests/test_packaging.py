"""The built wheel: one namespace (nothing named `flows` or `tasks` in site-packages), its data
files inside, and `scorekeeper run` working from it outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import make_rows, write_rows

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = out.glob("scorekeeper-*.whl")
    return found


def test_the_wheel_installs_one_namespace_with_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"scorekeeper", wheel.name.split("-py3")[0] + ".dist-info"}
    for expected in ("scorekeeper/flows/score.py", "scorekeeper/tasks/read.py", "scorekeeper/worker/__main__.py", "scorekeeper/cli.py"):
        assert expected in names
    assert any(n.startswith("scorekeeper/evaluation/sql/") and n.endswith(".sql") for n in names)
    assert any(n.startswith("scorekeeper/report/templates/") for n in names)


def test_scorekeeper_run_works_from_the_wheel_outside_the_checkout(wheel, tmp_path, models):
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = make_rows(9, seed=2)
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The wheel's copy first on the path; the dependencies come from this environment. The scoring
    # process inherits PYTHONPATH, so it runs the wheel's worker too.
    env = dict(os.environ, PYTHONPATH=str(target))
    env.pop("PREFECT_API_URL", None)
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, scorekeeper.flows.score as f, scorekeeper.worker as w; print(json.dumps([f.__file__, w.__file__]))",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr[-2000:]
    assert all(path.startswith(str(target)) for path in json.loads(where.stdout)), where.stdout
    run = subprocess.run(
        [sys.executable, "-m", "scorekeeper.cli", "run", "--input-uri", str(data), "--model-uri", models["bert"]]
        + ["--output-uri", str(tmp_path / "runs"), "--id-column", "review_id", "--run-name", "from-wheel"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "scorekeeper: run from-wheel scored 9 rows" in run.stdout
    metrics = json.loads((tmp_path / "runs" / "from-wheel" / "report" / "metrics.json").read_text())
    assert metrics["rows"] == metrics["scored"] == 9

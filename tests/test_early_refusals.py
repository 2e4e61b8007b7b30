"""Refusals before the start-up (scorekeeper/precheck.py): the CLI reads and checks the input's
schema, ids and encodings before it starts Prefect's temporary server or any scoring process, and
the messages name what a person needs: a duplicate id's both rows and both files, a decoding
error's column by name, its file and its first row. The flow's read step says the same."""

from __future__ import annotations

import pytest

from scorekeeper import cli
from scorekeeper.errors import InputError
from scorekeeper.launch import ScoringProcesses
from scorekeeper.params import ScoreRequest
from scorekeeper.precheck import precheck
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.read import read_inputs
from tests.helpers import make_rows, write_rows
from tests.s3server import moto  # noqa: F401  (a fixture)


@pytest.fixture
def nothing_starts(monkeypatch):
    """Starting the temporary server or scoring processes fails the test."""

    def started(*args, **kwargs):
        raise AssertionError("something started before the input was refused")

    monkeypatch.setattr(cli, "_start_server", started)
    monkeypatch.setattr(ScoringProcesses, "start", started)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)


def _two_files_with_one_id(tmp_path):
    rows = make_rows(6)
    rows[5]["review_id"] = rows[1]["review_id"]  # b.csv's third row repeats a.csv's second
    write_rows(tmp_path / "in" / "a.csv", rows[:3])
    write_rows(tmp_path / "in" / "b.csv", rows[3:])
    return rows[1]["review_id"]


def _latin1(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "l1.csv").write_bytes("review_id,text\nr1,fine\nr2,caf\xe9 cr\xe8me\n".encode("latin-1"))


def _cli(tmp_path, *extra) -> list[str]:
    return [
        "run",
        "--input-uri",
        str(tmp_path / "in"),
        "--model-uri",
        str(tmp_path / "no-model"),
        "--output-uri",
        str(tmp_path / "out"),
        *extra,
    ]


def test_a_duplicate_id_across_two_files_is_refused_before_anything_starts_naming_both(tmp_path, capsys, nothing_starts):
    repeated = _two_files_with_one_id(tmp_path)
    assert cli.main(_cli(tmp_path, "--id-column", "review_id")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (
        f"id column 'review_id' has duplicate values: '{repeated}' x2 at row_index 1 (a.csv, its row 2) and row_index 5 (b.csv, its row 3)"
        in err
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.json"))


def test_text_that_is_not_utf8_is_refused_before_anything_starts_naming_the_column_file_and_row(tmp_path, capsys, nothing_starts):
    _latin1(tmp_path)
    assert cli.main(_cli(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "column 'text' is not valid UTF-8 text at its row 2" in err and "l1.csv" in err, err
    assert "column #" not in err


def test_the_read_step_and_the_flows_precheck_say_the_same(tmp_path):
    repeated = _two_files_with_one_id(tmp_path)
    request = ScoreRequest(input_uri=str(tmp_path / "in"), model_uri="m", output_uri=str(tmp_path / "out"), id_column="review_id")
    said = f"'{repeated}' x2 at row_index 1 (a.csv, its row 2) and row_index 5 (b.csv, its row 3)"
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        precheck(request)
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        read_inputs(request, RunFolder.under(request.output_uri, "r"))
    precheck(request.model_copy(update={"id_column": None}))  # the rows themselves are fine: no refusal


# -- refusals that need the model's window (scorekeeper/precheck.py: precheck_model) ---------------

WINDOW_REFUSALS = [
    (["--long-text", "head_tail", "--head-tokens", "22"], "head_tokens 22 leaves no room for the tail: the window is 22"),  # W = 24 - 2
    (["--long-text", "chunk", "--chunk-overlap", "22"], "chunk_overlap 22 leaves windows no room to advance: the window is 22"),
    (["--long-text", "chunk", "--chunk-aggregate", "max"], "chunk_aggregate max takes each output's largest value"),  # single_label
]


@pytest.fixture(scope="module")
def short_window_model(tmp_path_factory):
    """A tiny single-label BERT whose window is 24 tokens (22 of content)."""
    from tests.models import build_tiny_classifier

    return build_tiny_classifier(tmp_path_factory.mktemp("window") / "model", "bert", seed=1, max_position_embeddings=24)


@pytest.mark.parametrize("options, message", WINDOW_REFUSALS, ids=["head_tokens", "chunk_overlap", "max_single_label"])
def test_window_refusals_come_before_anything_starts(tmp_path, capsys, nothing_starts, short_window_model, options, message):
    write_rows(tmp_path / "in" / "a.csv", make_rows(4))
    args = ["run", "--input-uri", str(tmp_path / "in"), "--model-uri", str(short_window_model), "--output-uri", str(tmp_path / "out")]
    assert cli.main([*args, *options]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scorekeeper: error: ") and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_window_that_has_room_is_not_refused_early(tmp_path, short_window_model):
    from scorekeeper.precheck import precheck_model

    request = ScoreRequest(input_uri="x", model_uri=str(short_window_model), output_uri="o")
    for update in ({"long_text": "head_tail", "head_tokens": 21}, {"long_text": "chunk", "chunk_overlap": 21}, {"long_text": "truncate"}):
        precheck_model(request.model_copy(update=update))
    precheck_model(request.model_copy(update={"model_uri": str(tmp_path / "no-model"), "long_text": "chunk"}))  # left to the flow


@pytest.mark.integration
def test_window_refusals_on_object_storage_are_one_line_with_no_server_and_no_flow_run(tmp_path, short_window_model, moto):
    """`scorekeeper run` with the model folder on S3: the few config files are fetched alone, the
    refusal is one line, exit 2, and no Prefect server nor flow run starts."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    bucket = moto.create_bucket("models")
    model_uri = moto.upload_folder(short_window_model, f"s3://{bucket}/models/short")
    write_rows(tmp_path / "in.csv", make_rows(4))
    env = moto.environment() | {"PREFECT_HOME": str(tmp_path / ".prefect")}
    env.pop("PREFECT_API_URL", None)
    scorekeeper = str(Path(sys.executable).with_name("scorekeeper"))
    for options, message in WINDOW_REFUSALS:
        args = ["run", "--input-uri", str(tmp_path / "in.csv"), "--model-uri", model_uri, "--output-uri", str(tmp_path / "out"), *options]
        began = time.perf_counter()
        done = subprocess.run([scorekeeper, *args], env=env, capture_output=True, text=True, timeout=120)
        wall = time.perf_counter() - began
        print(f"\n{' '.join(options)}: exit {done.returncode} in {wall:.2f} s")
        assert done.returncode == 2, done.stderr[-3000:]
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr[-3000:]  # no server, no flow run said anything
        # A temporary server and a flow run took 14-43 s; the 3 s target is bench/early_refusal.py's
        # (an idle machine): here, on a shared one, a bound with room for its load.
        assert wall < 20.0, f"the refusal took {wall:.2f} s"
        assert not (tmp_path / "out").exists() and not (tmp_path / ".prefect").exists()


# -- labels handed back to a run with a labelling plan (scorekeeper/precheck.py: _precheck_plan_labels) ---


def _run_with_a_plan(tmp_path):
    """runs/night: a published single-label run (bench/golden.py's generated rows, ids 0..239, no
    labels) with a pinned labelling plan of about 40 rows; returns its folder and the plan's ids."""
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    from scorekeeper.evaluation import labelling
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.labelling import LabelRequest
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.report.publish import publish_complete

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import golden

    night = tmp_path / "runs" / "night"
    golden._single_label(night, 3, 1.0, False)
    pq.write_table(pq.read_table(night / "work" / "input.parquet").drop(["label"]), night / "work" / "input.parquet")
    run = RunFolder.from_uri(str(night))
    request = LabelRequest(key="night", budget=40, sampling="active")
    document = evaluate_run(run, golden.SENTIMENT, golden._manifest(night), EvaluationSettings(labelling=request))
    files = {labelling.PLAN_FILE: run.read_bytes(labelling.PLAN_WORK), "metrics.json": document.to_json_bytes()}
    publish_complete(run, files, "2026-12-03T00:00:00+00:00")
    return night, set(pq.read_table(night / "report" / "label_plan.parquet").column("id").to_pylist())


def _labels_back(tmp_path, name: str, ids) -> list[str]:
    write_rows(tmp_path / name, [{"review_id": i, "label": "positive"} for i in sorted(ids)])
    write_rows(tmp_path / "in" / "a.csv", make_rows(4))
    return [
        *_cli(tmp_path, "--id-column", "review_id", "--label-column", "label", "--ground-truth-uri", str(tmp_path / name)),
        *("--output-uri", str(tmp_path / "runs"), "--run-name", "night", "--label-budget", "40"),
    ]


def test_the_labels_of_another_runs_plan_are_refused_before_anything_starts(tmp_path, capsys, nothing_starts):
    night, plan = _run_with_a_plan(tmp_path)
    outside = [i for i in range(240) if i not in plan][:6]
    files = {p: p.stat().st_mtime_ns for p in night.rglob("*")}
    assert cli.main(_labels_back(tmp_path, "elsewhere.csv", outside)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scorekeeper: error: "), err
    assert f"ground_truth_uri labels none of the {len(plan)} rows of run night's labelling plan but 6 rows outside it" in err, err
    assert f"(ids {', '.join(sorted(str(i) for i in outside)[:3])}, ...)" in err and "another run's plan" in err, err
    assert {p: p.stat().st_mtime_ns for p in night.rglob("*")} == files  # nothing written


def test_the_plans_own_labels_and_labels_of_no_row_of_the_run_are_not_refused_early(tmp_path, monkeypatch):
    night, plan = _run_with_a_plan(tmp_path)
    args = _labels_back(tmp_path, "labels.csv", list(plan)[1:] + [i for i in range(240) if i not in plan][:5])
    request = ScoreRequest(
        input_uri=args[2], model_uri="m", output_uri=str(tmp_path / "runs"), run_name="night", id_column="review_id",
        label_column="label", ground_truth_uri=str(tmp_path / "labels.csv"), label_budget=40,
    )  # fmt: skip
    precheck(request)  # the plan's rows (all but one) and a few others: the labels-back run
    write_rows(tmp_path / "strangers.csv", [{"review_id": f"x{i}", "label": "positive"} for i in range(5)])
    precheck(request.model_copy(update={"ground_truth_uri": str(tmp_path / "strangers.csv")}))  # no row of the run: the flow says so

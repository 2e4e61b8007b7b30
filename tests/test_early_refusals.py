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

"""Reading and staging: the input order, and one clear message for each kind of bad input."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.read import read_inputs
from tests.helpers import make_rows, write_rows


def stage(tmp_path, input_uri, **params):
    request = ScoreRequest(input_uri=str(input_uri), model_uri="unused", output_uri=str(tmp_path / "out"), run_name="r", **params)
    run = RunFolder.from_uri(str(tmp_path / "out" / "r"))
    manifest = read_inputs(request, run)
    return manifest, pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet")


def test_files_are_ordered_by_full_path_and_rows_by_position(tmp_path):
    rows = make_rows(10)
    write_rows(tmp_path / "in" / "b.csv", rows[4:7])
    write_rows(tmp_path / "in" / "a" / "z.jsonl", rows[:4])
    write_rows(tmp_path / "in" / "c.parquet", rows[7:])
    (tmp_path / "in" / "_SUCCESS").write_text("")
    manifest, staged = stage(tmp_path, tmp_path / "in", id_column="review_id", rows_per_range=3)
    assert staged.column("row_index").to_pylist() == list(range(10))
    assert staged.column("id").to_pylist() == [r["review_id"] for r in rows]
    assert staged.column("text").to_pylist() == [r["text"] for r in rows]
    assert [f.uri.rsplit("/", 1)[1] for f in manifest.files] == ["z.jsonl", "b.csv", "c.parquet"]
    assert pq.ParquetFile(tmp_path / "out" / "r" / "work" / "input.parquet").metadata.num_row_groups == 4


def test_glob_and_the_row_index_as_id(tmp_path):
    write_rows(tmp_path / "x1.csv", make_rows(3))
    write_rows(tmp_path / "x2.csv", make_rows(2, seed=1))
    manifest, staged = stage(tmp_path, tmp_path / "x*.csv")
    assert manifest.total_rows == 5 and staged.column("id").to_pylist() == list(range(5))


def test_null_text_is_refused_with_its_rows_or_scored_empty(tmp_path):
    rows = make_rows(6)
    rows[2]["text"] = None
    rows[5]["text"] = None
    path = write_rows(tmp_path / "in.jsonl", rows)
    with pytest.raises(InputError, match=r"null in 2 row\(s\); first row_index: 2, 5.*null-text empty"):
        stage(tmp_path, path)
    manifest, staged = stage(tmp_path, path, null_text="empty")  # the refused attempt published nothing
    assert staged.column("text").to_pylist()[2] == "" and manifest.null_text_rows == 2


@pytest.mark.parametrize(
    "make, params, message",
    [
        (lambda d: d / "nothing.csv", {}, "input not found"),
        (lambda d: _empty_csv(d), {}, "no rows in the input"),
        (
            lambda d: write_rows(d / "m.csv", make_rows(3)),
            {"text_column": "body"},
            r"column 'body' not found in .*m.csv; its columns are: review_id, text, label",
        ),
        (
            lambda d: write_rows(d / "d.csv", make_rows(3) + make_rows(2)),
            {"id_column": "review_id"},
            r"duplicate values: 'r00000' x2 \(first at row_index 0\)",
        ),
        (lambda d: _truncated_parquet(d), {}, r"cannot read .*broken.parquet"),
        (lambda d: _bad_utf8(d), {}, r"cannot read .*bad.csv"),
        (
            lambda d: _schemas_differ(d),
            {"id_column": "review_id"},
            r"schemas differ across files: column 'review_id' is integer in .*a.jsonl but text in .*b.jsonl",
        ),
        (lambda d: _numeric_text(d), {}, r"column 'text' in .*num.jsonl is int64, not text"),
        (lambda d: _text_file(d), {}, "unsupported file type"),
        (
            lambda d: write_rows(d / "s.csv", make_rows(2)),
            {"text_column": 'text"); DROP TABLE staged; --'},
            r"column 'text\"\); DROP TABLE staged; --' not found",
        ),
    ],
    ids=[
        "not-found",
        "no-rows",
        "missing-column",
        "duplicate-ids",
        "truncated-file",
        "invalid-utf8",
        "schemas-differ",
        "text-not-text",
        "unsupported",
        "sql-like-name",
    ],
)
def test_bad_input_gets_one_clear_message(tmp_path, make, params, message):
    path = make(tmp_path)
    with pytest.raises(InputError, match=message):
        stage(tmp_path, path, **params)
    assert not (tmp_path / "out" / "r" / "work" / "input.parquet").exists()


def _empty_csv(d):
    p = d / "e.csv"
    p.write_text("text,label\n")
    return p


def _truncated_parquet(d):
    write_rows(d / "ok.parquet", make_rows(50))
    data = (d / "ok.parquet").read_bytes()
    (d / "broken.parquet").write_bytes(data[: len(data) // 2])
    return d / "broken.parquet"


def _bad_utf8(d):
    p = d / "bad.csv"
    p.write_bytes(b"text,label\nfine,positive\n\xff\xfe broken,negative\n")
    return p


def _schemas_differ(d):
    (d / "in").mkdir()
    (d / "in" / "a.jsonl").write_text(json.dumps({"review_id": 1, "text": "a", "label": "positive"}) + "\n")
    (d / "in" / "b.jsonl").write_text(json.dumps({"review_id": "x", "text": "b", "label": "positive"}) + "\n")
    return d / "in"


def _numeric_text(d):
    p = d / "num.jsonl"
    p.write_text(json.dumps({"text": 12, "label": "positive"}) + "\n")
    return p


def test_parameters_are_validated_with_clear_messages():
    from pydantic import ValidationError

    base = dict(input_uri="a", model_uri="m", output_uri="o")
    for bad, message in [
        ({"run_name": "../escape"}, "run_name"),
        ({"run_name": "/abs"}, "run_name"),
        ({"num_processes": 0}, "at least 1"),
        ({"ground_truth_uri": "g"}, "set id_column too"),
        ({"text_pair_column": "text"}, "must differ"),
        ({"text_column": "a\x00b"}, "not a usable column name"),
    ]:
        with pytest.raises(ValidationError, match=message):
            ScoreRequest(**base, **bad)


def _text_file(d):
    p = d / "notes.txt"
    p.write_text("text\nhello\n")
    return p

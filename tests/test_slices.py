"""Slice columns as given: repeated options add up, nested columns are refused up front, null stays
null through staging (the null group's metrics are in test_ranking_metrics.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.cli import build_parser, request_options
from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.read import read_inputs


def test_repeated_slice_options_are_all_kept():
    args = vars(
        build_parser().parse_args(
            ["run", "--input-uri", "x", "--model-uri", "m", "--output-uri", "o", "--slice-columns", "a", "--slice-columns", "b,c", "d"]
        )
    )
    args.pop("command")
    request = ScoreRequest(**request_options(args))
    assert request.slice_columns == ["a", "b", "c", "d"]
    assert ScoreRequest(input_uri="x", model_uri="m", output_uri="o", slice_columns=["a", "b", "a"]).slice_columns == ["a", "b"]


def _stage(tmp_path, table: pa.Table, fmt: str = "parquet", **params):
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    request = ScoreRequest(input_uri=str(path), model_uri="unused", output_uri=str(tmp_path / "out"), run_name="r", **params)
    run = RunFolder.from_uri(str(tmp_path / "out" / "r"))
    return read_inputs(request, run)


@pytest.mark.parametrize(
    "column,kind",
    [
        (pa.array([{"a": 1}, {"a": 2}]), "struct"),
        (pa.array([[1, 2], [3]]), "list"),
        (pa.array([[("k", 1)], [("k", 2)]], pa.map_(pa.string(), pa.int64())), "map"),
    ],
)
def test_nested_slice_columns_are_refused_up_front(tmp_path, column, kind):
    table = pa.table({"text": ["a b", "c"], "label": ["x", "y"], "meta": column})
    with pytest.raises(InputError) as refused:
        _stage(tmp_path, table, slice_columns=["meta"])
    message = str(refused.value)
    assert message.startswith(f"slice column 'meta' in {tmp_path / 'in.parquet'} is {kind}<")
    assert message.endswith(": slice columns must hold single values (text, numbers, booleans, dates), not structs, lists or maps")
    assert not (tmp_path / "out" / "r" / "work").exists()  # nothing published


def test_nested_json_slice_column_is_refused(tmp_path):
    table = pa.table({"text": ["a b", "c"], "label": ["x", "y"], "meta": pa.array([{"a": 1}, {"a": 2}])})
    with pytest.raises(InputError, match=r"slice column 'meta' in .*in\.jsonl is struct<a: int64>"):
        _stage(tmp_path, table, fmt="jsonl", slice_columns=["meta"])


def test_null_slice_values_stay_null_and_apart_from_text(tmp_path):
    table = pa.table(
        {
            "text": ["a", "b", "c", "d"],
            "label": ["x", "y", "x", "y"],
            "region": [None, "None", "null", "eu"],
            "year": pa.array([2020, None, 2021, 2020], pa.int64()),
        }
    )
    _stage(tmp_path, table, slice_columns=["region", "year"])
    staged = pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet")
    assert staged.column("slice_0").to_pylist() == [None, "None", "null", "eu"]
    assert staged.column("slice_1").to_pylist() == ["2020", None, "2021", "2020"]

"""The benchmark's scoring step (method c): streamed ranges, and the worker's own predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.step import main, read_ranges
from tests.helpers import make_rows, reference_probabilities


def test_ranges_are_consecutive_and_exact_across_row_groups(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": [f"t{i}" for i in range(23)]}), path, row_group_size=4)
    got = list(read_ranges(str(path), rows_per_range=5))
    assert [(r.index, r.start, r.end) for r, _ in got] == [(0, 0, 5), (1, 5, 10), (2, 10, 15), (3, 15, 20), (4, 20, 23)]
    for r, rows in got:
        assert rows.column("text").to_pylist() == [f"t{i}" for i in range(r.start, r.end)]
        assert rows.column("row_index").to_pylist() == list(range(r.start, r.end))


@pytest.mark.slow  # scores in a fresh interpreter that imports torch
def test_step_matches_the_single_row_reference_and_imports_no_flow(tmp_path, models):
    rows = make_rows(30, max_words=60)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": [r["text"] for r in rows]}), path, row_group_size=7)
    out, probs = tmp_path / "out.json", tmp_path / "p.npz"
    args = [
        "--model",
        models["bert"],
        "--input",
        str(path),
        "--json",
        str(out),
        "--probs",
        str(probs),
        "--rows-per-range",
        "8",
        "--tokens-per-batch",
        "200",
    ]
    # In a fresh interpreter, so that what it imported is its own (the GPU machine has no Prefect).
    code = (
        "import sys; from bench.step import main; rc = main(sys.argv[1:]); "
        "assert not {'prefect', 'duckdb'} & set(sys.modules), 'imported the flow side'; sys.exit(rc)"
    )
    subprocess.run([sys.executable, "-c", code, *args], check=True, cwd=Path(__file__).resolve().parents[1])
    result = json.loads(out.read_text())
    assert (result["rows"], result["ranges"]) == (30, 4)
    assert 0 < result["useful_tokens"] <= result["padded_tokens"]
    saved = np.load(probs)
    assert saved["index"].tolist() == list(range(30))
    reference = reference_probabilities(models["bert"], [r["text"] for r in rows])
    assert np.abs(saved["probs"] - reference).max() < 1e-4


def test_max_rows_stops_after_the_range_holding_that_row(tmp_path, models):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": [r["text"] for r in make_rows(40)]}), path)
    out = tmp_path / "out.json"
    main(["--model", models["bert"], "--input", str(path), "--json", str(out), "--rows-per-range", "8", "--max-rows", "10"])
    assert json.loads(out.read_text())["rows"] == 16

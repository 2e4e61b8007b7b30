"""Reading and staging: the input order, and one clear message for each kind of bad input."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


WORDS = ["good", "bad", "so so", "007", "None", "a, b"]


@st.composite
def cells(draw):
    """Rows whose text may be empty and whose other columns' cells may be missing (None)."""
    n = draw(st.integers(1, 6))
    maybe = st.none() | st.sampled_from(WORDS)
    return [
        {
            "id": f"r{i}",
            "text": draw(st.sampled_from(["", *WORDS])),
            "pair": draw(maybe),
            "label": draw(st.none() | st.sampled_from(["pos", "neg"])),
            "s": draw(maybe),
        }
        for i in range(n)
    ]


@settings(deadline=None, derandomize=True, database=None, max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells())
def test_an_empty_csv_cell_stages_as_its_columns_one_rule_in_every_format(tmp_path_factory, rows):
    """One rule per column for a missing cell (scorekeeper/staging/columns.py empty_cell_is_missing):
    an empty CSV cell is what a JSON Lines or Parquet null is in every column but the text, where
    it is the empty text. So a text pair's empty cell is a null text like a null pair: refused
    under null_text error, counted in null_text_rows (once per row) under empty; and the same rows
    stage the same from every format."""
    params = {"id_column": "id", "text_pair_column": "pair", "slice_columns": ["s"]}
    missing_pair = [i for i, r in enumerate(rows) if r["pair"] is None]
    staged = {}
    for suffix in ("csv", "jsonl", "parquet"):
        root = tmp_path_factory.mktemp(suffix)
        path = write_rows(root / f"in.{suffix}", rows)
        if missing_pair:
            with pytest.raises(InputError, match=rf"null in {len(missing_pair)} row\(s\); first row_index: {missing_pair[0]}\b"):
                stage(root, path, **params)
        manifest, table = stage(root / "empty", path, null_text="empty", **params)
        assert manifest.null_text_rows == len(missing_pair), suffix
        staged[suffix] = table.to_pylist()
    assert staged["csv"] == staged["jsonl"] == staged["parquet"]
    assert [r["text_pair"] for r in staged["csv"]] == ["" if r["pair"] is None else r["pair"] for r in rows]
    assert [r["slice_0"] for r in staged["csv"]] == [r["s"] for r in rows]
    from scorekeeper.staging.columns import empty_cell_is_missing

    assert [c for c in ("text", "text_pair", "id", "label", "slice_0") if not empty_cell_is_missing(c)] == ["text"]


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
            r"duplicate values: 'r00000' x2 at row_index 0 \(d.csv, its row 1\) and row_index 3 \(d.csv, its row 4\)",
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
        (lambda d: _utf16(d, "text,label\nhello,positive\n"), {}, r"cannot read .*u16.csv: it is UTF-16 text .*save it as UTF-8$"),
        (lambda d: _utf16(d, "text\nhello\n"), {}, r"cannot read .*u16.csv: it is UTF-16 text"),
        (
            lambda d: _latin1_header(d),
            {},
            r"cannot read .*l1.csv: its header \(the column names\) is not valid UTF-8 text; the file may be Latin-1",
        ),
        (
            lambda d: _json_array(d, 2),
            {},
            r"cannot read .*arr.json: it holds a JSON array, not JSON Lines: write one JSON object per line$",
        ),
        (lambda d: _json_array(d, None), {}, r"cannot read .*arr.json: it holds a JSON array, not JSON Lines"),
        (
            lambda d: _joined_with_headers(d),
            {},
            r"cannot read .*joined.csv: its row 3 \(from 1, the header not counted\) repeats the header \(text, label\): "
            r"files joined with their headers\?",
        ),
        (
            lambda d: _unsplit_row(d),
            {},
            r"cannot read .*split.csv.gz: CSV parse error at its row 3 \(from 1, the header not counted\): "
            r"Expected 2 columns, got 3: a, b,x+ \.\.\.$",
        ),
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
        "utf16-csv",
        "utf16-one-column",
        "latin1-header",
        "json-array",
        "json-array-one-line",
        "csv-header-repeated",
        "csv-row-unsplit",
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


def _utf16(d, text):
    """Excel's "Unicode text" export: pyarrow said "Expected 2 columns, got 1"."""
    p = d / "u16.csv"
    p.write_bytes(text.encode("utf-16"))
    return p


def _latin1_header(d):
    """A French export's header in Latin-1: pyarrow decodes the names only when asked, and the
    UnicodeDecodeError left the read step as a traceback (exit 1)."""
    p = d / "l1.csv"
    p.write_bytes("text,catégorie,label\nbonjour,a,positive\n".encode("latin-1"))
    return p


def _json_array(d, indent):
    """A JSON array in a .json file (read as JSON Lines): pyarrow said "Column() changed from object to array in row 0"."""
    p = d / "arr.json"
    p.write_text(json.dumps([{"text": "a", "label": "positive"}, {"text": "b", "label": "negative"}], indent=indent))
    return p


def _joined_with_headers(d):
    """Two CSV files joined with `cat`: the second header was a data row, scored, its label 'label' an unknown label."""
    p = d / "joined.csv"
    p.write_text("text,label\ngreat,positive\nbad,negative\n\ufefftext,label\nfine,neutral\n")  # the second file's BOM kept
    return p


def test_a_row_that_only_looks_like_the_header_in_some_columns_is_data(tmp_path):
    (tmp_path / "a.csv").write_text("text,label\ntext,positive\ngood,label\n")
    (tmp_path / "b.csv").write_text("text\ntext\n")  # one column read: a text may be the word itself
    for name, rows in (("a.csv", 2), ("b.csv", 1)):
        _, staged = stage(tmp_path, tmp_path / name)
        assert staged.num_rows == rows


def _unsplit_row(d):
    """A row with a comma too many, after a quoted cell that spans two lines: pyarrow named the row by
    its start alone, not by its place in the file."""
    import gzip

    p = d / "split.csv.gz"
    p.write_bytes(gzip.compress(('text,label\n"two\nlines",positive\nfine,negative\na, b,' + "x" * 5000 + "\n").encode()))
    return p


def _numeric_text(d):
    p = d / "num.jsonl"
    p.write_text(json.dumps({"text": 12, "label": "positive"}) + "\n")
    return p


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("column", ["text", "review_id", "label"])
def test_text_that_is_not_utf8_in_json_lines_or_parquet_is_refused_naming_the_column_file_and_row(tmp_path, fmt, column):
    """pyarrow checks a CSV's cells, not a JSON Lines file's strings nor a Parquet file's: a Latin-1
    'café' was staged, then failed where it was first decoded (the tokenizer's sample: a
    UnicodeDecodeError traceback, exit 1; a row past the sample: a scoring process, exit 3)."""
    import pyarrow as pa

    rows = [{"review_id": f"r{i}", "text": f"review {i}", "label": "positive"} for i in range(5)]
    cells = [r[column].encode() for r in rows]
    cells[3] = b"caf\xe9"
    (tmp_path / "in").mkdir()
    write_rows(tmp_path / "in" / "a.csv", make_rows(2))
    if fmt == "jsonl":
        lines = [json.dumps(r).encode() for r in rows]
        lines[3] = lines[3].replace(f'"{rows[3][column]}"'.encode(), b'"' + cells[3] + b'"')
        path = tmp_path / "in" / "b.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
    else:
        table = {k: pa.array([r[k] for r in rows]) for k in rows[0]}
        table[column] = pa.array(cells, pa.binary()).view(pa.string())
        path = tmp_path / "in" / "b.parquet"
        pq.write_table(pa.table(table), path)
    message = rf"cannot read .*b\.{fmt}: column '{column}' is not valid UTF-8 text at row_index 5 \(its row 4\); the file may be Latin-1"
    with pytest.raises(InputError, match=message):
        stage(tmp_path, tmp_path / "in", id_column="review_id")
    if column != "text":  # the same file as ground truth
        write_rows(tmp_path / "in.csv", make_rows(2))
        truth = rf"cannot read .*b\.{fmt}: column '{column}' is not valid UTF-8 text at its row 4; the file may be Latin-1"
        with pytest.raises(InputError, match=truth):
            stage(tmp_path, tmp_path / "in.csv", id_column="review_id", ground_truth_uri=str(path))


def test_duplicate_ground_truth_ids_are_named_with_their_files_and_rows(tmp_path):
    """Ground truth with an id twice, across two files: the refusal names the id, its count and
    each copy's file and row there, as the input's refusal does (the ground truth has no row_index)."""
    write_rows(tmp_path / "in.csv", make_rows(4))
    (tmp_path / "gt").mkdir()
    write_rows(tmp_path / "gt" / "a.csv", make_rows(3))
    write_rows(tmp_path / "gt" / "b.csv", make_rows(4)[2:])
    message = r"ground truth id column 'review_id' has duplicate values: 'r00002' x2 at a\.csv, its row 3 and b\.csv, its row 1$"
    with pytest.raises(InputError, match=message):
        stage(tmp_path, tmp_path / "in.csv", id_column="review_id", ground_truth_uri=str(tmp_path / "gt"))
    assert not (tmp_path / "out" / "r" / "work" / "ground_truth.parquet").exists()


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


def test_an_empty_csv_cell_is_a_missing_label_id_or_slice_value_whatever_the_column_type(tmp_path):
    # pyarrow reads an empty cell as null in an integer column but as "" in a text column: an empty
    # label among label names became the unknown label "" (an error in accuracy) while the same
    # cell among integer labels was left out. Both are missing labels; the text keeps "".
    (tmp_path / "names.csv").write_text("id,text,label,s\n007,good,positive,x\n008,,,\n009,bad,None,None\n")
    manifest, staged = stage(tmp_path, tmp_path / "names.csv", id_column="id", slice_columns=["s"])
    assert staged.column("label").to_pylist() == ["positive", None, "None"]
    assert staged.column("slice_0").to_pylist() == ["x", None, "None"]
    assert staged.column("text").to_pylist() == ["good", "", "bad"]
    assert staged.column("id").to_pylist() == ["007", "008", "009"]
    (tmp_path / "ids.csv").write_text("id,text,label\n1,good,2\n2,bad,\n")
    _, staged = stage(tmp_path / "b", tmp_path / "ids.csv", id_column="id")
    assert staged.column("label").to_pylist() == [2, None]
    (tmp_path / "noid.csv").write_text("id,text\n007,good\n,bad\n")
    with pytest.raises(InputError, match=r"id column 'id' is null at row_index 1"):
        stage(tmp_path / "c", tmp_path / "noid.csv", id_column="id")


def test_an_empty_csv_cell_in_a_ground_truth_file_is_a_missing_label(tmp_path):
    (tmp_path / "in.csv").write_text("id,text\n007,good\n008,bad\n")
    (tmp_path / "gt.csv").write_text("id,gold\n007,positive\n008,\n")
    _, _ = stage(tmp_path, tmp_path / "in.csv", id_column="id", ground_truth_uri=str(tmp_path / "gt.csv"), label_column="gold")
    truth = pq.read_table(tmp_path / "out" / "r" / "work" / "ground_truth.parquet")
    assert truth.column("label").to_pylist() == ["positive", None]


def test_nan_in_a_float_label_column_is_a_missing_label(tmp_path):
    # NumPy's missing value in a float label column (written by Polars, or pa.array(ndarray)) was
    # refused as "non-integer numbers"; it is a missing label like null, and 1.5 is still refused.
    import pyarrow as pa

    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"text": ["a", "b", "c"], "label": pa.array([1.0, float("nan"), None])}), path)
    _, staged = stage(tmp_path, path)
    assert staged.column("label").to_pylist() == [1, None, None]
    pq.write_table(pa.table({"text": ["a", "b"], "label": pa.array([1.5, float("nan")])}), path)
    with pytest.raises(InputError, match="non-integer numbers"):
        stage(tmp_path / "b", path)


def test_a_csv_with_line_breaks_in_quoted_cells_is_read_past_the_first_block(tmp_path):
    # pyarrow reads CSV in 4 MiB blocks cut at line breaks; a break inside a quoted cell near a cut
    # made a valid file unreadable ("CSV parser got out of sync with chunker").
    import csv

    texts = [f"first line, with a comma\nsecond line {'x' * (i % 200)}\n,2,neutral" for i in range(60_000)]
    with open(tmp_path / "multi.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text", "label"])
        writer.writerows([i, text, "positive"] for i, text in enumerate(texts))
    assert (tmp_path / "multi.csv").stat().st_size > 2 * (1 << 22)
    manifest, staged = stage(tmp_path, tmp_path / "multi.csv", id_column="id")
    assert manifest.total_rows == len(texts)
    assert staged.column("text").to_pylist() == texts
    assert set(staged.column("label").to_pylist()) == {"positive"}


_READ_ALL = """
import sys, psutil
from scorekeeper.run_folder import InputFile
from scorekeeper.staging.reader import open_or_explain
before = psutil.Process().memory_info().rss
_, batches = open_or_explain(InputFile(uri=sys.argv[1], format="parquet", size=0, fingerprint="x"), [], None)
peak = max(psutil.Process().memory_info().rss for _ in batches)
print((peak - before) / 2**20)
"""


def _write_groups(path, groups: int, rows: int = 65536) -> None:
    """`groups` row groups of `rows` random 32-character texts (about 2 MiB each once compressed)."""
    import pyarrow as pa

    rng = np.random.default_rng(0)
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())])) as writer:
        for _ in range(groups):
            text = rng.bytes(16 * rows).hex()
            writer.write_table(pa.table({"text": [text[i : i + 32] for i in range(0, 32 * rows, 32)]}))


def test_a_parquet_file_streams_row_group_by_row_group(tmp_path):
    """Reading a file must not keep what it read: pyarrow's pre-buffering (its default) held every
    row group's bytes until the reader was dropped, so the flow process grew with the input (by
    about the file's size: +112 MiB from 6 to 48 row groups). Each file is read in a fresh process:
    48 row groups must cost about what 6 do.

    The smallest of three readings counts: on a loaded machine one reading in two came out a fixed
    21 MiB higher whatever the file's size (a second allocator heap), which failed a CI run when
    the test compared 6 with 24 row groups."""
    import subprocess
    import sys

    grown = {}
    for groups in (6, 48):
        path = tmp_path / f"{groups}.parquet"
        _write_groups(path, groups)
        readings = [
            float(
                subprocess.run(
                    [sys.executable, "-c", _READ_ALL, str(path)], capture_output=True, text=True, check=True, cwd=tmp_path
                ).stdout
            )
            for _ in range(3)
        ]
        grown[groups] = min(readings)
    extra = (tmp_path / "48.parquet").stat().st_size - (tmp_path / "6.parquet").stat().st_size
    assert grown[48] - grown[6] < extra / 2**20 / 3, f"peak RSS while reading grew by {grown} MiB (6 and 48 row groups)"

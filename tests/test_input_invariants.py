"""The input's invariants, one regression test per case found by an outside round:

* the input is what a dataset reader would read: hidden folders below the input root are not read
  (but counted and listed in plan.json), hive partition folders give their columns;
* one resolution rule per ground-truth column, decided once from its type, recorded in
  metrics.json, and the same rule pairs two runs in compare_to;
* bad input read-side is one clear line (duplicate header names, inf labels, an empty label column).
"""

from __future__ import annotations

import json
import logging
import os
import re

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from scorekeeper.cli import summary_line
from scorekeeper.errors import InputError
from scorekeeper.evaluation.driver import check_truth, evaluate_run
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
from scorekeeper.staging.listing import list_input
from scorekeeper.tasks.read import read_inputs
from tests import prefect_session
from tests.evaluation_runs import one_hot, write_run
from tests.helpers import basic_auth_server, make_rows, open_run_and_plan, write_rows


def stage(tmp_path, input_uri, **params):
    request = ScoreRequest(input_uri=str(input_uri), model_uri="unused", output_uri=str(tmp_path / "out"), run_name="r", **params)
    run = RunFolder.from_uri(str(tmp_path / "out" / "r"))
    manifest = read_inputs(request, run)
    return manifest, pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet")


def _folder_with_hidden_copies(root):
    rows = make_rows(40)
    write_rows(root / "part-0.csv", rows)
    write_rows(root / ".ipynb_checkpoints" / "part-0-checkpoint.csv", rows)
    write_rows(root / "_temporary" / "0" / "part-0.csv", rows)
    (root / "_SUCCESS").write_text("")
    (root / ".part-0.csv.crc").write_text("crc")
    return rows


# -- the input is what a dataset reader would read -------------------------------------------------
def test_hidden_folders_below_the_input_root_are_not_read_and_plan_json_lists_them(tmp_path, models):
    """40 rows beside copies in .ipynb_checkpoints/ and _temporary/ were read as 120 predictions."""
    _folder_with_hidden_copies(tmp_path / "in")
    _, context, manifest, _ = open_run_and_plan(
        model_uri=models["bert"], input_uri=str(tmp_path / "in"), output_uri=str(tmp_path / "out"), run_name="r"
    )
    assert manifest.total_rows == 40
    assert [f.uri.rsplit("/", 1)[1] for f in manifest.files] == ["part-0.csv"]
    plan = json.loads((tmp_path / "out" / "r" / "plan.json").read_text())
    skipped = plan["skipped_files"]
    assert skipped["count"] == 4
    assert sorted(u.split("/in/", 1)[1] for u in skipped["files"]) == [
        ".ipynb_checkpoints/part-0-checkpoint.csv",
        ".part-0.csv.crc",
        "_SUCCESS",
        "_temporary/0/part-0.csv",
    ]
    # the same files a dataset reader reads (pyarrow's ignore_prefixes: "." and "_")
    assert sorted(ds.dataset(str(tmp_path / "in"), format="csv").files) == [f.uri.removeprefix("file://") for f in manifest.files]


def test_a_glob_skips_hidden_folders_below_its_literal_folders_unless_it_names_them(tmp_path):
    _folder_with_hidden_copies(tmp_path / "in")
    assert [f.uri.rsplit("/in/", 1)[1] for f in list_input(str(tmp_path / "in" / "**" / "*.csv")).files] == ["part-0.csv"]
    named = list_input(str(tmp_path / "in" / "_temp*" / "0" / "*.csv"))
    assert [f.uri.rsplit("/in/", 1)[1] for f in named.files] == ["_temporary/0/part-0.csv"] and named.hidden == []
    # the input folder's own name is not below it
    _folder_with_hidden_copies(tmp_path / "_data")
    assert len(list_input(str(tmp_path / "_data")).files) == 1


def test_a_file_named_with_glob_characters_that_no_glob_matches_is_that_file(tmp_path):
    """`reviews [final].csv` was read as a glob matching `reviews f.csv`..., and refused as
    'input not found: no file matches' a file that exists."""
    write_rows(tmp_path / "reviews [final].csv", make_rows(3))
    manifest, staged = stage(tmp_path, tmp_path / "reviews [final].csv")
    assert [f.uri.rsplit("/", 1)[1] for f in manifest.files] == ["reviews [final].csv"] and staged.num_rows == 3
    write_rows(tmp_path / "reviews f.csv", make_rows(2))  # a glob that matches still means its matches
    manifest, _ = stage(tmp_path, tmp_path / "reviews [final].csv")
    assert [f.uri.rsplit("/", 1)[1] for f in manifest.files] == ["reviews f.csv"]


def test_a_folder_named_with_glob_characters_that_no_glob_matches_is_that_folder(tmp_path):
    """`exports [2024]/` was refused as 'input not found: no file matches', a folder that exists;
    read as a folder, its own rules hold below it (hidden files skipped, key=value partitions)."""
    folder = tmp_path / "exports [2024]"
    write_rows(folder / "lang=de" / "a.csv", make_rows(3))
    write_rows(folder / "_tmp" / "b.csv", make_rows(2))
    for uri in (folder, f"{folder}/"):
        manifest, staged = stage(tmp_path, uri)
        assert [f.uri.rsplit("/", 2)[1:] for f in manifest.files] == [["lang=de", "a.csv"]] and staged.num_rows == 3
        assert list_input(str(uri)).hidden == [str(folder / "_tmp" / "b.csv")]


def test_an_http_url_is_one_file_whose_query_is_not_a_glob_nor_part_of_its_name(tmp_path):
    write_rows(tmp_path / "eval" / "data.csv", make_rows(3))
    with basic_auth_server(tmp_path, "reader", "pw", signature="s1gn") as host:
        signed = f"http://{host}/eval/data.csv?X-Amz-Expires=60&X-Amz-Signature=s1gn"
        assert [f.uri for f in list_input(signed).files] == [signed]
        with pytest.raises(InputError, match=r"input not found: http://.*/eval/data\.csv\?X-Amz-Expires=60&X-Amz-Signature=\*\*\*$"):
            list_input(signed.replace("s1gn", "wrong"))
        with pytest.raises(InputError, match=r"unsupported file type"):
            list_input(f"http://{host}/eval/?X-Amz-Signature=s1gn&name=data.csv")


def test_a_file_beside_its_compressed_copy_is_refused_naming_both(tmp_path):
    """reviews.csv and reviews.csv.gz in one folder: the rows were read twice (without ids, nothing
    caught it); a glob that names one of them reads it alone."""
    import gzip

    write_rows(tmp_path / "in" / "reviews.csv", make_rows(4))
    (tmp_path / "in" / "reviews.csv.gz").write_bytes(gzip.compress((tmp_path / "in" / "reviews.csv").read_bytes()))
    write_rows(tmp_path / "in" / "other.csv", make_rows(2))
    with pytest.raises(InputError, match=r"in/reviews\.csv and .*in/reviews\.csv\.gz are one file name with and without compression"):
        stage(tmp_path, tmp_path / "in")
    _, staged = stage(tmp_path, tmp_path / "in" / "*.csv")
    assert staged.num_rows == 6


def test_a_folder_of_hidden_files_only_is_refused_naming_them(tmp_path):
    write_rows(tmp_path / "in" / ".ipynb_checkpoints" / "a.csv", make_rows(3))
    with pytest.raises(InputError, match=r"holds only hidden files \(1, e.g. .*\.ipynb_checkpoints/a\.csv\)"):
        stage(tmp_path, tmp_path / "in")


def test_hive_partition_folders_give_their_columns_as_slice_id_and_label(tmp_path):
    """date=2026-11-30/part-0.parquet lost the partition column: not usable as a slice, id or label."""
    rows = make_rows(12)
    for i, (date, label) in enumerate([("2026-11-30", "negative"), ("2026-12-01", "positive"), ("2026-12-01", "neutral")]):
        chunk = [{"text": r["text"]} for r in rows[4 * i : 4 * i + 4]]
        write_rows(tmp_path / "in" / f"date={date}" / f"label={label}" / f"shard={i}" / "part-0.parquet", chunk)
    manifest, staged = stage(tmp_path, tmp_path / "in", slice_columns=["date", "shard"], label_column="label")
    reference = ds.dataset(str(tmp_path / "in"), format="parquet", partitioning="hive").to_table()
    assert manifest.has_label and manifest.label_type == "string"
    assert staged.column("label").to_pylist() == reference.column("label").to_pylist()
    assert staged.column("slice_0").to_pylist() == reference.column("date").to_pylist()
    assert staged.column("slice_1").to_pylist() == [str(v) for v in reference.column("shard").to_pylist()]
    # an integer partition key is an integer column, as pyarrow infers it: usable as the id
    with pytest.raises(InputError, match="duplicate values"):
        stage(tmp_path, tmp_path / "in", id_column="shard")


def test_a_column_both_in_the_file_and_in_its_folder_name_is_refused(tmp_path):
    write_rows(tmp_path / "in" / "label=positive" / "part-0.csv", make_rows(3))
    with pytest.raises(InputError, match=r"column 'label' is both a column of .*part-0\.csv and a folder name above it"):
        stage(tmp_path, tmp_path / "in")


# -- one resolution rule per ground-truth column ---------------------------------------------------
DIGIT_NAMES = ["1", "2", "3"]


def test_integer_truth_against_digit_label_names_is_matched_by_id(tmp_path):
    """0 matched by id, 1 and 2 by name: two truth values became one class (accuracy 0.507 for 1.0)."""
    truth = [i % 3 for i in range(150)]
    _, _, metrics = write_run(tmp_path, "r", one_hot(truth, 3), DIGIT_NAMES, pa.array(truth, pa.int64()))
    assert metrics["accuracy"] == 1.0 and metrics["unknown_label_rows"] == 0
    assert metrics["truth_matching"] == {"rule": "id", "column_type": "integer", "distinct_values": 3, "matched_values": 3}
    assert {name: c["support"] for name, c in metrics["per_class"].items()} == {"1": 50, "2": 50, "3": 50}


def test_text_digits_against_digit_label_names_are_names(tmp_path):
    truth = [i % 3 for i in range(30)]  # the label ids; the truth column spells their names
    _, _, metrics = write_run(tmp_path, "r", one_hot(truth, 3), DIGIT_NAMES, pa.array([DIGIT_NAMES[t] for t in truth]))
    assert metrics["accuracy"] == 1.0 and metrics["truth_matching"]["rule"] == "name"


def test_text_ids_without_any_label_name_are_matched_by_id(tmp_path):
    truth = [i % 2 for i in range(20)]
    _, _, metrics = write_run(tmp_path, "r", one_hot(truth, 2), ["neg", "pos"], pa.array([str(t) for t in truth]))
    assert metrics["accuracy"] == 1.0 and metrics["truth_matching"]["rule"] == "id"


def test_a_text_column_whose_values_mean_different_labels_by_name_and_by_id_is_refused_before_scoring(tmp_path):
    """Ids written as text against labels named "1","2","3": "0" can only be an id, but "1" is the
    name of id 0 and the id of "2"; resolving each value as it comes made two truth values one class."""
    folder, manifest, _ = write_run(tmp_path, "r", one_hot([0, 1, 2], 3), DIGIT_NAMES, pa.array(["0", "1", "2"]), complete=False)
    shown = "'1' is the name of label id 0 and the id of label '2', '2' is the name of label id 1 and the id of label '3'"
    with pytest.raises(InputError, match=r"ground-truth column 'stars' holds both label names and label ids, .*" + re.escape(shown)):
        check_truth(folder, DIGIT_NAMES, manifest, "stars")
    with pytest.raises(InputError, match="would resolve differently by name and by id"):
        evaluate_run(folder, DIGIT_NAMES, manifest)


def test_label_names_and_ids_in_one_text_column_are_matched_by_name_else_id_when_no_value_has_two_meanings(tmp_path):
    labels = ["neg", "pos"]
    truth = ["neg", "pos", "0", "1", "2", "maybe"]  # "2" is no id in range, "maybe" no name: unknown
    _, _, metrics = write_run(tmp_path, "r", one_hot([0, 1, 0, 1, 1, 0], 2), labels, pa.array(truth))
    assert metrics["truth_matching"] == {"rule": "name_or_id", "column_type": "text", "distinct_values": 6, "matched_values": 4}
    assert metrics["accuracy"] == 4 / 6 and metrics["unknown_labels"] == {"2": 1, "maybe": 1}


def test_an_unknown_integer_spelled_like_a_label_name_is_a_class_of_its_own(tmp_path):
    """Integer truth 3 against labels "1","2","3" is no label (ids are 0..2): it must not count as
    the label named "3" in the per-class metrics while counting as wrong in the accuracy."""
    truth = [0, 1, 2, 3, 3]
    _, _, metrics = write_run(tmp_path, "r", one_hot([0, 1, 2, 2, 2], 3), DIGIT_NAMES, pa.array(truth, pa.int64()))
    assert metrics["unknown_labels"] == {"3": 2} and metrics["accuracy"] == 3 / 5
    assert metrics["per_class"]["3"] == {"precision": 1 / 3, "recall": 1.0, "f1": 0.5, "support": 1}
    assert metrics["per_class"]["3 [unknown]"]["support"] == 2


def test_compare_to_the_same_weights_with_labels_spelled_differently_shows_no_flips(tmp_path):
    """Integer truth, same predictions, labels renamed: 88 wrong->right and McNemar p = 6e-27 were
    reported while deltas.accuracy = 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, size=200)
    probs = rng.dirichlet(np.ones(3), size=200)
    base, _, _ = write_run(tmp_path, "base", probs, ["neg", "neu", "pos"], pa.array(truth, pa.int64()))
    folder, manifest, _ = write_run(
        tmp_path, "cand", probs, ["negative", "neutral", "positive"], pa.array(truth, pa.int64()), complete=False
    )
    comparison = evaluate_run(folder, ["negative", "neutral", "positive"], manifest, EvaluationSettings(baseline=base)).as_dict()[
        "comparison"
    ]
    assert comparison["flipped"] == {"right_to_wrong": 0, "wrong_to_right": 0, "other": 0}
    assert comparison["mcnemar_p"] == 1.0 and comparison["accuracy_delta_paired"] == 0.0 == comparison["deltas"]["accuracy"]
    assert comparison["truth_matching"]["rule"] == "id"
    assert all(d == {"precision": 0.0, "recall": 0.0, "f1": 0.0} for d in comparison["per_class_deltas"].values())


# -- read-side failures: one line each -------------------------------------------------------------
def test_duplicate_header_names_of_a_used_column_are_one_line(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("text,label,label\ngood,positive,negative\n")
    with pytest.raises(InputError, match=r"column names repeat in .*in\.csv: 'label' is columns 2, 3"):
        stage(tmp_path, path)
    path.write_text("text,label,x,x\ngood,positive,1,2\n")  # a repeated column nobody uses is no problem
    manifest, _ = stage(tmp_path, path)
    assert manifest.total_rows == 1


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_inf_in_a_float_label_column_is_one_line(tmp_path, bad):
    table = pa.table({"text": ["a", "b", "c"], "label": pa.array([0.0, None, bad])})
    pq.write_table(table, tmp_path / "in.parquet")
    with pytest.raises(InputError, match=rf"label column 'label' in .*in\.parquet holds {bad} \(first at row_index 2\)"):
        stage(tmp_path, tmp_path / "in.parquet")


def test_a_label_column_in_a_later_file_only_is_refused_naming_both_files(tmp_path):
    """The first file without `label` made the run scoring-only: a later file's labels were ignored,
    exit 0, the report saying the input had no ground truth (a first file with it and a later one
    without was refused)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("text\nx\ny\n")
    (tmp_path / "in" / "b.csv").write_text("text,label\nz,positive\nq,negative\n")
    with pytest.raises(
        InputError, match=r"column 'label' is in .*b\.csv but not in .*a\.csv: give the ground truth in every file or in none"
    ):
        stage(tmp_path, tmp_path / "in")
    (tmp_path / "in" / "a.csv").write_text("text\n")  # a first file without rows decides the same
    with pytest.raises(InputError, match=r"column 'label' is in .*b\.csv but not in .*a\.csv"):
        stage(tmp_path, tmp_path / "in")
    manifest, staged = stage(tmp_path, tmp_path / "in", label_column=None)  # scoring only, said so
    assert manifest.total_rows == 2 and "label" not in staged.column_names
    (tmp_path / "in" / "a.csv").write_text("text,label\nx,neutral\n")
    manifest, staged = stage(tmp_path, tmp_path / "in")
    assert staged.column("label").to_pylist() == ["neutral", "positive", "negative"]


def test_an_all_empty_label_column_says_why_nothing_was_evaluated(tmp_path, caplog):
    """'evaluated 0 of 20' with no reason."""
    truth = pa.nulls(20, pa.string())
    with caplog.at_level(logging.WARNING):
        folder, manifest, metrics = write_run(tmp_path, "r", one_hot([0] * 20, 3), ["a", "b", "c"], truth)
    why = "no row has a ground-truth label: the label column is empty (null) in every row"
    assert f"evaluated no row: {why}" in caplog.text
    line = summary_line({"run_id": "r", "rows": 20, "run_uri": str(folder.uri), "metrics": metrics})
    assert f"evaluated 0 of 20 ({why})" in line


@pytest.mark.integration
def test_cli_refuses_a_truth_column_with_two_meanings_in_one_line_before_scoring(tmp_path):
    """Through the CLI and the flow: the truth rule is decided as soon as the input is staged (the
    model's labels known), so the refusal is one line, exit 2, and nothing is scored."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.models import build_tiny_classifier

    model = build_tiny_classifier(tmp_path / "stars", "bert", labels=["1", "2", "3"], seed=4)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"review {i}", "stars": str(i % 3)}) + "\n" for i in range(9)))
    scorekeeper = str(Path(sys.executable).with_name("scorekeeper"))
    args = [
        "run",
        "--input-uri",
        "in.jsonl",
        "--model-uri",
        str(model),
        "--output-uri",
        "runs",
        "--run-name",
        "s",
        "--label-column",
        "stars",
    ]
    env = prefect_session.cli_environment({**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")})
    done = subprocess.run([scorekeeper, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("scorekeeper: error: ground-truth column 'stars' holds both label names and label ids")
    assert not (tmp_path / "runs" / "s" / "predictions.parquet").exists() and not list((tmp_path / "runs" / "s" / "work").glob("shards/*"))


def test_an_unknown_value_never_takes_the_name_of_a_label_named_like_it(tmp_path):
    """Labels '5', '6', '7' and one literally named '7 [unknown]' (ids 0..3): the integer truth 7 is
    no id and is spelled like the label '7', so it is a class of its own, '7 [unknown 2]'; the label
    '7 [unknown]' (truth id 3) keeps only its own rows."""
    labels = ["5", "6", "7", "7 [unknown]"]
    truth = [0, 1, 2, 3, 7, 7]
    _, _, metrics = write_run(tmp_path, "r", one_hot([0, 1, 2, 3, 3, 3], 4), labels, pa.array(truth, pa.int64()))
    assert metrics["unknown_labels"] == {"7": 2} and metrics["accuracy"] == 4 / 6
    assert metrics["per_class"]["7 [unknown]"] == {"precision": 1 / 3, "recall": 1.0, "f1": 0.5, "support": 1}
    assert metrics["per_class"]["7 [unknown 2]"]["support"] == 2

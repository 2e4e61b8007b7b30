"""Ground truth of multi-label and regression heads: every accepted form staged to one canonical form,
and what is refused named by its rows."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import InputError
from scorekeeper.staging.truth_kinds import label_columns_truth, multi_label_truth, regression_truth
from tests.helpers import open_run_and_plan

LABELS = ["toxic", "spam", "off_topic", "praise"]


def test_a_list_column_of_names_or_ids():
    names = pa.array([["toxic", "spam"], [], None, ["praise"]], pa.list_(pa.string()))
    assert multi_label_truth(names, "f", "labels", "|", 0).to_pylist() == [["toxic", "spam"], [], None, ["praise"]]
    ids = pa.array([[0, 3], [], None], pa.list_(pa.int32()))
    staged = multi_label_truth(ids, "f", "labels", "|", 0)
    # integer elements stay integers: the column is matched by id, as an integer single-label column
    assert staged.type == pa.list_(pa.int64()) and staged.to_pylist() == [[0, 3], [], None]
    with pytest.raises(InputError, match=r"label column 'labels' in f has a null inside a list at row_index 11"):
        multi_label_truth(pa.array([["a"], ["b", None]]), "f", "labels", "|", 10)
    with pytest.raises(InputError, match="is a list of double"):
        multi_label_truth(pa.array([[0.5]]), "f", "labels", "|", 0)


def test_a_delimited_text():
    text = pa.array(["toxic|spam", "", None, " praise | ", "a||b", "1|3"])
    assert multi_label_truth(text, "f", "labels", "|", 0).to_pylist() == [["toxic", "spam"], [], None, ["praise"], ["a", "b"], ["1", "3"]]
    assert multi_label_truth(pa.array(["x;y"]), "f", "labels", ";", 0).to_pylist() == [["x", "y"]]
    assert multi_label_truth(pa.nulls(2), "f", "labels", "|", 0).to_pylist() == [None, None]


def test_one_column_per_label():
    columns = [
        pa.array([1, 0, None, 1]),
        pa.array([True, False, None, True]),
        pa.array(["0", "1", "", "1"]),
        pa.array([0.0, 0.0, None, 1.0]),
    ]
    staged = label_columns_truth(columns, LABELS, "f", 0)
    assert staged.to_pylist() == [["toxic", "spam"], ["off_topic"], None, LABELS]
    with pytest.raises(InputError, match=r"label column 'spam' in f holds values other than 0/1 at row_index 6"):
        label_columns_truth([pa.array([1, 0]), pa.array([0, 2])], ["toxic", "spam"], "f", 5)
    with pytest.raises(InputError, match=r"some but not all of a row's label columns are empty at row_index 1"):
        label_columns_truth([pa.array([1, 0]), pa.array([0, None])], ["toxic", "spam"], "f", 0)


def test_a_numeric_column():
    staged = regression_truth(pa.array([1.5, None, float("nan"), -2.0]), "f", "score", 0).to_pylist()
    assert staged == [1.5, None, None, -2.0]
    assert regression_truth(pa.array([3, None], pa.int64()), "f", "score", 0).to_pylist() == [3.0, None]
    assert regression_truth(pa.array([" 2.5", "", None, "NaN", "1e3"]), "f", "score", 0).to_pylist() == [2.5, None, None, None, 1000.0]
    with pytest.raises(InputError, match=r"holds text that is not a number at row_index 8 \('high'\), 10 \('n/a'\)"):
        regression_truth(pa.array(["1", "2", "high", "3", "n/a"]), "f", "score", 6)
    with pytest.raises(InputError, match="infinite value at row_index 1"):
        regression_truth(pa.array([1.0, math.inf]), "f", "score", 0)
    with pytest.raises(InputError, match="is bool; a regression ground truth is numeric"):
        regression_truth(pa.array([True]), "f", "score", 0)


# -- through the read step ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    from tests.models import build_multi_label_classifier, build_regression_model

    root = tmp_path_factory.mktemp("heads")
    return {
        "multi_label": str(build_multi_label_classifier(root / "ml", labels=LABELS, seed=4, num_layers=1)),
        "regression": str(build_regression_model(root / "reg", "bert", seed=5, num_layers=1)),
    }


def _staged_labels(tmp_path, model, data, **params):
    """The read step: staging, then its check of the staged truth (scorekeeper/evaluation/driver.check_truth); the
    context and the staged label column."""
    from scorekeeper.evaluation.driver import check_truth

    request, context, manifest, job = open_run_and_plan(
        input_uri=str(data), model_uri=model, output_uri=str(tmp_path / "out"), run_name="r", **params
    )
    check_truth(context.run, context.labels, manifest, request.label_column or "label", context.head)
    return context, pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet").column("label").to_pylist()


def test_every_multi_label_form_stages_the_same_truth(tmp_path, heads):
    truth = [["toxic", "spam"], [], None, ["praise"]]
    texts = ["a b", "c d", "e f", "g h"]
    pq.write_table(pa.table({"text": texts, "labels": pa.array(truth, pa.list_(pa.string()))}), tmp_path / "list.parquet")
    (tmp_path / "ids.jsonl").write_text('{"text": "a", "labels": [0, 1]}\n{"text": "b", "labels": []}\n{"text": "c", "labels": null}\n'
                                        '{"text": "d", "labels": [3]}\n')  # fmt: skip
    (tmp_path / "delimited.csv").write_text("text,labels\na b,toxic;spam\nc d,\ne f,\ng h,praise\n")
    (tmp_path / "columns.csv").write_text("text,toxic,spam,off_topic,praise\na,1,1,0,0\nb,0,0,0,0\nc,,,,\nd,0,0,0,1\n")
    context, staged = _staged_labels(tmp_path / "1", heads["multi_label"], tmp_path / "list.parquet", label_column="labels")
    assert context.head == "multi_label" and staged == truth
    # integer ids stay integers (matched by id in the evaluation: the element type decides the rule)
    assert _staged_labels(tmp_path / "2", heads["multi_label"], tmp_path / "ids.jsonl", label_column="labels")[1] == [
        [0, 1], [], None, [3]
    ]  # fmt: skip
    # a CSV cannot tell an empty list from a missing one: an empty cell is a row with no label
    assert _staged_labels(tmp_path / "3", heads["multi_label"], tmp_path / "delimited.csv", label_column="labels", label_delimiter=";")[
        1
    ] == [["toxic", "spam"], [], [], ["praise"]]
    assert _staged_labels(tmp_path / "4", heads["multi_label"], tmp_path / "columns.csv", label_columns=LABELS)[1] == truth


def test_a_regression_truth_with_text_is_refused_naming_the_rows(tmp_path, heads):
    (tmp_path / "in.csv").write_text("text,score\na,1.5\nb,\nc,high\nd,2\n")
    with pytest.raises(InputError, match=r"label column 'score' in .*in.csv holds text that is not a number at row_index 2 \('high'\)"):
        _staged_labels(tmp_path, heads["regression"], tmp_path / "in.csv", label_column="score")
    assert not (tmp_path / "out" / "r" / "request.json").exists()
    (tmp_path / "ok.csv").write_text("text,score\na,1.5\nb,\nc,-3\n")
    context, staged = _staged_labels(tmp_path / "ok", heads["regression"], tmp_path / "ok.csv", label_column="score")
    assert context.head == "regression" and staged == [1.5, None, -3.0]


def test_a_regression_truth_of_the_wrong_shape_is_refused_before_scoring(tmp_path, heads):
    """One number per row for one output, a list of one number per output for several: checked in
    the read step (scorekeeper/evaluation/truth.check_regression_truth). A scalar column for a head of two outputs
    was a DuckDB binder error with a traceback, after every row had been scored."""
    from tests.models import build_regression_model

    def read(folder, model, data):
        return _staged_labels(tmp_path / folder, model, data, label_column="score")[1]

    two = str(build_regression_model(tmp_path / "two", "bert", outputs=("helpful", "harmless"), seed=6, num_layers=1))
    texts = ["a b", "c d", "e f"]
    pq.write_table(pa.table({"text": texts, "score": [1.0, 2.0, 3.0]}), tmp_path / "scalar.parquet")
    pq.write_table(pa.table({"text": texts, "score": pa.array([[1.0, 2.0], [3.0], None])}), tmp_path / "short.parquet")
    pq.write_table(pa.table({"text": texts, "score": pa.array([[1.0, 2.0], [3.0, 4.0], None])}), tmp_path / "lists.parquet")
    with pytest.raises(InputError, match=r"2 outputs \(helpful, harmless\).* but label column 'score' holds one number per row"):
        read("1", two, tmp_path / "scalar.parquet")
    with pytest.raises(InputError, match=r"a list of 2 numbers per row, but not at row_index 1 \(1 value\)"):
        read("2", two, tmp_path / "short.parquet")
    with pytest.raises(
        InputError, match=r"one output \(score\): its ground truth is one number per row, but label column 'score' holds lists"
    ):
        read("3", heads["regression"], tmp_path / "lists.parquet")
    assert read("4", two, tmp_path / "lists.parquet") == [[1.0, 2.0], [3.0, 4.0], None]


@pytest.mark.parametrize(
    ("elements", "rule", "kind", "matched"),
    [
        # integer elements are ids, whatever the label names: 1 is the label named "2"
        (pa.array([[1], [0, 2], []], pa.list_(pa.int64())), "id", "integer", [[False, True, False], [True, False, True], [False] * 3]),
        # text digits against digit label names are names: "1" is the label named "1"
        (pa.array([["1"], ["3", "2"], []]), "name", "text", [[True, False, False], [False, True, True], [False] * 3]),
    ],
)
def test_multi_label_elements_are_matched_by_the_columns_one_rule(elements, rule, kind, matched):
    """A multi-label column's elements follow the single-label rule: its element type and values
    decide one rule for the whole column (evaluation/matching.py's decide), recorded as truth_matching."""
    from scorekeeper.evaluation.duck import connect, literal, sql
    from scorekeeper.evaluation.matching import column_kind
    from scorekeeper.evaluation.truth import label_table, match_truth

    labels = ["1", "2", "3"]  # digits other than their ids
    con = connect()
    con.register("given", pa.table({"row_index": pa.array([0, 1, 2], pa.int64()), "value": elements}))
    con.execute("CREATE TEMP TABLE truth AS SELECT row_index, row_index::VARCHAR AS id, value FROM given")
    con.execute("CREATE TEMP TABLE truth_elements AS SELECT row_index, id, CAST(unnest(value) AS VARCHAR) AS raw_label FROM truth")
    label_table(con, "labels", labels)
    probabilities = [[0.5] * 3] * 3
    con.register("predictions", pa.table({"row_index": [0, 1, 2], "id": [0, 1, 2], "probabilities": probabilities}))
    con.register("staged", pa.table({"row_index": [0, 1, 2], "text": ["a", "b", "c"]}))
    matching = match_truth(con, column_kind(str(elements.type)), labels, "labels", truth="truth_elements")
    assert (matching.rule.value, matching.column_type.value) == (rule, kind)
    con.execute(sql("multi_label_evaluated.sql", rule=literal(matching.rule)))
    assert [t for (t,) in con.execute("SELECT truth FROM ml_rows ORDER BY row_index").fetchall()] == matched


def test_a_multi_label_text_column_whose_elements_mean_different_labels_is_refused():
    from scorekeeper.evaluation.duck import connect
    from scorekeeper.evaluation.truth import label_table, match_truth
    from scorekeeper.metrics.truth_matching import ColumnKind

    con = connect()
    con.execute("CREATE TEMP TABLE truth_elements AS SELECT * FROM (VALUES (0, '0', '0'), (1, '1', '1')) AS t(row_index, id, raw_label)")
    label_table(con, "labels", ["1", "2", "3"])  # "1" is the name of id 0 and the id of "2"; "0" only an id
    with pytest.raises(InputError, match="holds both label names and label ids"):
        match_truth(con, ColumnKind.TEXT, ["1", "2", "3"], "labels", truth="truth_elements")


def test_truth_matching_of_label_columns_says_what_they_are(tmp_path, heads):
    """Four 0/1 integer columns, one per label: truth_matching calls them label_columns, not a text column."""
    import numpy as np

    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.worker.outputs import multi_label_table

    (tmp_path / "columns.csv").write_text("text,toxic,spam,off_topic,praise\na,1,1,0,0\nb,0,0,0,0\nc,0,1,0,0\nd,0,0,0,1\n")
    request, context, manifest, job = open_run_and_plan(
        input_uri=str(tmp_path / "columns.csv"), model_uri=heads["multi_label"], output_uri=str(tmp_path / "out"), run_name="r",
        label_columns=LABELS,
    )  # fmt: skip
    rows = pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet").select(["row_index", "id"])
    probabilities = np.full((4, len(context.labels)), 0.3)
    pq.write_table(
        multi_label_table(rows, probabilities, context.labels, np.full(len(context.labels), 0.5)),
        tmp_path / "out" / "r" / "predictions.parquet",
    )
    evaluated = evaluate_run(context.run, context.labels, manifest, EvaluationSettings(head="multi_label", label_columns=LABELS))
    assert evaluated.truth_matching.column_type == "label_columns" and evaluated.truth_matching.rule == "name"
    assert evaluate_run(context.run, context.labels, manifest, EvaluationSettings(head="multi_label")).truth_matching.column_type == "text"

"""The input invariants as properties over generated inputs (Hypothesis), each checked against an
independent reference: pyarrow's dataset reader for what is read, scikit-learn for the metrics,
a rule written out here for how ground truth is matched, plain transformers for the scores.

* staging reads what pyarrow.dataset reads: hidden folders and files below the root skipped (and
  counted), hive partition folders as columns, rows in order;
* every ground-truth column is matched by one rule (integer -> id; text -> name, id, or name else
  id), the metrics are scikit-learn's over the labels so matched, and a column whose values mean
  different labels by name and by id is refused;
* compare_to on the same input and truth: deltas.accuracy == accuracy_delta_paired, and identical
  predictions under integer truth never flip, whatever the labels are called;
* end to end (a handful of examples): the scores are those of transformers, one row at a time.

Most examples call the staging and evaluation functions directly, so the default run stays well
under a minute. SCOREKEEPER_HYPOTHESIS_PROFILE=thorough runs 16 times as many examples, with fresh seeds.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, f1_score

from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.evaluate import evaluate
from scorekeeper.tasks.read import read_inputs
from tests.evaluation_runs import write_run
from tests.helpers import write_predictions

PROFILE = os.environ.get("SCOREKEEPER_HYPOTHESIS_PROFILE", "default")
settings.register_profile("default", deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """A property's example count: n by default, 16 times as many in the thorough profile."""
    return n * 16 if PROFILE == "thorough" else n


_INTEGER = re.compile(r"-?[0-9]+")


# -- file layouts ----------------------------------------------------------------------------------
plain_names = st.sampled_from(["a", "b", "data", "x1", "part"])
hidden_names = st.sampled_from([".ipynb_checkpoints", "_temporary", ".hidden", "_staging", "__pycache__"])
partition_values = st.one_of(
    st.integers(-3, 30).map(str), st.sampled_from(["2026-11-30", "2026-12-01", "eu", "us west", "__HIVE_DEFAULT_PARTITION__"])
)


@st.composite
def layouts(draw):
    """Files below a root: (relative path, rows, hidden?) with hive and hidden folders mixed in."""
    keys = draw(st.lists(st.sampled_from(["date", "region", "shard"]), max_size=2, unique=True))
    files, seen = [], set()
    for _ in range(draw(st.integers(1, 5))):
        parts = []
        if draw(st.booleans()):
            parts.append(draw(plain_names))
        parts += [f"{k}={draw(partition_values).replace(' ', '%20')}" for k in keys]
        hidden = draw(st.integers(0, 4)) == 0
        if hidden:
            parts.insert(draw(st.integers(0, len(parts))), draw(hidden_names))
        name = draw(st.sampled_from(["part-0.parquet", "part-1.parquet", "_SUCCESS.parquet", ".part-0.parquet"]))
        hidden = hidden or name.startswith(("_", "."))
        path = "/".join([*parts, name])
        if path in seen:
            continue
        seen.add(path)
        files.append((path, draw(st.integers(0, 4)), hidden))
    return keys, files


@given(layout=layouts())
@settings(max_examples=examples(25))
def test_staging_reads_what_a_dataset_reader_reads(layout):
    keys, files = layout
    assume(any(not hidden and rows for _, rows, hidden in files))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "in"
        n = 0
        for path, rows, _ in files:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"text": pa.array([f"row {n + i}" for i in range(rows)], pa.string())}), root / path)
            n += rows
        request = ScoreRequest(input_uri=str(root), model_uri="unused", output_uri=str(Path(tmp) / "out"), run_name="r", slice_columns=keys)
        manifest = read_inputs(request, RunFolder.from_uri(str(Path(tmp) / "out" / "r")))
        staged = pq.read_table(Path(tmp) / "out" / "r" / "work" / "input.parquet")

        try:
            reference = ds.dataset(str(root), format="parquet", partitioning="hive")
        except pa.ArrowInvalid as exc:  # a key with only null values: pyarrow infers no type (staged: text nulls)
            assert "couldn't infer type" in str(exc)
            assume(False)
        table = reference.to_table(columns=["text", *keys, "__filename"])
        order = sorted(range(table.num_rows), key=lambda i: table.column("__filename")[i].as_py())  # stable: rows in file order
        assert sorted(reference.files) == [f.uri.removeprefix("file://") for f in manifest.files]
        assert manifest.skipped.count == sum(hidden for *_, hidden in files)
        assert staged.column("text").to_pylist() == [table.column("text")[i].as_py() for i in order]
        for k, key in enumerate(keys):
            expected = [table.column(key)[i].as_py() for i in order]
            assert staged.column(f"slice_{k}").to_pylist() == [None if v is None else str(v) for v in expected]


# -- ground truth ----------------------------------------------------------------------------------
label_names = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "01", "10"]),  # digits, some spelled like ids
    st.sampled_from(["neg", "pos", "neutral", "a", "A", "a ", "None", "null", "-1"]),  # words, repeated-looking
)
label_maps = st.lists(label_names, min_size=2, max_size=5, unique=True)


def truth_values(k: int, floats: bool = True):
    """One ground-truth form: (kind, values); nulls and NaN among them."""
    integers = st.lists(st.one_of(st.none(), st.integers(-1, k + 1)), min_size=1, max_size=30)
    texts = st.lists(
        st.one_of(st.none(), st.sampled_from(["0", "1", "2", "3", "007", "01", "10", "neg", "pos", "a", "A", "maybe"])),
        min_size=1,
        max_size=30,
    )
    forms = [integers.map(lambda v: ("integer", v)), texts.map(lambda v: ("text", v))]
    if floats:
        forms.append(
            st.lists(st.one_of(st.just(math.nan), st.integers(0, k).map(float)), min_size=1, max_size=30).map(lambda v: ("float", v))
        )
    return st.one_of(forms)


def reference_rule(kind: str, values: list, labels: list[str]) -> str | None:
    """The documented rule (README, `truth_matching`), written out independently; None: refused."""
    if kind == "integer":
        return "id"
    present = {v for v in values if v is not None}
    ids = {v for v in present if _INTEGER.fullmatch(v) and 0 <= int(v) < len(labels)}
    names = present & set(labels)
    if names and ids - names:
        if any(labels.index(v) != int(v) for v in names & ids):
            return None
        return "name_or_id"
    return "name" if names or not ids else "id"


def resolve(rule: str, value: str, labels: list[str]) -> int | None:
    by_name = labels.index(value) if value in labels else None
    by_id = int(value) if _INTEGER.fullmatch(value) and 0 <= int(value) < len(labels) else None
    return {"name": by_name, "id": by_id, "name_or_id": by_name if by_name is not None else by_id}[rule]


def write_input(path: Path, fmt: str, kind: str, values: list) -> None:
    """The input file with a `label` column of the given form, as a user's tool would write it."""
    n = len(values)
    texts = [f"text {i}" for i in range(n)]
    if fmt == "parquet":
        t = {"integer": pa.int64(), "text": pa.string(), "float": pa.float64()}[kind]
        pq.write_table(pa.table({"text": texts, "label": pa.array(values, t)}), path)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps({"text": x, "label": None if v != v else v}) + "\n" for x, v in zip(texts, values, strict=True)))
    else:
        cells = ["" if v is None or v != v else str(v) for v in values]
        path.write_text("text,label\n" + "".join(f"{x},{c}\n" for x, c in zip(texts, cells, strict=True)))


def pyarrow_read(path: Path, fmt: str) -> tuple[str, list]:
    """The label column as pyarrow reads the file on its own: its kind and its values as text."""
    table = {"parquet": pq.read_table, "jsonl": pajson.read_json, "csv": pacsv.read_csv}[fmt](path)
    column = table.column("label")
    t = column.type
    values = column.to_pylist()
    if pa.types.is_floating(t):
        values = [None if v is None or math.isnan(v) else int(v) for v in values]
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "integer", [None if v is None else str(v) for v in values]
    if pa.types.is_null(t):
        return "text", [None] * len(values)
    return "text", [None if v is None or (fmt == "csv" and v == "") else v for v in values]


@given(labels=label_maps, data=st.data(), fmt=st.sampled_from(["parquet", "jsonl", "csv"]), seed=st.integers(0, 2**16))
@settings(max_examples=examples(40))
def test_truth_is_matched_by_one_rule_per_column(labels, data, fmt, seed):
    kind, values = data.draw(truth_values(len(labels)))
    if fmt == "jsonl" and kind == "float":
        values = [float(v) for v in values]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"in.{fmt}"
        write_input(path, fmt, kind, values)
        ref_kind, ref_values = pyarrow_read(path, fmt)
        request = ScoreRequest(input_uri=str(path), model_uri="unused", output_uri=str(Path(tmp) / "out"), run_name="r")
        run = RunFolder.from_uri(str(Path(tmp) / "out" / "r"))
        manifest = read_inputs(request, run)
        probs = np.random.default_rng(seed).dirichlet(np.ones(len(labels)), size=len(values))
        write_predictions(Path(run.path) / "predictions.parquet", probs, list(range(len(values))), labels)
        rule = reference_rule(ref_kind, ref_values, labels)
        if rule is None:
            with pytest.raises(InputError, match="would resolve differently by name and by id"):
                evaluate(run, labels, manifest, [])
            return
        metrics = evaluate(run, labels, manifest, []).as_dict()

    assert metrics["truth_matching"]["rule"] == rule and metrics["truth_matching"]["column_type"] == ref_kind
    rows = [i for i, v in enumerate(ref_values) if v is not None]
    assert metrics["evaluated"] == len(rows)
    if not rows:
        assert metrics["accuracy"] is None
        return
    resolved = {i: resolve(rule, ref_values[i], labels) for i in rows}
    y_true = [labels[resolved[i]] if resolved[i] is not None else "unknown:" + ref_values[i] for i in rows]
    y_pred = [labels[int(probs[i].argmax())] for i in rows]
    assert metrics["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
    assert metrics["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12)
    assert metrics["unknown_label_rows"] == sum(resolved[i] is None for i in rows)


@st.composite
def renamed(draw, labels: list[str]):
    """Another model's labels: the same, respelled, or digits in place of the names."""
    how = draw(st.sampled_from(["same", "respelled", "digits", "shifted digits"]))
    k = len(labels)
    return {
        "same": list(labels),
        "respelled": [f"{name}_v2" for name in labels],
        "digits": [str(i) for i in range(k)],
        "shifted digits": [str(i + 1) for i in range(k)],
    }[how]


@given(labels=label_maps, data=st.data(), seed=st.integers(0, 2**16), same_predictions=st.booleans())
@settings(max_examples=examples(20))
def test_paired_delta_is_the_difference_of_the_accuracies(labels, data, seed, same_predictions):
    other_labels = data.draw(renamed(labels))
    kind, values = data.draw(truth_values(len(labels), floats=False))
    assume(any(v is not None for v in values))
    truth = pa.array(values, pa.int64()) if kind == "integer" else pa.array(values, pa.string())
    rng = np.random.default_rng(seed)
    before = rng.dirichlet(np.ones(len(labels)), size=len(values))
    after = before if same_predictions else rng.dirichlet(np.ones(len(labels)), size=len(values))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            base, _, base_metrics = write_run(Path(tmp), "base", before, other_labels, truth)
            run, manifest, _ = write_run(Path(tmp), "cand", after, labels, truth, complete=False)
            metrics = evaluate(run, labels, manifest, [], baseline=base).as_dict()
        except InputError as exc:
            assert "would resolve differently by name and by id" in str(exc)
            assume(False)
    assume("comparison" in metrics)
    comparison = metrics["comparison"]
    assert comparison["rows_compared"] == metrics["evaluated"] == base_metrics["evaluated"]
    assert math.isclose(comparison["deltas"]["accuracy"], comparison["accuracy_delta_paired"], abs_tol=1e-12)
    if same_predictions and kind == "integer":  # the same weights, whatever their labels are called
        assert comparison["flipped"] == {"right_to_wrong": 0, "wrong_to_right": 0, "other": 0}
        assert comparison["mcnemar_p"] == 1.0


# -- end to end: the scores are transformers' -----------------------------------------------------
@pytest.mark.integration
@given(data=st.data())
@settings(max_examples=2, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_end_to_end_scores_and_metrics_match_transformers_and_scikit_learn(models, tmp_path_factory, data):
    from tests.helpers import probabilities, reference_probabilities, run_flow

    words = st.sampled_from("good bad great terrible fine okay awful nice".split())
    texts = data.draw(st.lists(st.lists(words, min_size=1, max_size=12).map(" ".join), min_size=3, max_size=12))
    labels_of_model = ["negative", "neutral", "positive"]  # tests/models.py's DEFAULT_LABELS
    truth = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=len(texts), max_size=len(texts)))
    hidden = data.draw(st.booleans())
    root = tmp_path_factory.mktemp("e2e")
    folder = root / "in" / "split=test"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"text": texts, "label": pa.array(truth, pa.int64())}), folder / "part-0.parquet")
    if hidden:
        pq.write_table(pa.table({"text": texts, "label": pa.array(truth, pa.int64())}), root / "in" / "_temporary.parquet")
    result = run_flow(1, model_uri=models["bert"], input_uri=str(root / "in"), output_uri=str(root / "out"), slice_columns=["split"])
    expected = reference_probabilities(models["bert"], texts)
    assert result.predictions.num_rows == len(texts)
    np.testing.assert_allclose(probabilities(result.predictions), expected, atol=1e-5)
    rows = [i for i, t in enumerate(truth) if t is not None]
    assert result.metrics["labels"] == labels_of_model and result.metrics["evaluated"] == len(rows)
    if rows:
        y_pred = expected.argmax(1)
        assert result.metrics["accuracy"] == pytest.approx(accuracy_score([truth[i] for i in rows], y_pred[rows]))
        assert set(result.metrics["slices"]["split"]) == {"test"}

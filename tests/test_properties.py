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
* a regression truth is refused exactly when its shape is not the head's (one number per row for one
  output, a list of as many numbers as outputs for several), and every regression row is evaluated or
  counted apart (no truth, part of it, not finite), the metrics scikit-learn's over the evaluated rows;
* end to end (two examples, one launch each, the model drawn in each: a tiny BERT, or a tiny llama
  whose config has no pad_token_id, with texts ending in its eos string, holding it inside, or
  nothing else): the scores are those of transformers, one row at a time.

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
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
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
    """The documented rule (docs/evaluation.md, `truth_matching`), written out independently; None: refused."""
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
                evaluate_run(run, labels, manifest)
            return
        metrics = evaluate_run(run, labels, manifest).as_dict()

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
            metrics = evaluate_run(run, labels, manifest, EvaluationSettings(baseline=base)).as_dict()
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


# -- regression heads: the truth's shape is the head's, and every row is evaluated or counted -----
number_cells = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False).map(lambda v: round(v, 1)),  # rounded: ties, and zeros
    st.none(),
    st.just(math.nan),
)


@st.composite
def regression_columns(draw):
    """A user's regression truth column as a tool would write it: numbers, numbers as text, or a
    list of numbers per row (of any length, a null or NaN element inside), nulls anywhere."""
    n = draw(st.integers(1, 12))
    form = draw(st.sampled_from(["float", "integer", "text", "list", "fixed list"]))
    if form in ("list", "fixed list"):
        width = draw(st.integers(1, 3))
        lengths = st.just(width) if form == "fixed list" else st.integers(0, 4)
        rows = draw(
            st.lists(
                st.one_of(st.none(), lengths.flatmap(lambda k: st.lists(number_cells, min_size=k, max_size=k))), min_size=n, max_size=n
            )
        )
        kind = pa.list_(pa.float64(), width) if form == "fixed list" else pa.list_(pa.float64())
        return form, rows, pa.array(rows, kind)
    rows = draw(st.lists(number_cells, min_size=n, max_size=n))
    if form == "integer":
        rows = [None if v is None or math.isnan(v) else int(v) for v in rows]
        return form, rows, pa.array(rows, pa.int64())
    if form == "text":
        return form, rows, pa.array([None if v is None else ("NaN" if math.isnan(v) else f" {v!r} ") for v in rows])
    return form, rows, pa.array(rows, pa.float64())


@given(column=regression_columns(), outputs=st.integers(1, 3))
@settings(max_examples=examples(60))
def test_a_regression_truth_is_refused_exactly_when_its_shape_is_not_the_heads(column, outputs):
    """Staging and the one shape check (scorekeeper/evaluation/truth.check_regression_truth) against a rule written
    out here: one number per row for one output, a list of as many numbers as outputs for several;
    rows without truth (null, or NaN for a number) never count against the shape; the refusal names
    the first rows that break it, in row order."""
    import duckdb

    from scorekeeper.evaluation.truth import check_regression_truth
    from scorekeeper.staging.truth_kinds import regression_truth

    form, rows, array = column
    names = [f"out{k}" for k in range(outputs)]
    staged = regression_truth(array, "f", "score", 0)
    listed = form in ("list", "fixed list")
    with_truth = [i for i, v in enumerate(rows) if v is not None and (listed or not math.isnan(v))]
    if listed:
        wrong = [i for i in with_truth if outputs == 1 or len(rows[i]) != outputs]
    else:
        wrong = with_truth if outputs > 1 else []
    con = duckdb.connect()
    table = pa.table(
        {"row_index": pa.array(range(len(rows)), pa.int64()), "id": pa.array([str(i) for i in range(len(rows))]), "value": staged}
    )
    con.register("staged_truth", table)
    con.execute("CREATE TEMP TABLE truth AS SELECT * FROM staged_truth WHERE value IS NOT NULL")
    if not wrong:
        check_regression_truth(con, names, "score")
        return
    with pytest.raises(InputError, match=f"the regression head has {'one output' if outputs == 1 else f'{outputs} outputs'}") as refused:
        check_regression_truth(con, names, "score")
    message = str(refused.value)
    assert "label column 'score'" in message or "not at row_index" in message
    if listed and outputs > 1:  # the rows are named, the first five in row order
        assert re.findall(r"(\d+) \(\d+ values?\)", message) == [str(i) for i in wrong[:5]]


@given(data=st.data(), outputs=st.integers(1, 3))
@settings(max_examples=examples(40))
def test_every_regression_row_is_evaluated_or_counted_apart(data, outputs):
    """Over generated truths and predictions with nulls, NaN and infinities in any cell: each row
    is exactly one of evaluated, no_truth, partial_truth or not_finite (by a rule written out here),
    the four counts add up to the rows, and the metrics are scikit-learn's over the evaluated rows."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    from scorekeeper.evaluation.regression import regression_metrics
    from tests.test_regression_metrics import make_con

    n = data.draw(st.integers(1, 15))
    cell = st.one_of(number_cells, st.sampled_from([math.inf, -math.inf]))
    prediction_cell = st.one_of(st.floats(-1e3, 1e3, allow_nan=False).map(lambda v: round(v, 2)), st.sampled_from([math.nan, math.inf]))

    def row(cells):
        values = st.lists(cells, min_size=outputs, max_size=outputs)
        return values if outputs > 1 else values.map(lambda v: v[0])

    truth = data.draw(st.lists(st.one_of(st.none(), row(cell)), min_size=n, max_size=n))
    prediction = data.draw(st.lists(row(prediction_cell), min_size=n, max_size=n))

    def status(t, p) -> str:
        t = t if isinstance(t, list) or t is None else [t]
        p = p if isinstance(p, list) else [p]
        missing = 0 if t is None else sum(v is None or math.isnan(v) for v in t)
        if t is None or missing == outputs:
            return "no_truth"
        if missing:
            return "partial_truth"
        return "not_finite" if any(math.isinf(v) for v in t) or not all(math.isfinite(v) for v in p) else "evaluated"

    expected = [status(t, p) for t, p in zip(truth, prediction)]
    names = [f"out{k}" for k in range(outputs)]
    got = regression_metrics(make_con(prediction, truth), names)
    got_counts = (got["evaluated"], got["no_truth_rows"], got["partial_truth_rows"], got["not_finite_rows"])
    assert sum(got_counts) == n  # nothing dropped, whatever the rule
    assert got_counts == tuple(expected.count(s) for s in ("evaluated", "no_truth", "partial_truth", "not_finite"))
    kept = [i for i, s in enumerate(expected) if s == "evaluated"]
    if not kept:
        assert got["mae"] is None and all(v["mae"] is None for v in got["per_output"].values())
        return
    y = np.array([truth[i] for i in kept], dtype=float).reshape(len(kept), outputs)
    p = np.array([prediction[i] for i in kept], dtype=float).reshape(len(kept), outputs)
    for k, name in enumerate(names):
        assert got["per_output"][name]["mae"] == pytest.approx(mean_absolute_error(y[:, k], p[:, k]), rel=1e-9, abs=1e-9)
        assert got["per_output"][name]["mse"] == pytest.approx(mean_squared_error(y[:, k], p[:, k]), rel=1e-9, abs=1e-9)
    assert got["mae"] == pytest.approx(mean_absolute_error(y, p), rel=1e-9, abs=1e-9)


# -- end to end: the scores are transformers' -----------------------------------------------------
# Where a text puts the tokenizer's end-of-sequence string (eos; BERT's has none, its sep stands in):
# at the end, inside, alone, twice at the end, nowhere. Text i takes PLACES[(drawn + i) % 5], so the
# simplest example (every draw 0) already holds one of each of the first three.
PLACES = ("end", "inside", "alone", "end twice", "none")
# The models drawn: tests/conftest.py's tiny llama (a decoder whose config has no pad_token_id: the
# job pads it with eos, and a row of its own ending in eos is read at its last position all the same,
# 01fc3a0 and 95b0ef7) and its tiny BERT. The llama first: the simplest example draws it.
E2E_MODELS = ("llama", "bert")


def placed(words: list[str], place: str, end: str, joiner: str) -> str:
    text = " ".join(words)
    return {
        "end": f"{text}{joiner}{end}",
        "inside": f"{text}{joiner}{end} {words[0]}",
        "alone": end,
        "end twice": f"{text}{joiner}{end}{end}",
        "none": text,
    }[place]


@pytest.mark.integration
@given(data=st.data())
@settings(max_examples=2, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_end_to_end_scores_and_metrics_match_transformers_and_scikit_learn(models, tmp_path_factory, data):
    """One launch per example, the model drawn inside it: the scores are plain transformers' on each
    row alone, unpadded (tests/helpers.reference_probabilities; for the pad-less llama, a batch of one
    row with no pad id reads the last position, as tests/test_padless_decoder.py's reference does)."""
    from transformers import AutoTokenizer

    from tests.helpers import probabilities, reference_probabilities, run_flow

    model = data.draw(st.sampled_from(E2E_MODELS), label="model")
    tokenizer = AutoTokenizer.from_pretrained(models[model])
    end = tokenizer.eos_token or tokenizer.sep_token
    if model == "llama":  # what the draw is for: a decoder without a pad id, its eos a token of its own
        assert json.loads((Path(models[model]) / "config.json").read_text()).get("pad_token_id") is None
        assert tokenizer.pad_token is None and tokenizer.eos_token_id is not None
    words = st.sampled_from("good bad great terrible fine okay awful nice".split())
    drawn = data.draw(
        st.lists(st.tuples(st.lists(words, min_size=1, max_size=12), st.integers(0, len(PLACES) - 1), st.sampled_from([" ", ""])),
                 min_size=3, max_size=12)
    )  # fmt: skip
    places = [PLACES[(k + i) % len(PLACES)] for i, (_, k, _) in enumerate(drawn)]
    texts = [placed(w, place, end, joiner) for (w, _, joiner), place in zip(drawn, places, strict=True)]
    ends = [tokenizer(t)["input_ids"][-1] == tokenizer.convert_tokens_to_ids(end) for t in texts]
    if model == "llama":  # the rows are what their places say (BERT appends its sep to every row)
        assert ends == [p != "none" and p != "inside" for p in places], (texts, ends)
    labels_of_model = ["negative", "neutral", "positive"]  # tests/models.py's DEFAULT_LABELS
    truth = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=len(texts), max_size=len(texts)))
    hidden = data.draw(st.booleans())
    root = tmp_path_factory.mktemp("e2e")
    folder = root / "in" / "split=test"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"text": texts, "label": pa.array(truth, pa.int64())}), folder / "part-0.parquet")
    if hidden:
        pq.write_table(pa.table({"text": texts, "label": pa.array(truth, pa.int64())}), root / "in" / "_temporary.parquet")
    result = run_flow(1, model_uri=models[model], input_uri=str(root / "in"), output_uri=str(root / "out"), slice_columns=["split"])
    expected = reference_probabilities(models[model], texts)
    assert result.predictions.num_rows == len(texts)
    np.testing.assert_allclose(probabilities(result.predictions), expected, atol=1e-5, err_msg=f"{model}: {texts}")
    rows = [i for i, t in enumerate(truth) if t is not None]
    assert result.metrics["labels"] == labels_of_model and result.metrics["evaluated"] == len(rows)
    if rows:
        y_pred = expected.argmax(1)
        assert result.metrics["accuracy"] == pytest.approx(accuracy_score([truth[i] for i in rows], y_pred[rows]))
        assert set(result.metrics["slices"]["split"]) == {"test"}

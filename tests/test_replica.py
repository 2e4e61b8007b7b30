"""Replica mode end to end with real `accelerate launch` subprocesses on CPU (gloo).

Every row gets exactly one prediction, equal (1e-4) to an independent single-row, unpadded
reference, and the same for every process count.
"""

from __future__ import annotations

import numpy as np
import pytest

from scorekeeper.errors import ModelError, RunConflict
from tests.helpers import LABELS, make_rows, probabilities, reference_probabilities, run_flow, write_rows

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rows = make_rows(37, max_words=60)
    rows[5]["text"] = ""  # empty strings are scored like any text
    return {"rows": rows, "csv": write_rows(root / "rows.csv", rows), "jsonl": write_rows(root / "rows.jsonl", rows)}


@pytest.fixture(scope="module")
def bert_reference(models, data):
    return reference_probabilities(models["bert"], [r["text"] for r in data["rows"]])


def _check_exact(result, rows, reference):
    table = result.predictions
    assert table.column("row_index").to_pylist() == list(range(len(rows)))
    probs = probabilities(table)
    assert np.abs(probs - reference).max() < 1e-4
    assert table.column("predicted_id").to_pylist() == probs.argmax(1).tolist()
    assert table.column("predicted_label").to_pylist() == [LABELS[i] for i in probs.argmax(1)]
    assert np.allclose(table.column("score").to_numpy(), probs.max(1))


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, models, data):
    """The run on one process, from the JSONL copy: the process counts' test checks it as its first
    case, and every other count against it."""
    return run_flow(
        1,
        input_uri=str(data["jsonl"]),
        model_uri=models["bert"],
        output_uri=str(tmp_path_factory.mktemp("one")),
        run_name="one",
        id_column="review_id",
        rows_per_range=5,
        tokens_per_batch=200,
    )


# 2 processes would add no branch that 3 (8 ranges claimed by 3 ranks, a short last range) do not;
# the fewer-rows and resume tests below run on 2.
@pytest.mark.parametrize("processes", [1, 3])
def test_every_row_once_and_equal_to_the_reference(tmp_path, models, data, bert_reference, one_process, processes):
    if processes == 1:
        result = one_process
    else:
        result = run_flow(
            processes,
            input_uri=str(data["csv"]),
            model_uri=models["bert"],
            output_uri=str(tmp_path),
            run_name="r",
            id_column="review_id",
            rows_per_range=5,
            tokens_per_batch=200,
            oversubscribe=True,  # 3 processes on a 2-core machine
        )
    _check_exact(result, data["rows"], bert_reference)
    assert result.predictions.column("id").to_pylist() == [r["review_id"] for r in data["rows"]]
    assert result.metrics["rows"] == result.metrics["scored"] == result.metrics["evaluated"] == 37
    # The same plan gives the same batches whatever the process count (and CSV = JSONL); only the
    # CPU kernels' thread count differs (1 thread per process under torchrun), hence 1e-6, not bits.
    assert np.abs(probabilities(one_process.predictions) - probabilities(result.predictions)).max() < 1e-6
    assert one_process.predictions.column("predicted_id").equals(result.predictions.column("predicted_id"))


def test_fewer_rows_than_processes_and_ranges(tmp_path, models, data, bert_reference):
    """One row, one range, two processes: the rank that finds no range left to claim finishes, and
    the run is complete. (More ranges than ranks, a short last range: the 3-process case above.)"""
    path = write_rows(tmp_path / "few.parquet", data["rows"][:1])
    result = run_flow(2, input_uri=str(path), model_uri=models["bert"], output_uri=str(tmp_path), run_name="r", rows_per_range=2)
    _check_exact(result, data["rows"][:1], bert_reference[:1])


def test_decoder_without_pad_token(tmp_path, models, data):
    result = run_flow(1, input_uri=str(data["csv"]), model_uri=models["llama"], output_uri=str(tmp_path), run_name="r", rows_per_range=8)
    reference = reference_probabilities(models["llama"], [r["text"] for r in data["rows"]])
    _check_exact(result, data["rows"], reference)


@pytest.mark.parametrize("merge", [True, False])
def test_adapter_merged_and_unmerged(tmp_path, models, data, merge):
    texts = [r["text"] for r in data["rows"]]
    result = run_flow(
        1,
        input_uri=str(data["csv"]),
        model_uri=models["bert"],
        adapter_uri=models["bert_adapter"],
        merge_adapter=merge,
        output_uri=str(tmp_path),
        run_name="r",
    )
    reference = reference_probabilities(models["bert"], texts, adapter_dir=models["bert_adapter"], merge=merge)
    _check_exact(result, data["rows"], reference)
    base = reference_probabilities(models["bert"], texts)
    assert np.abs(reference - base).max() > 1e-3  # the adapter really changes the predictions


def test_long_texts_are_truncated_and_counted(tmp_path, models):
    rows = make_rows(4, seed=3)
    rows[1]["text"] = " ".join(["great"] * 400)
    path = write_rows(tmp_path / "long.csv", rows)
    result = run_flow(1, input_uri=str(path), model_uri=models["bert"], output_uri=str(tmp_path), run_name="r")
    assert result.scoring["truncated"] == 1
    _check_exact(result, rows, reference_probabilities(models["bert"], [r["text"] for r in rows]))


def test_resume_skips_committed_ranges_and_refuses_changed_input(tmp_path, models, data):
    source = write_rows(tmp_path / "in.csv", data["rows"])
    params = dict(input_uri=str(source), model_uri=models["bert"], output_uri=str(tmp_path), run_name="r", rows_per_range=10)
    first = run_flow(2, **params)
    assert first.scoring["rows_scored"] == 37
    again = run_flow(1, **params)  # a different process count resumes the same plan
    assert again.scoring["rows_scored"] == 0
    assert probabilities(again.predictions).tolist() == probabilities(first.predictions).tolist()
    with pytest.raises(RunConflict, match="max_length"):
        run_flow(1, **params, max_length=16)
    write_rows(source, data["rows"][:-1])  # same name, other content
    with pytest.raises(RunConflict, match="input changed.*in.csv"):
        run_flow(1, **params)


def test_pickled_weights_are_refused(tmp_path, models, data):
    import shutil

    folder = tmp_path / "pickled"
    shutil.copytree(models["bert"], folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match="only pickled weights.*safetensors only"):
        run_flow(1, input_uri=str(data["csv"]), model_uri=str(folder), output_uri=str(tmp_path), run_name="r")

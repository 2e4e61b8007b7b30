"""Multi-label and regression heads scored end to end by real `accelerate launch` processes on CPU:
replica mode on 1 and 2 processes and pipeline mode on 2 stages, each row exactly once, equal to
plain transformers scoring one row at a time, and the same for any process count and both modes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import make_rows, reference_probabilities, run_flow, write_rows

pytestmark = pytest.mark.integration

TOLERANCE = 1e-4  # batched and padded against one unpadded row at a time (float32 logits)
# Another process count or mode computes the same batches (the plan's), on other CPU threads: float
# rounding only (measured: 1.4e-7 between 1 and 2 processes, as for single-label heads).
SAME_BATCHES_TOLERANCE = 1e-6
ML_LABELS = ["toxic", "spam", "off_topic", "praise"]


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    from tests.models import build_lora_adapter, build_multi_label_classifier, build_regression_model

    root = tmp_path_factory.mktemp("head_models")
    built = {
        "multi_label": str(build_multi_label_classifier(root / "ml", "bert", labels=ML_LABELS, seed=21)),
        "regression": str(build_regression_model(root / "reward", "llama", seed=22)),
    }
    built["reward_adapter"] = str(build_lora_adapter(built["regression"], root / "reward_adapter", seed=23))
    return built


@pytest.fixture(scope="module")
def rows():
    return make_rows(11, seed=31, max_words=40)


def _score(tmp_path, rows, model, processes, **params):
    data = write_rows(tmp_path / "data" / "rows.csv", rows)
    table = run_flow(
        processes, input_uri=str(data), model_uri=model, output_uri=str(tmp_path / "runs"), run_name="r",
        id_column="review_id", label_column=None, rows_per_range=4, tokens_per_batch=120, **params,
    ).predictions  # fmt: skip
    assert table.column("row_index").to_pylist() == list(range(len(rows)))  # each row exactly once
    assert table.column("id").to_pylist() == [r["review_id"] for r in rows]
    recorded = json.loads((tmp_path / "runs" / "r" / "request.json").read_text())
    return table, recorded


def _values(table, column: str) -> np.ndarray:
    values = np.array(table.column(column).to_pylist(), dtype=np.float64)
    return values.reshape(len(table), -1)


def test_multi_label_encoder_replica_1_and_2_processes_and_2_pipeline_stages(tmp_path, heads, rows):
    texts = [r["text"] for r in rows]
    reference = reference_probabilities(heads["multi_label"], texts, head="multi_label")
    one, recorded = _score(tmp_path / "one", rows, heads["multi_label"], 1)
    assert recorded["head"] == "multi_label"  # the kind used, resolved from the config
    assert one.column_names == ["row_index", "id", "predicted_labels", "probabilities", "tokens", "unknown_tokens"]
    thresholds = {"spam": 0.3, "praise": 0.7}
    two, _ = _score(tmp_path / "two", rows, heads["multi_label"], 2, thresholds=thresholds)
    piped, _ = _score(tmp_path / "pipe", rows, heads["multi_label"], 2, mode="pipeline", microbatches=2)
    p1, p2, pp = (_values(t, "probabilities") for t in (one, two, piped))
    assert np.abs(p1 - reference).max() <= TOLERANCE
    assert np.abs(p1 - p2).max() <= SAME_BATCHES_TOLERANCE
    assert np.abs(pp - p1).max() <= SAME_BATCHES_TOLERANCE
    for table, chosen in ((one, {}), (two, thresholds), (piped, {})):
        probabilities = _values(table, "probabilities")
        expected = [[n for j, n in enumerate(ML_LABELS) if row[j] > chosen.get(n, 0.5)] for row in probabilities]
        assert table.column("predicted_labels").to_pylist() == expected
    assert one.column("predicted_labels").to_pylist() != two.column("predicted_labels").to_pylist()  # the thresholds mattered


def test_regression_decoder_replica_1_and_2_processes_and_2_pipeline_stages_with_an_unmerged_adapter(tmp_path, heads, rows):
    texts = [r["text"] for r in rows]
    reference = reference_probabilities(heads["regression"], texts, head="regression")[:, 0]
    one, recorded = _score(tmp_path / "one", rows, heads["regression"], 1)
    assert recorded["head"] == "regression"
    assert (
        one.column_names == ["row_index", "id", "prediction", "tokens", "unknown_tokens"]
        and str(one.schema.field("prediction").type) == "double"
    )
    two, _ = _score(tmp_path / "two", rows, heads["regression"], 2)
    assert np.abs(one.column("prediction").to_numpy() - reference).max() <= TOLERANCE
    assert np.abs(one.column("prediction").to_numpy() - two.column("prediction").to_numpy()).max() <= SAME_BATCHES_TOLERANCE
    assert np.unique(one.column("prediction").to_numpy()).size == len(rows)  # not a constant: every row's own last token

    adapted = reference_probabilities(heads["regression"], texts, adapter_dir=heads["reward_adapter"], merge=False, head="regression")
    piped, _ = _score(
        tmp_path / "pipe", rows, heads["regression"], 2, mode="pipeline", microbatches=2,
        adapter_uri=heads["reward_adapter"], merge_adapter=False,
    )  # fmt: skip
    assert np.abs(piped.column("prediction").to_numpy() - adapted[:, 0]).max() <= TOLERANCE
    assert np.abs(adapted[:, 0] - reference).max() > 1e-3  # the adapter changed the scores

"""Multi-label and regression heads scored end to end by real `accelerate launch` processes on CPU:
each row exactly once, equal to plain transformers scoring one row at a time; multi-label in replica
mode on 1 process and in pipeline mode on 2 stages (the same values, its thresholds applied),
regression in replica mode (in pipeline mode: tests/test_long_text_runs.py).

A head acts inside each range (scorekeeper/worker/outputs.py); the ranks' committed ranges are
gathered whatever the head, so another replica process count is no branch of its own here: the
gather over ranks is checked by tests/test_replica.py (1 and 3 processes, the same values), and a
multi-label head on 2 replica processes by tests/test_long_text_runs.py."""

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
    from tests.models import build_multi_label_classifier, build_regression_model

    root = tmp_path_factory.mktemp("head_models")
    return {
        "multi_label": str(build_multi_label_classifier(root / "ml", "bert", labels=ML_LABELS, seed=21)),
        "regression": str(build_regression_model(root / "reward", "llama", seed=22)),
    }


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


def test_multi_label_encoder_replica_1_process_and_2_pipeline_stages(tmp_path, heads, rows):
    texts = [r["text"] for r in rows]
    reference = reference_probabilities(heads["multi_label"], texts, head="multi_label")
    one, recorded = _score(tmp_path / "one", rows, heads["multi_label"], 1)
    assert recorded["head"] == "multi_label"  # the kind used, resolved from the config
    assert one.column_names == ["row_index", "id", "predicted_labels", "probabilities", "tokens", "unknown_tokens"]
    thresholds = {"spam": 0.3, "praise": 0.7}
    piped, _ = _score(tmp_path / "pipe", rows, heads["multi_label"], 2, mode="pipeline", microbatches=2, thresholds=thresholds)
    p1, pp = (_values(t, "probabilities") for t in (one, piped))
    assert np.abs(p1 - reference).max() <= TOLERANCE
    assert np.abs(pp - p1).max() <= SAME_BATCHES_TOLERANCE
    for table, chosen in ((one, {}), (piped, thresholds)):
        probabilities = _values(table, "probabilities")
        expected = [[n for j, n in enumerate(ML_LABELS) if row[j] > chosen.get(n, 0.5)] for row in probabilities]
        assert table.column("predicted_labels").to_pylist() == expected
    assert one.column("predicted_labels").to_pylist() != piped.column("predicted_labels").to_pylist()  # the thresholds mattered


def test_regression_decoder_replica(tmp_path, heads, rows):
    """A regression head's column and values on 1 process. In pipeline mode (with an unmerged
    adapter): tests/test_long_text_runs.py::test_regression_decoder_with_an_unmerged_adapter_in_pipeline_mode,
    against its definition too."""
    texts = [r["text"] for r in rows]
    reference = reference_probabilities(heads["regression"], texts, head="regression")[:, 0]
    one, recorded = _score(tmp_path / "one", rows, heads["regression"], 1)
    assert recorded["head"] == "regression"
    assert (
        one.column_names == ["row_index", "id", "prediction", "tokens", "unknown_tokens"]
        and str(one.schema.field("prediction").type) == "double"
    )
    assert np.abs(one.column("prediction").to_numpy() - reference).max() <= TOLERANCE
    assert np.unique(one.column("prediction").to_numpy()).size == len(rows)  # not a constant: every row's own last token

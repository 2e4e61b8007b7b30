"""Ground truth in separate files, id types that differ, labels the model does not know, and
scoring-only runs: each counted and reported, nothing silently dropped."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import accuracy_score, f1_score

from tests.helpers import LABELS, make_rows, run_flow

pytestmark = pytest.mark.integration


def test_ground_truth_join_coverage_and_a_scoring_only_rerun(tmp_path, models):
    rows = make_rows(30, seed=11)
    pq.write_table(pa.table({"key": pa.array(range(100, 130), pa.int64()), "text": [r["text"] for r in rows]}), tmp_path / "in.parquet")
    # Ground truth keyed by text ids: 25 of the input's rows, 3 ids the input lacks, one label the
    # model does not know, and labels given both as names and as integer ids.
    truth = []
    for i, r in enumerate(rows[:25]):
        label = r["label"] if i % 2 else LABELS.index(r["label"])
        truth.append({"key": str(100 + i), "gold": str(label) if isinstance(label, int) else label})
    truth[3]["gold"] = "sarcastic"
    truth += [{"key": "900", "gold": "positive"}, {"key": "901", "gold": "negative"}, {"key": "abc", "gold": "neutral"}]
    (tmp_path / "gt.jsonl").write_text("".join(json.dumps(t) + "\n" for t in truth))

    params = dict(
        input_uri=str(tmp_path / "in.parquet"),
        model_uri=models["bert"],
        output_uri=str(tmp_path / "out"),
        run_name="gt",
        id_column="key",
        ground_truth_uri=str(tmp_path / "gt.jsonl"),
        label_column="gold",
    )
    result = run_flow(1, **params)
    m = result.metrics
    assert (m["rows"], m["scored"], m["evaluated"]) == (30, 30, 25)
    assert m["missing_predictions"] == 3 and m["unmatched_predictions"] == 5
    assert m["unknown_labels"] == {"sarcastic": 1}
    predicted = result.predictions.column("predicted_label").to_pylist()[:25]
    gold = [t["gold"] if not t["gold"].isdigit() else LABELS[int(t["gold"])] for t in truth[:25]]
    assert m["accuracy"] == pytest.approx(accuracy_score(gold, predicted))
    assert m["macro_f1"] == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
    assert result.predictions.column("id").type == pa.int64()  # the input id's own type

    # The same run without ground truth: nothing is scored again, and the report says so.
    again = run_flow(1, **(params | {"ground_truth_uri": None, "label_column": None}))
    assert again.scoring["rows_scored"] == 0
    assert again.metrics["scoring_only"] and again.metrics["evaluated"] == 0 and again.metrics["accuracy"] is None
    assert "Scoring-only run" in (result.run_dir / "report" / "report.md").read_text()

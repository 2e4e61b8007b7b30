"""A completed run vouches for everything a later run reads of it (scorekeeper/run_seal.py):
complete.json seals predictions.parquet, plan.json and request.json (sha256, size, Parquet rows)
beside the report files, and `compare_to` (a name or `previous`), the comparison itself and the
history check them before use. A changed file is refused naming it and what differs; the history
leaves the run out and says so in metrics.json `history_left_out`.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.errors import InputError
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.evaluation.history import completed_runs, history_and_left_out
from scorekeeper.evaluation.settings import EvaluationSettings
from scorekeeper.params import ScoreRequest
from scorekeeper.representation import embeddings_table
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import SEALED, refuse_unverified, unverified_reason
from scorekeeper.storage import Location, file_fingerprint
from scorekeeper.tasks.compare import resolve_baseline
from tests.evaluation_runs import one_hot, seal_complete, write_run

N = 3000
LABELS = ["neg", "pos"]


def _runs(tmp_path, n: int = N):
    """Two runs on one input: `base` completed (sealed), `new` to be evaluated against it."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, n)
    (tmp_path / "in.csv").write_text("text\na\n")
    fingerprint = file_fingerprint(LocalFileSystem(), str(tmp_path / "in.csv"))  # both runs read in.csv
    labels = pa.array([LABELS[t] for t in truth])
    base, _, _ = write_run(tmp_path / "runs", "base", one_hot(list(truth), 2), LABELS, labels, fingerprint=fingerprint)
    # the sampled rows' representation, as every run now writes it (SPEC 14), sealed with the rest
    vectors = rng.normal(size=(min(n, 50), 8))
    table = embeddings_table(np.arange(len(vectors)), pa.array(range(len(vectors)), pa.int64()), vectors)
    pq.write_table(table, base.join(RunFolder.EMBEDDINGS))
    seal_complete(base)
    new, manifest, _ = write_run(tmp_path / "runs", "new", one_hot(list(truth), 2), LABELS, labels, fingerprint=fingerprint, complete=False)
    return base, new, manifest


def _request(tmp_path, compare_to: str) -> ScoreRequest:
    return ScoreRequest(input_uri=str(tmp_path / "in.csv"), model_uri="m", output_uri=str(tmp_path / "runs"), compare_to=compare_to)


def _rewrite_predictions(run: RunFolder, change) -> None:
    path = run.join(RunFolder.PREDICTIONS)
    pq.write_table(change(pq.read_table(path)), path)


def test_complete_json_seals_the_outputs_a_later_run_reads(tmp_path):
    base, _, _ = _runs(tmp_path, n=40)
    record = base.read_completion()
    assert record is not None and record.outputs is not None
    assert set(record.outputs) == set(SEALED)
    assert record.outputs[RunFolder.PREDICTIONS].rows == 40 and record.outputs[RunFolder.PLAN].rows is None
    assert unverified_reason(base) is None
    refuse_unverified(base, "compare_to")  # vouched: no refusal


def test_changed_rows_in_predictions_are_refused_by_compare_to_and_by_the_comparison(tmp_path):
    """100 rows changed after completion (same row count): refused, not 100 "flips"."""
    base, new, manifest = _runs(tmp_path)
    assert (
        evaluate_run(new, LABELS, manifest, EvaluationSettings(baseline=Location.from_uri(base.uri))).comparison.flipped.right_to_wrong == 0
    )

    def flip(table: pa.Table) -> pa.Table:  # the first 100 rows now predict the other label
        columns = {name: table.column(name).to_pylist() for name in table.column_names}
        for i in range(100):
            columns["predicted_id"][i] = 1 - columns["predicted_id"][i]
            columns["predicted_label"][i] = LABELS[columns["predicted_id"][i]]
            columns["probabilities"][i] = columns["probabilities"][i][::-1]
        return pa.table(columns, schema=table.schema)

    _rewrite_predictions(base, flip)
    sha = "predictions.parquet is not the file complete.json vouches for"
    bytes_differ = "predictions.parquet has .* bytes, complete.json says"
    with pytest.raises(InputError, match=f"compare_to: run 'base' under .*: ({sha}|{bytes_differ})") as refused:
        resolve_baseline(_request(tmp_path, "base"), "new")
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match=f"({sha}|{bytes_differ})"):
        evaluate_run(new, LABELS, manifest, EvaluationSettings(baseline=Location.from_uri(base.uri)))  # checked again where it is read


def test_a_predictions_file_cut_to_half_its_rows_is_refused_naming_both_counts(tmp_path):
    base, _, _ = _runs(tmp_path)
    _rewrite_predictions(base, lambda t: t.slice(0, N // 2))
    with pytest.raises(InputError, match="predictions.parquet has 1,500 rows, complete.json says 3,000"):
        resolve_baseline(_request(tmp_path, "base"), "new")
    with pytest.raises(InputError, match="compare_to 'previous': run 'base' .*predictions.parquet has 1,500 rows"):
        resolve_baseline(_request(tmp_path, "previous"), "new")


def test_an_edited_metrics_json_is_refused_with_the_real_reason_and_left_out_of_the_history(tmp_path):
    base, _, _ = _runs(tmp_path, n=40)
    metrics = json.loads(base.read_bytes(RunFolder.METRICS))
    metrics["accuracy"] = 0.99
    base.publish_bytes(json.dumps(metrics).encode(), RunFolder.METRICS)
    with pytest.raises(InputError, match="run 'base' .*: metrics.json is not the file complete.json vouches for") as refused:
        resolve_baseline(_request(tmp_path, "base"), "new")
    assert "has not completed" not in str(refused.value)
    output = Location.from_uri(str(tmp_path / "runs"))
    assert completed_runs(output) == []
    history, left_out = history_and_left_out(output, "new", evaluate_new(tmp_path), {})
    assert [h.run_id for h in history] == ["new"]
    assert [(r.run_id, r.reason) for r in left_out] == [
        ("base", "metrics.json is not the file complete.json vouches for (its sha256 differs): it changed after the run completed")
    ]


def evaluate_new(tmp_path):
    from scorekeeper.metrics.document import RecordedMetrics

    return RecordedMetrics.parse({"rows": 40, "evaluated": 40})


def test_a_record_that_seals_nothing_vouches_for_no_predictions(tmp_path):
    """A completion record without `outputs` (written before seals were kept) vouches for its report only."""
    base, _, _ = _runs(tmp_path, n=40)
    record = base.read_completion()
    base.publish_bytes(record.model_copy(update={"outputs": None}).to_bytes(), RunFolder.COMPLETION)
    with pytest.raises(InputError, match="complete.json vouches for no predictions.parquet .*rerun it"):
        resolve_baseline(_request(tmp_path, "base"), "new")
    base.fs.rm(base.join(RunFolder.PREDICTIONS))
    with pytest.raises(InputError, match="run 'base' under .* has no predictions.parquet"):
        refuse_unverified(base, "compare_to")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(SEALED + (RunFolder.METRICS,)), where=st.floats(0, 1, exclude_max=True), xor=st.integers(1, 255))
def test_any_changed_byte_of_a_vouched_file_is_refused_naming_it(tmp_path_factory, name, where, xor):
    """Property: one byte of any sealed file changed (anywhere, any way) is refused, naming that file."""
    base, _, _ = _runs(tmp_path_factory.mktemp("seal"), n=30)
    data = bytearray(base.read_bytes(name))
    data[int(where * len(data))] ^= xor
    base.publish_bytes(bytes(data), name)
    reason = unverified_reason(base, (*SEALED, RunFolder.METRICS))  # every file a later run may read
    assert reason is not None and reason.startswith(name.split("/")[-1] + " "), reason

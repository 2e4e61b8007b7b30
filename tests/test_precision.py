"""bfloat16 on CPU, checked: the precision check's sample and figures (pure), and a bf16 run whose
predictions do not depend on the process count, with the check in metrics.json and the report and
its bound failing the run after publishing (integration)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import GateFailed
from scorekeeper.head_kind import HeadKind
from scorekeeper.params import ScoreRequest
from scorekeeper.scoring_summary import PrecisionCheck
from scorekeeper.worker.precision import compare, rows_to_check, sample_positions
from tests.helpers import make_rows, needs_native, probabilities, run_flow, write_rows


def test_the_sample_spans_the_length_range_and_is_a_function_of_the_range():
    lengths = np.random.default_rng(3).integers(2, 512, size=1000)
    picked = sample_positions(lengths, 50, range_index=7)
    assert len(picked) == 50 and len(set(picked.tolist())) == 50
    assert np.array_equal(picked, sample_positions(lengths, 50, range_index=7))  # seeded: the same rows every time
    assert not np.array_equal(picked, sample_positions(lengths, 50, range_index=8))
    ranks = np.argsort(np.argsort(lengths, kind="stable"), kind="stable")[picked]  # length ranks of the picked rows
    assert ranks.min() < 1000 / 50 and ranks.max() >= 1000 - 1000 / 50  # the shortest and the longest rows are reached
    assert np.histogram(ranks, bins=5, range=(0, 1000))[0].tolist() == [10] * 5
    assert sample_positions(lengths[:3], 50, 0).tolist() == [0, 1, 2]
    # each range in proportion to its rows, at least one; none without a check
    assert [rows_to_check(256, n, 10_000) for n in (4096, 4096, 1808, 1)] == [105, 105, 47, 1]
    assert rows_to_check(0, 4096, 10_000) == 0


def test_the_figures_per_head_and_merged_over_processes():
    reference = np.array([[0.6, 0.4], [0.3, 0.7], [0.5001, 0.4999]])
    reduced = np.array([[0.61, 0.39], [0.3, 0.7], [0.4999, 0.5001]])
    single = compare(HeadKind.SINGLE_LABEL, reduced, reference)
    assert single == {"rows": 3, "max_probability_difference": pytest.approx(0.01), "changed_predictions": 1}
    multi = compare(HeadKind.MULTI_LABEL, reduced, reference, np.array([0.5, 0.65]))
    assert multi["changed_label_decisions"] == 1 and "changed_predictions" not in multi  # row 2's first label crossed 0.5
    assert compare(HeadKind.REGRESSION, reduced[:, :1] * 10, reference[:, :1] * 10) == {
        "rows": 3,
        "max_prediction_difference": pytest.approx(0.1),
    }
    checks = [
        PrecisionCheck(dtype="bfloat16", **single),
        PrecisionCheck(dtype="bfloat16", rows=2, max_probability_difference=0.02, changed_predictions=0),
    ]
    both = PrecisionCheck.merged(checks)
    assert (both.rows, both.max_probability_difference, both.changed_predictions) == (5, 0.02, 1)
    assert PrecisionCheck.merged([]) is None


@pytest.mark.integration
@needs_native("bfloat16")
def test_bfloat16_predictions_do_not_depend_on_the_process_count_and_are_checked(tmp_path, models):
    data = write_rows(tmp_path / "rows.parquet", make_rows(45, seed=5, max_words=50))
    params = dict(input_uri=str(data), model_uri=models["bert"], dtype="bfloat16", rows_per_range=16, precision_check_rows=12)
    # one process, with a bound no bfloat16 run meets: the run fails once everything is published
    with pytest.raises(GateFailed, match=r"precision check against float32 failed .*precision_max_difference 0.*published"):
        run_flow(1, output_uri=str(tmp_path / "one"), run_name="one", precision_max_difference=0.0, **params)
    one = tmp_path / "one" / "one"
    two = run_flow(2, output_uri=str(tmp_path / "two"), run_name="two", **params)
    assert np.array_equal(probabilities(pq.read_table(one / "predictions.parquet")), probabilities(two.predictions))  # bit for bit
    scoring = json.loads((one / "report" / "metrics.json").read_text())["scoring"]
    assert scoring["dtype"] == two.scoring["dtype"] == "bfloat16"
    check = scoring["precision_check"]
    assert check == two.scoring["precision_check"]  # the same rows against the same float32 batches
    assert check["dtype"] == "bfloat16" and check["rows"] == 5 + 5 + 4  # each range's share of 12, rounded up
    assert 0 < check["max_probability_difference"] < 0.05 and check["changed_predictions"] >= 0
    assert "Precision check" in (one / "report" / "report.md").read_text()
    assert "precision check" in (one / "report" / "report.html").read_text()


def test_a_precision_bound_needs_a_check():
    with pytest.raises(ValueError, match="precision_max_changed bound the precision check: set precision_check_rows above 0"):
        ScoreRequest(input_uri="i", model_uri="m", output_uri="o", precision_check_rows=0, precision_max_changed=0)
    assert ScoreRequest(input_uri="i", model_uri="m", output_uri="o", precision_max_difference=0.01).precision_check_rows == 256


def test_a_bound_fails_on_what_it_bounds_and_on_a_check_that_was_skipped():
    from scorekeeper.tasks.precision import precision_failures

    request = ScoreRequest(input_uri="i", model_uri="m", output_uri="o", precision_max_difference=0.01, precision_max_changed=0)
    fine = PrecisionCheck(dtype="bfloat16", rows=256, max_probability_difference=0.004, changed_predictions=0)
    assert precision_failures(request, fine) == []
    worse = fine.model_copy(update={"max_probability_difference": 0.02, "changed_predictions": 2})
    assert precision_failures(request, worse) == [
        "largest |probability difference| 0.02 > precision_max_difference 0.01",
        "2 changed predictions > precision_max_changed 0",
    ]
    skipped = PrecisionCheck.merged([fine, PrecisionCheck(dtype="bfloat16", rows=0, skipped="the float32 model does not fit on cuda:1")])
    assert skipped.rows == 256 and precision_failures(request, skipped) == [
        "part of the check was skipped (the float32 model does not fit on cuda:1)"
    ]
    unbounded = ScoreRequest(input_uri="i", model_uri="m", output_uri="o")
    assert precision_failures(unbounded, worse) == precision_failures(unbounded, skipped) == []

"""Monitoring without labels through the real command and flow (docs/drift.md): a labelled reference
run, a nightly run whose inputs moved (the drift gate fails its flow run after publishing), a backfill with
labels (estimate beside the truth), a 40-row `previous` run (not judged; without embeddings, SPEC 14's
signal skipped naming why), and an unknown reference
refused before anything is scored. Every PSI, p and estimate is recomputed from the runs' files by
the independent implementation (tests/drift_reference.py)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests import drift_reference as ref
from tests import representation_reference as rref
from tests.helpers import make_rows, run_flow, write_rows
from tests.test_flow_cli import _cli

pytestmark = pytest.mark.integration


def rows(n: int, seed: int, channels: list[str], labelled: bool = True) -> list[dict]:
    rng = random.Random(seed)
    out = make_rows(n, seed=seed)
    for r in out:
        r["channel"] = rng.choice(channels)
        if not labelled:
            del r["label"]
    return out


def metrics_of(run) -> dict:
    return json.loads((run / "report" / "metrics.json").read_text())


def test_a_reference_run_a_drifted_nightly_run_a_backfill_and_previous(tmp_path, models):
    write_rows(tmp_path / "reference.csv", rows(160, 1, ["web", "app"]))
    write_rows(tmp_path / "nightly" / "day1.csv", rows(160, 2, ["email"], labelled=False))
    write_rows(tmp_path / "backfill.csv", rows(150, 3, ["web", "app"]))
    write_rows(tmp_path / "small.csv", rows(40, 4, ["email"], labelled=False))
    common = {"model_uri": models["bert"], "output_uri": str(tmp_path / "runs"), "id_column": "review_id", "slice_columns": ["channel"]}

    reference = run_flow(input_uri=str(tmp_path / "reference.csv"), run_name="reference", **common)
    recorded = reference.metrics
    assert "drift" not in recorded and "estimated" not in recorded
    assert set(recorded["calibration_by_label"]) == set(recorded["labels"])
    assert all(len(bins) == 15 for bins in recorded["calibration_by_label"].values())
    assert sum(b["rows"] for b in recorded["calibration_by_label"][recorded["labels"][0]]) == recorded["evaluated"]

    # the nightly run: a folder of unlabelled data against the fixed labelled reference, with the drift
    # gate: the flow run fails after publishing (the command's exit 4 for a failed gate: tests/test_gates_cli.py)
    from scorekeeper.flows.score import score_dataset
    from tests import prefect_session

    with prefect_session.api():
        state = score_dataset(
            input_uri=str(tmp_path / "nightly"), run_name="day1", drift_reference="reference", gates={"drifted_signals": "<=0"},
            num_processes=1, return_state=True, **common,
        )  # fmt: skip
    assert state.is_failed() and "1 of 1 quality gate(s) failed: drifted_signals <= 0" in state.message, state.message
    day1 = metrics_of(tmp_path / "runs" / "day1")
    drift = day1["drift"]
    assert drift["reference"] == "reference" and drift["rows"] == {"reference": 160, "current": 160}
    assert drift["alarm"] is True and "slice:channel" in drift["drifted"] and drift["drifted_signals"] == len(drift["drifted"])
    assert drift["min_psi"] == 0.1 and day1["gates"][0]["value"] == len(drift["drifted"]) and not day1["gates"][0]["passed"]
    assert (tmp_path / "runs" / "day1" / "report" / "report.html").exists()
    # recomputed from both runs' predictions.parquet and staged slice column
    r = pq.read_table(tmp_path / "runs" / "reference" / "predictions.parquet")
    c = pq.read_table(tmp_path / "runs" / "day1" / "predictions.parquet")
    want = {
        "predicted_label": ref.signal(r.column("predicted_label").to_pylist(), c.column("predicted_label").to_pylist(), numeric=False),
        "score": ref.signal(r.column("score").to_pylist(), c.column("score").to_pylist(), numeric=True),
        "slice:channel": ref.signal([x["channel"] for x in rows(160, 1, ["web", "app"])], ["email"] * 160, numeric=False),
    }
    # every run's predictions.parquet has tokens and unknown_tokens: both length signals are measured
    assert drift["skipped"] == {}
    tokens = [r.column("tokens").to_pylist(), c.column("tokens").to_pylist()]
    unknown = [r.column("unknown_tokens").to_pylist(), c.column("unknown_tokens").to_pylist()]
    want["tokens"] = ref.signal([float(t) for t in tokens[0]], [float(t) for t in tokens[1]], numeric=True)
    share = [[u / t if t else None for u, t in zip(unknown[k], tokens[k], strict=True)] for k in (0, 1)]
    want["unknown_token_share"] = ref.signal(share[0], share[1], numeric=True)
    # SPEC 14's representation signal (both runs wrote embeddings.parquet) is in the Holm family too
    representation = rref.representation(
        tmp_path / "runs" / "reference" / "embeddings.parquet", tmp_path / "runs" / "day1" / "embeddings.parquet", {}
    )
    verdicts = ref.judge(want, 160, 160, others={"representation": representation["p"]})
    assert set(drift["signals"]) == set(want) | {"representation"}
    assert math.isclose(drift["signals"]["representation"]["p"], representation["p"], rel_tol=1e-3)
    for name, w in want.items():
        s = drift["signals"][name]
        assert [b["reference_rows"] for b in s["bins"]] == w["a"] and [b["current_rows"] for b in s["bins"]] == w["b"]
        assert math.isclose(s["psi"], w["psi"], abs_tol=1e-9) and math.isclose(s["p"], w["p"], rel_tol=1e-6, abs_tol=1e-300)
        assert math.isclose(s["p_holm"], w["p_holm"], rel_tol=1e-6, abs_tol=1e-300) and s["drifted"] == verdicts[name]
    estimated = day1["estimated"]
    truth = [recorded["labels"].index(x["label"]) for x in rows(160, 1, ["web", "app"])]
    correct = [t == p for t, p in zip(truth, r.column("predicted_id").to_pylist(), strict=True)]
    accuracy, ci = ref.estimated_accuracy(r.column("score").to_pylist(), correct, c.column("score").to_pylist())
    assert estimated["method"] == "reference_calibration" and math.isclose(estimated["accuracy"], accuracy, abs_tol=1e-9)
    assert np.allclose(estimated["accuracy_ci"], ci, atol=1e-9) and estimated["macro_f1"] is not None
    assert [h.get("drifted_signals") for h in day1["history"]] == [None, len(drift["drifted"])]
    assert day1["history"][-1]["estimated_accuracy"] == estimated["accuracy"]

    # a backfill: labels too, so the estimate sits beside the truth
    backfill = run_flow(input_uri=str(tmp_path / "backfill.csv"), run_name="backfill", drift_reference="reference", **common).metrics
    assert backfill["accuracy"] is not None and backfill["estimated"]["accuracy"] is not None
    assert backfill["drift"]["alarm"] is False  # the same distribution of channels and texts

    # `previous`: the latest completed run of this model (the backfill); 40 rows are not judged. This
    # run writes no embeddings (embedding_rows 0): SPEC 14's signal is skipped, naming why; its words
    # are still compared
    small = run_flow(
        input_uri=str(tmp_path / "small.csv"), run_name="small", drift_reference="previous", embedding_rows=0, **common
    ).metrics
    assert small["drift"]["reference"] == "backfill" and small["drift"]["alarm"] is None and small["drift"]["drifted_signals"] is None
    assert all(s["drifted"] is None and "not judged" in s["reason"] for s in small["drift"]["signals"].values())
    assert "representation" not in small["drift"]["signals"]
    assert small["drift"]["skipped"]["representation"] in (
        "the current run's embeddings.parquet holds no rows (embedding_rows 0)",
        "the current run has no embeddings.parquet (embedding_rows 0, or written before SPEC section 14)",
    )
    assert small["drift"]["moved_tokens"] is not None

    # an unknown reference is refused before anything is scored
    cli = ["run", "--input-uri", "nightly", "--model-uri", models["bert"], "--output-uri", "runs", "--id-column", "review_id",
           "--slice-columns", "channel"]  # fmt: skip
    refused = _cli(*cli, "--drift-reference", "no-such-run", "--run-name", "refused", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "drift_reference: run 'no-such-run'" in refused.stderr and "does not exist" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "runs" / "refused" / "predictions.parquet").exists()

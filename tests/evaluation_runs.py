"""Run folders for evaluate_run()/compare() written directly from probabilities and a typed ground-truth
column (no scoring), shared by the input-invariant tests and the property tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.run_folder import CompletionRecord, RunFolder, StagedManifest
from scorekeeper.run_seal import seal_outputs
from tests.helpers import write_predictions


def write_run(
    root: Path, name: str, probs: np.ndarray, labels: list[str], truth: pa.Array, *, fingerprint: str = "same-input", complete: bool = True
) -> tuple[RunFolder, StagedManifest, dict | None]:
    """A run folder as the flow leaves it (predictions.parquet, work/input.parquet with `truth` as
    its label column, plan.json with the labels; report/metrics.json from evaluate_run() if complete).
    Returns the folder, its manifest and, if complete, its metrics."""
    run = root / name
    (run / "work").mkdir(parents=True)
    n = len(probs)
    write_predictions(run / "predictions.parquet", probs, list(range(n)), labels)
    staged = {"row_index": pa.array(range(n), pa.int64()), "id": pa.array(range(n), pa.int64()), "text": [f"t{i}" for i in range(n)]}
    staged["label"] = truth
    pq.write_table(pa.table(staged), run / "work" / "input.parquet")
    files = [{"uri": "in.parquet", "fingerprint": fingerprint}]
    (run / "plan.json").write_text(json.dumps({"files": files, "labels": labels, "model_fingerprint": f"model-{name}"}))
    (run / "request.json").write_text(json.dumps({"id_column": None}))
    folder = RunFolder.from_uri(str(run))
    manifest = StagedManifest(
        files=[], total_rows=n, has_label=True, label_type=str(truth.type), id_type="int64", has_text_pair=False,
        null_text_rows=0, slice_columns=[], staging_key="",
    )  # fmt: skip
    metrics = None
    if complete:
        document = evaluate_run(folder, labels, manifest)
        (run / "report").mkdir()
        (run / "report" / "metrics.json").write_bytes(document.to_json_bytes())
        seal_complete(folder)
        metrics = document.as_dict()
    return folder, manifest, metrics


def seal_complete(run: RunFolder) -> None:
    """Write the run's completion record as publishing does: its metrics.json and outputs sealed."""
    metrics = run.read_bytes(RunFolder.METRICS)
    record = CompletionRecord(
        run_id=Path(run.path).name, finished_at="2026-12-01T00:00:00+00:00",
        files={"metrics.json": hashlib.sha256(metrics).hexdigest()}, outputs=seal_outputs(run),
    )  # fmt: skip
    run.publish_bytes(record.to_bytes(), RunFolder.COMPLETION)


def one_hot(predicted: list[int], k: int, confidence: float = 0.9) -> np.ndarray:
    """Probabilities that predict `predicted` (row by row) over k labels."""
    probs = np.full((len(predicted), k), (1 - confidence) / max(k - 1, 1))
    probs[np.arange(len(predicted)), predicted] = confidence
    return probs

"""Test helpers: the flow's steps without the Prefect engine, independent references, data files."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.launch import Progress, ScoringProcesses
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import StagedManifest
from scorekeeper.storage import is_local
from scorekeeper.tasks.evaluate import evaluate
from scorekeeper.tasks.gather import gather_predictions
from scorekeeper.tasks.open_run import open_run
from scorekeeper.tasks.plan import plan_run
from scorekeeper.tasks.read import read_inputs
from scorekeeper.tasks.report import publish_report

LABELS = ["negative", "neutral", "positive"]
WORDS = "good bad great terrible fine okay awful nice product price quality fast slow love hate meh broken works".split()


def make_rows(n: int, seed: int = 0, max_words: int = 30) -> list[dict]:
    """Labelled rows of random words with varied lengths (so batches get padding)."""
    rng = random.Random(seed)
    return [
        {
            "review_id": f"r{i:05d}",
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))),
            "label": rng.choice(LABELS),
        }
        for i in range(n)
    ]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@dataclass
class Result:
    run_dir: Path | str  # a local folder, or the run's URI in object storage
    predictions: pa.Table
    metrics: dict
    progress: Progress


def open_run_and_plan(num_processes: int = 1, **params):
    """The flow's steps up to the plan: (request, context, manifest, job)."""
    request = ScoreRequest(num_processes=num_processes, **params)
    context = open_run(request, None)
    manifest = read_inputs(request, context.run)
    return request, context, manifest, plan_run(request, context, manifest)


def run_job(num_processes: int = 1, stall_timeout_s: float = 60.0, on_progress=None, **params) -> Result:
    """The flow's steps in order, as plain functions (the Prefect flow is tested separately)."""
    request, context, manifest, job = open_run_and_plan(num_processes, **params)
    progress = Progress(total_rows=sum(r.rows for r in job.ranges))
    if job.ranges:
        # The stall timeout is the collective timeout, as in the flow.
        with ScoringProcesses(num_processes, stall_timeout_s).start(context.run.uri + "/work/job.json") as processes:
            processes.follow(progress, on_progress)
    gather_predictions(context.run, job.total_rows, job.scoring_fingerprint)
    metrics = evaluate(context.run, context.labels, manifest, request.slice_columns)
    publish_report(context.run, metrics, request.public_dict() | {"run_id": context.run_id})
    run = context.run
    with run.fs.open(run.join("predictions.parquet"), "rb") as f:
        predictions = pq.read_table(f)
    return Result(Path(run.path) if is_local(run.fs) else run.uri, predictions, metrics.as_dict(), progress)


def reference_probabilities(
    model_dir: str, texts: list[str], pairs: list[str] | None = None, adapter_dir: str | None = None, merge: bool = True
) -> np.ndarray:
    """Each row scored alone, unpadded, with transformers directly: the independent reference."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    if adapter_dir:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir)
        if merge:
            model = model.merge_and_unload()
    model.eval()
    limit = min(tokenizer.model_max_length, 10**6)
    out = []
    with torch.no_grad():
        for i, text in enumerate(texts):
            enc = tokenizer(text, pairs[i] if pairs else None, truncation=True, max_length=limit, return_tensors="pt")
            out.append(torch.softmax(model(**enc).logits.double(), -1)[0].numpy())
    return np.stack(out)


def probabilities(table: pa.Table) -> np.ndarray:
    return np.array(table.column("probabilities").to_pylist(), dtype=np.float64)


def staged_manifest(total_rows: int, id_type: str = "int64", has_label: bool = True) -> StagedManifest:
    """The manifest of a staged input written by hand (no ground-truth files, no slices)."""
    return StagedManifest(
        files=[], total_rows=total_rows, has_label=has_label, label_type=None, id_type=id_type, has_text_pair=False,
        null_text_rows=0, slice_columns=[], staging_key="",
    )  # fmt: skip


def write_predictions(path, probs, ids, labels) -> None:
    """A predictions.parquet with the contract's columns, for probabilities given row by row."""
    predicted = probs.argmax(1)
    pq.write_table(
        pa.table(
            {
                "row_index": pa.array(range(len(probs)), pa.int64()),
                "id": pa.array(ids),
                "predicted_id": pa.array(predicted, pa.int64()),
                "predicted_label": pa.array([labels[i] for i in predicted]),
                "score": pa.array(probs.max(1)),
                "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
            }
        ),
        path,
    )

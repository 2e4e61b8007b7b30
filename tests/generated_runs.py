"""Run folders of every kind of head written from generated rows, as the scoring step leaves them
(predictions.parquet with `tokens` and `unknown_tokens`, the staged input with its label and slice
column, plan.json, request.json), for tests that evaluate combinations of evaluation-only parameters
(compare_to, drift_reference, slices, the window, gates) without scoring anything: a few runs are
written once, then evaluated in many ways. `evaluate` runs the evaluate step's own functions
(evaluate_run, the history, the gates) and `render` the report's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.head_kind import HeadKind
from scorekeeper.long_text import LongTextCounts
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.scoring_summary import ScoringSummary
from scorekeeper.storage import Location

LABELS = {HeadKind.SINGLE_LABEL: ["negative", "neutral", "positive"], HeadKind.MULTI_LABEL: ["price", "delivery", "quality"]}
OUTPUTS = ["stars"]
SPECIALS = 2  # [CLS] and [SEP]: tokens = L + 2
SOURCES = ["web", "app", "email"]


@dataclass(frozen=True)
class Spec:
    """What one generated run is: its rows, whether they are labelled, its input (fingerprint and first
    id), how good its model is and how far its inputs moved."""

    rows: int
    seed: int
    labelled: bool = True
    fingerprint: str = "night"
    first_id: int = 0
    skill: float = 1.5
    shift: float = 0.0  # moves the slice column, the lengths and the scores


def labels_of(head: HeadKind | str) -> list[str]:
    return OUTPUTS if HeadKind(head) == HeadKind.REGRESSION else LABELS[HeadKind(head)]


def lengths(spec: Spec) -> np.ndarray:
    """Each row's content tokens L (inputs: drawn from the input's seed, not the model's)."""
    rng = np.random.default_rng([spec.seed, 1])
    return rng.integers(3, 40, size=spec.rows) + (rng.random(spec.rows) < 0.25 + 0.5 * spec.shift) * rng.integers(20, 90, size=spec.rows)


def write(run: Path, head: HeadKind | str, spec: Spec, model_seed: int = 0) -> None:
    """The run folder `run` of `spec`'s rows scored by a generated model (`model_seed`): the same
    spec with two model seeds gives two runs over the same input."""
    head = HeadKind(head)
    n, labels = spec.rows, labels_of(head)
    inputs = np.random.default_rng([spec.seed, 2])
    model = np.random.default_rng([spec.seed, 3, model_seed])
    k = len(labels)
    ids = pa.array(range(spec.first_id, spec.first_id + n), pa.int64())
    weights = np.array([0.5, 0.35, 0.15]) * (1 - spec.shift) + np.array([0.0, 0.0, 1.0]) * spec.shift
    source = [None if v == "none" else str(v) for v in inputs.choice([*SOURCES, "none"], size=n, p=[*(weights * 0.95), 0.05])]
    length = lengths(spec)
    predictions: dict[str, pa.Array] = {"row_index": pa.array(range(n), pa.int64()), "id": ids}
    if head == HeadKind.SINGLE_LABEL:
        truth = inputs.choice(k, size=n, p=[0.5, 0.3, 0.2])
        logits = model.normal(0, 1, size=(n, k)) + spec.shift
        logits[np.arange(n), truth] += spec.skill
        probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        predicted = probs.argmax(1)
        label = pa.array([labels[t] for t in truth])
        predictions |= {
            "predicted_id": pa.array(predicted, pa.int64()),
            "predicted_label": pa.array([labels[i] for i in predicted]),
            "score": pa.array(probs.max(1)),
            "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }
    elif head == HeadKind.MULTI_LABEL:
        truth = inputs.random((n, k)) < np.array([0.5, 0.3, 0.2])
        logits = model.normal(0, 1, size=(n, k)) + spec.skill * (truth * 2 - 1) + spec.shift
        probs = 1 / (1 + np.exp(-logits))
        label = pa.array([[labels[j] for j in range(k) if truth[i, j]] for i in range(n)], pa.list_(pa.string()))
        predictions |= {
            "predicted_labels": pa.array([[labels[j] for j in range(k) if probs[i, j] > 0.5] for i in range(n)], pa.list_(pa.string())),
            "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }
    else:
        truth = inputs.normal(3.0, 1.0, size=n)
        label = pa.array(truth)
        predictions["prediction"] = pa.array(truth + model.normal(spec.shift, 1.0 / spec.skill, size=n))
    predictions["tokens"] = pa.array(length + SPECIALS, pa.int32())
    predictions["unknown_tokens"] = pa.array(np.minimum(length, inputs.poisson(0.3 + 3 * spec.shift, size=n)), pa.int32())
    (run / "work").mkdir(parents=True)
    staged: dict[str, pa.Array] = {"row_index": pa.array(range(n), pa.int64()), "id": ids, "text": pa.array([f"t{i}" for i in range(n)])}
    if spec.labelled:
        staged["label"] = label
    staged["slice_0"] = pa.array(source, pa.string())
    pq.write_table(pa.table(staged), run / "work" / "input.parquet")
    pq.write_table(pa.table(predictions), run / "predictions.parquet")
    plan = {"files": [{"uri": "in.parquet", "fingerprint": spec.fingerprint}], "labels": labels, "model_fingerprint": "model"}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "request.json").write_text(json.dumps({"id_column": "id", "slice_columns": ["source"]}))


def manifest(run: Path) -> StagedManifest:
    staged = pq.read_table(run / "work" / "input.parquet")
    has_label = "label" in staged.column_names
    return StagedManifest(
        files=[], total_rows=staged.num_rows, has_label=has_label, label_type=str(staged.schema.field("label").type) if has_label else None,
        id_type="int64", has_text_pair=False, null_text_rows=0, slice_columns=["source"], staging_key="",
    )  # fmt: skip


def long_text_counts(run: Path, max_length: int, mode: str = "truncate", overlap: int = 0, max_chunks: int = 64) -> LongTextCounts:
    """scoring.long_text of a run at `max_length` in `mode`, counted from the run's `tokens` by the
    definitions (SPEC section 11), not by the worker's code."""
    window = max_length - SPECIALS
    content = [int(t) - SPECIALS for t in pq.read_table(run / "predictions.parquet").column("tokens").to_pylist()]
    scored = dropped = chunks = capped = 0
    per_row: dict[str, int] = {}
    for length in content:
        if mode != "chunk" or length <= window:
            scored, dropped, k = scored + min(length, window), dropped + max(length - window, 0), 1
        else:
            step = window - overlap
            k = 1 + -(-(length - window) // step)
            if k > max_chunks:
                capped, k = capped + 1, max_chunks
                dropped += length - ((k - 1) * step + window)
            scored += k * window
        chunks += k
        per_row[str(k)] = per_row.get(str(k), 0) + 1
    chunked = {"chunks": chunks, "rows_capped": capped, "windows_per_row": dict(sorted(per_row.items(), key=lambda kv: int(kv[0])))}
    return LongTextCounts(
        mode=mode, max_length=max_length, window=window, rows_over_length=sum(length > window for length in content),
        tokens_content=sum(content), tokens_scored=scored, tokens_dropped=dropped, **(chunked if mode == "chunk" else {}),
    )  # fmt: skip


def evaluate(
    root: Path,
    name: str,
    head: HeadKind | str,
    *,
    baseline: str | None = None,
    reference: str | None = None,
    slices: bool = True,
    max_length: int | None = None,
    gates: dict[str, str] | None = None,
    long_text: LongTextCounts | None = None,
) -> MetricsDocument:
    """The evaluate step's document for run `name` under `root` (history and gates filled in), with
    `scoring` attached as the report step attaches it (its long_text: `long_text`, or a truncate
    run's at `max_length`)."""
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.history import history_and_left_out
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.gates import evaluate_gates

    run = RunFolder.from_uri(str(root / name))
    output = Location.from_uri(str(root))
    document = evaluate_run(
        run,
        labels_of(head),
        manifest(root / name),
        EvaluationSettings(
            slice_columns=["source"] if slices else [],
            baseline=output.child(baseline) if baseline else None,
            head=head,
            max_length=max_length,
            drift_reference=output.child(reference) if reference else None,
        ),
    )
    document.history, _ = history_and_left_out(output, name, document, run.read_json(RunFolder.PLAN))
    if gates:
        document.gates = evaluate_gates(gates, document)
    rows = document.rows
    scoring = {"rows_scored": rows, "tokens": 10 * rows, "padded_tokens": 12 * rows, "truncated": 0, "seconds": 1.0}
    scoring |= {"rows_per_s": float(rows), "tokens_per_s": 10.0 * rows, "processes": 1, "dtype": "float32"}
    if long_text is not None or max_length is not None:
        scoring["long_text"] = (long_text or long_text_counts(root / name, max_length or 0)).as_dict()
    return document.model_copy(update={"scoring": ScoringSummary.model_validate(scoring)})


def publish(root: Path, name: str, document: MetricsDocument) -> None:
    """Publish the run as the report step does (its completion record seals what a later run reads)."""
    from scorekeeper.report.publish import publish_complete

    publish_complete(RunFolder.from_uri(str(root / name)), {"metrics.json": document.to_json_bytes()}, "2026-12-01T00:00:00+00:00")


def render(document: MetricsDocument, name: str) -> tuple[str, str]:
    """(report.md, report.html) of the document."""
    from scorekeeper.report.report import render_html, render_markdown

    run_info = {
        "run_id": name, "input_uri": "in.parquet", "model_uri": "model", "mode": "local", "num_processes": 1,
        "model_fingerprint": "model", "input_fingerprint": "night", "slice_columns": ["source"], "head": document.head,
    }  # fmt: skip
    return render_markdown(document, run_info), render_html(document, run_info)

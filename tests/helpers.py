"""Test helpers: runs through the Prefect flow, the first steps as plain functions, independent
references, data files."""

from __future__ import annotations

import base64
import contextlib
import csv
import functools
import http.server
import json
import random
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder, StagedManifest
from scorekeeper.storage import is_local
from scorekeeper.tasks.open_run import open_run
from scorekeeper.tasks.plan import plan_run
from scorekeeper.tasks.read import read_inputs
from scorekeeper.worker.model import CPU_NATIVE_FLAGS, cpu_feature_flags
from tests import prefect_session

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
    """What a run published, read back from its folder, and what the flow returned."""

    run_dir: Path | str  # a local folder, or the run's URI in object storage
    predictions: pa.Table
    metrics: dict  # report/metrics.json
    returned: dict  # the flow's return value

    @property
    def scoring(self) -> dict:
        """This attempt's scoring facts as metrics.json publishes them: rows_scored, truncated, the
        engine facts of rank 0, one record per pipeline."""
        return self.metrics["scoring"]


def open_run_and_plan(num_processes: int = 1, **params):
    """The flow's steps up to the plan as plain functions, for tests of those steps: (request,
    context, manifest, job)."""
    request = ScoreRequest(num_processes=num_processes, **params)
    context = open_run(request, None)
    manifest = read_inputs(request.model_copy(update={"head": context.head}), context.run, tokenizer_folder=context.model_path)
    return request, context, manifest, plan_run(request, context, manifest)


def run_flow(num_processes: int = 1, **params) -> Result:
    """One run through the product's own composition: the flow `score_dataset`, called in this
    process against the session's Prefect server (tests/prefect_session.py). It starts and stops
    its own scoring processes, and runs every step: compare_to, history, report, artifacts, gates."""
    from scorekeeper.flows.score import score_dataset

    with prefect_session.api():
        returned = score_dataset(num_processes=num_processes, **params)
    run = RunFolder.under(params["output_uri"], returned["run_id"])
    with run.fs.open(run.join(RunFolder.PREDICTIONS), "rb") as f:
        predictions = pq.read_table(f)
    metrics = run.read_json(RunFolder.METRICS)
    return Result(Path(run.path) if is_local(run.fs) else run.uri, predictions, metrics, returned)


def reference_probabilities(
    model_dir: str,
    texts: list[str],
    pairs: list[str] | None = None,
    adapter_dir: str | None = None,
    merge: bool = True,
    head: str = "single_label",
) -> np.ndarray:
    """Each row scored alone, unpadded, with transformers directly: the independent reference.
    `head`: softmax (single_label), sigmoid (multi_label) or the raw logits (regression), in float64."""
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
            logits = model(**enc).logits.double()
            outputs = {"single_label": lambda x: torch.softmax(x, -1), "multi_label": torch.sigmoid, "regression": lambda x: x}[head](
                logits
            )
            out.append(outputs[0].numpy())
    return np.stack(out)


def score_every_row_sampled(loaded, texts: list[str], batches: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The replica runner in-process over `texts` as one range, every row in SPEC 14's sample: each
    row's embedding (rows x width) and its probabilities. The rows make `batches` right-padded batches."""
    import torch

    from scorekeeper.run_folder import IndexRange
    from scorekeeper.worker.embeddings import Representation
    from scorekeeper.worker.replica import prepare_range, scored_ranges

    loaded.representation = Representation(loaded.model, len(texts), len(texts), loaded.model_pad_token_id)
    rows = pa.table({"row_index": pa.array(range(len(texts)), pa.int64()), "id": pa.array(range(len(texts))), "text": texts})
    prepared = prepare_range(IndexRange(0, 0, len(texts)), rows, loaded, tokens_per_batch=4096, max_batch_rows=64, pin=False)
    assert len(prepared.batches) == batches
    ((done, values),) = scored_ranges([prepared], loaded, torch.device("cpu"))
    return np.array(done.embeddings.column("embedding").to_pylist()), values


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


@contextlib.contextmanager
def basic_auth_server(folder: Path, user: str, password: str, signature: str | None = None):
    """Serve `folder` over HTTP on loopback, answering only requests that carry this user's basic
    auth (what a URI such as `http://user:password@host/...` sends) or, given `signature`, a query
    whose X-Amz-Signature is it (as object storage answers a presigned URL); yields `host:port`."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            signed = signature is not None and query.get("X-Amz-Signature") == [signature]
            if self.headers.get("Authorization") != expected and not signed:
                self.send_response(401)
                self.end_headers()
                return
            super().do_GET()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

        def handle(self):
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def needs_native(dtype: str):
    """Skip a test that scores in a reduced dtype on a CPU that only emulates it: the worker refuses
    such a run (resolve_dtype), so the test can only pass where the CPU has one of the dtype's
    instruction flags. The reason names the flags, so a skip says what the machine lacks."""
    import pytest

    flags = CPU_NATIVE_FLAGS[dtype]
    return pytest.mark.skipif(
        not cpu_feature_flags() & flags, reason=f"{dtype} needs one of the CPU flags {', '.join(sorted(flags))} (this CPU only emulates it)"
    )


def cli_in_process(*args: str, cwd) -> subprocess.CompletedProcess:
    """The command's main() in this process, run in `cwd`, its stdout and stderr captured: for the
    refusals it makes before anything starts (exit 2, one line), which start no server, scoring
    process or flow, so that a subprocess would add only its imports. Runs that score go through
    a real `scorekeeper` process (tests/test_flow_cli.py `_cli`)."""
    import io
    import os

    from scorekeeper.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["scorekeeper", *args], code, out.getvalue(), err.getvalue())

"""A fixed set of evaluations, written without scoring, and their published reports: the proof that
a change to the evaluation or the report changes no number and no byte of what a run publishes.

    .venv/bin/python bench/golden.py build/golden-after            # write the outputs
    .venv/bin/python bench/golden.py build/golden-after build/golden-before   # and compare with a folder
    .venv/bin/python bench/golden.py --snapshot build/golden tests/golden/snapshot.json   # store the snapshot

Every head kind with ground truth (single-label from the label column and from ground-truth files
with ids of another type, multi-label, regression with one and with two outputs), slices, a
baseline run each is compared with (comparison, paired tests), gates, the history and the label
audit; and per kind a run measured against a drift reference (drift, the estimate, monitoring
gates) at a max_length some of its rows exceed (length_impact); and per kind a run with a labelling plan
(SPEC 13: drawn from a reference's calibration or the model's outputs, its prediction-powered estimates). Each run's evaluation goes through the evaluate step's own functions and its report through
the report step's publish_report, so the folder holds what a run publishes: metrics.json,
report.md, report.html and the SVGs. The clock is fixed (finished_at), so two builds of the same
code are byte-identical (DuckDB on one thread, so that no sum's last bit depends on the split of the rows); `compare` checks metrics.json by key with floats to 1e-9 and every other
file byte for byte (tests/test_golden.py checks a build against the snapshot in tests/golden/snapshot.json:
see `snapshot`).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FINISHED_AT = "2026-12-01T00:00:00+00:00"
SENTIMENT = ["negative", "neutral", "positive", "mixed"]
TOPICS = ["price", "delivery", "quality", "service"]
OUTPUTS = ["stars", "helpfulness"]
N = 240
TOLERANCE = 1e-9  # metrics.json's floats: the same to this, relative or absolute


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _sources(n: int, seed: int) -> list[str | None]:
    return [str(v) if v != "none" else None for v in _rng(seed).choice(["web", "app", "email", "none"], size=n, p=[0.5, 0.3, 0.15, 0.05])]


def _write_common(run: Path, n: int, labels: list[str], label: pa.Array | None, slices: list[str | None], name: str) -> None:
    (run / "work").mkdir(parents=True)
    staged: dict[str, pa.Array] = {
        "row_index": pa.array(range(n), pa.int64()),
        "id": pa.array(range(n), pa.int64()),
        "text": pa.array([f"review {i} <b>&</b> text" for i in range(n)]),
    }
    if label is not None:
        staged["label"] = label
    staged["slice_0"] = pa.array(slices, pa.string())
    pq.write_table(pa.table(staged), run / "work" / "input.parquet")
    files = [{"uri": "in.parquet", "fingerprint": "golden-input"}]
    (run / "plan.json").write_text(json.dumps({"files": files, "labels": labels, "model_fingerprint": f"model-{name}"}))
    (run / "request.json").write_text(json.dumps({"id_column": None}))


def _single_label(run: Path, seed: int, skill: float, truth_from_files: bool) -> None:
    rng = _rng(seed)
    k = len(SENTIMENT)
    truth = rng.choice(k, size=N, p=[0.4, 0.3, 0.2, 0.1])
    logits = _rng(seed + 100).normal(0, 1, size=(N, k))
    logits[np.arange(N), truth] += skill
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    predicted = probs.argmax(1)
    names = [SENTIMENT[t] for t in truth]
    names[3] = "sarcastic"  # an unknown label
    _write_common(run, N, SENTIMENT, None if truth_from_files else pa.array(names), _sources(N, 7), run.name)
    pq.write_table(
        pa.table({
            "row_index": pa.array(range(N), pa.int64()),
            "id": pa.array(range(N), pa.int64()),
            "predicted_id": pa.array(predicted, pa.int64()),
            "predicted_label": pa.array([SENTIMENT[i] for i in predicted]),
            "score": pa.array(probs.max(1)),
            "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip
    if truth_from_files:  # ids as text against the input's integers; two ids match no input row
        ids = [str(i) for i in range(N - 10)] + ["9001", "9002"]
        labels = names[: N - 10] + ["positive", "negative"]
        pq.write_table(pa.table({"id": pa.array(ids), "label": pa.array(labels)}), run / "work" / "ground_truth.parquet")


def _multi_label(run: Path, seed: int, skill: float) -> None:
    rng = _rng(seed)
    k = len(TOPICS)
    truth = rng.random((N, k)) < np.array([0.5, 0.3, 0.2, 0.1])
    logits = _rng(seed + 100).normal(0, 1, size=(N, k)) + skill * (truth * 2 - 1)
    probs = 1 / (1 + np.exp(-logits))
    lists = [[TOPICS[j] for j in range(k) if truth[i, j]] for i in range(N)]
    lists[5] = ["price", "weather"]  # an unknown label
    _write_common(run, N, TOPICS, pa.array(lists, pa.list_(pa.string())), _sources(N, 8), run.name)
    predicted = [[TOPICS[j] for j in range(k) if probs[i, j] > 0.5] for i in range(N)]
    pq.write_table(
        pa.table({
            "row_index": pa.array(range(N), pa.int64()),
            "id": pa.array(range(N), pa.int64()),
            "predicted_labels": pa.array(predicted, pa.list_(pa.string())),
            "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip


def _regression(run: Path, seed: int, noise: float, outputs: list[str]) -> None:
    rng = _rng(seed)
    truth = rng.normal(3.0, 1.0, size=(N, len(outputs)))
    prediction = truth + _rng(seed + 100).normal(0, noise, size=truth.shape)
    if len(outputs) == 1:
        label, values = pa.array(truth[:, 0]), pa.array(prediction[:, 0], pa.float64())
    else:
        label, values = pa.array(truth.tolist(), pa.list_(pa.float64())), pa.array(prediction.tolist(), pa.list_(pa.float64()))
    _write_common(run, N, outputs, label, _sources(N, 9), run.name)
    pq.write_table(
        pa.table({"row_index": pa.array(range(N), pa.int64()), "id": pa.array(range(N), pa.int64()), "prediction": values}),
        run / "predictions.parquet",
    )


def _with_lengths(run: Path, seed: int, longer: int) -> None:
    """A run scored with lengths (predictions' `tokens` and `unknown_tokens`, as the worker writes
    them) whose request names its slice column, so that drift reads every signal of it and the
    length split has rows over the window; `longer` shifts its lengths (a drift to find)."""
    predictions = pq.read_table(run / "predictions.parquet")
    rng = _rng(seed + 200)
    tokens = rng.integers(8, 96, size=predictions.num_rows) + longer
    unknown = rng.binomial(tokens, 0.02 + longer / 1000)
    predictions = predictions.append_column("tokens", pa.array(tokens, pa.int64()))
    pq.write_table(predictions.append_column("unknown_tokens", pa.array(unknown, pa.int64())), run / "predictions.parquet")
    (run / "request.json").write_text(json.dumps({"id_column": None, "slice_columns": ["source"]}))


def _manifest(run: Path, truth_from_files: bool = False):
    from scorekeeper.run_folder import StagedGroundTruth, StagedManifest

    staged = pq.read_table(run / "work" / "input.parquet")
    has_label = "label" in staged.column_names
    return StagedManifest(
        files=[], total_rows=staged.num_rows, has_label=has_label, label_type=str(staged.schema.field("label").type) if has_label else None,
        id_type="int64", has_text_pair=False, null_text_rows=0, slice_columns=["source"], staging_key="",
        ground_truth=StagedGroundTruth(files=[], id_type="string") if truth_from_files else None,
    )  # fmt: skip


# (run, head, what it is built from, baseline, gates); runs are evaluated in this order, so each
# baseline is complete (and in the history) before the run that names it.
RUNS = [
    ("single-a", "single_label", lambda p: _single_label(p, 1, 1.2, False), None, {}),
    ("single-b", "single_label", lambda p: _single_label(p, 1, 1.8, False), "single-a",
     {"accuracy": ">=0.5", "macro_f1_drop": "<=0.01 if significant", "ece": "<=0.01"}),
    ("single-files", "single_label", lambda p: _single_label(p, 1, 1.5, True), "single-a", {}),
    ("multi-a", "multi_label", lambda p: _multi_label(p, 2, 1.0), None, {}),
    ("multi-b", "multi_label", lambda p: _multi_label(p, 2, 1.6), "multi-a", {"micro_f1": ">=0.6", "subset_accuracy_drop": "<=0.0"}),
    ("reg-a", "regression", lambda p: _regression(p, 3, 0.8, ["stars"]), None, {}),
    ("reg-b", "regression", lambda p: _regression(p, 3, 0.5, ["stars"]), "reg-a", {"mae": "<=0.5", "rmse_delta": "<=0"}),
    ("reg2-a", "regression", lambda p: _regression(p, 4, 0.9, OUTPUTS), None, {}),
    ("reg2-b", "regression", lambda p: _regression(p, 4, 0.6, OUTPUTS), "reg2-a", {"r2": ">=0.5"}),
    # monitored runs (MONITORED): a reference scored with lengths, then a run measured against it
    ("single-ref", "single_label", lambda p: (_single_label(p, 5, 1.4, False), _with_lengths(p, 5, 0)), None, {}),
    ("single-drift", "single_label", lambda p: (_single_label(p, 6, 0.9, False), _with_lengths(p, 6, 24)), None,
     {"drifted_signals": "<=0", "estimated_accuracy": ">=0.5"}),
    ("multi-ref", "multi_label", lambda p: (_multi_label(p, 7, 1.3), _with_lengths(p, 7, 0)), None, {}),
    ("multi-drift", "multi_label", lambda p: (_multi_label(p, 8, 0.9), _with_lengths(p, 8, 16)), None, {"estimated_micro_f1": ">=0.5"}),
    ("reg-ref", "regression", lambda p: (_regression(p, 9, 0.6, ["stars"]), _with_lengths(p, 9, 0)), None, {}),
    ("reg-drift", "regression", lambda p: (_regression(p, 10, 0.9, ["stars"]), _with_lengths(p, 10, 8)), None, {"estimated_mae": "<=0.8"}),
    ("reg2-drift", "regression", lambda p: (_regression(p, 11, 0.7, OUTPUTS), _with_lengths(p, 11, 0)), None, {}),
    # labelling plans (SPEC 13): drawn with a reference's calibration (active) or the model's own outputs
    ("single-plan", "single_label", lambda p: _single_label(p, 12, 1.3, False), None, {}),
    ("multi-plan", "multi_label", lambda p: _multi_label(p, 13, 1.1), None, {}),
    ("reg-plan", "regression", lambda p: _regression(p, 14, 0.7, ["stars"]), None, {}),
]  # fmt: skip
# The monitored runs: (drift_reference, max_length) of each; reg2-drift's reference was scored
# without lengths (its tokens signals are skipped) and has no slice column in its request.
MONITORED = {
    "single-drift": ("single-ref", 64),
    "multi-drift": ("multi-ref", 64),
    "reg-drift": ("reg-ref", 72),
    "reg2-drift": ("reg2-a", 64),
}
# The runs with a labelling plan: (its reference run or None, its sampling) of each, budget LABEL_BUDGET.
LABELLED = {"single-plan": ("single-ref", "active"), "multi-plan": (None, "uniform"), "reg-plan": ("reg-ref", "active")}
LABEL_BUDGET = 40
SCORING = {
    "rows_scored": N, "tokens": 4800, "padded_tokens": 6400, "truncated": 3, "seconds": 2.5, "rows_per_s": 96.0,
    "tokens_per_s": 1920.0, "processes": 2, "dtype": "float32",
}  # fmt: skip


def _evaluate(runs: Path, name: str, head: str, baseline: str | None, gates: dict[str, str], truth_from_files: bool):
    """What the evaluate step returns for this run (history and gates filled in)."""
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.history import run_history
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.gates import evaluate_gates
    from scorekeeper.run_folder import RunFolder
    from scorekeeper.storage import Location

    run = RunFolder.from_uri(str(runs / name))
    labels = json.loads((runs / name / "plan.json").read_text())["labels"]
    output = Location.from_uri(str(runs))
    thresholds = {"price": 0.4, "delivery": 0.5, "quality": 0.6, "service": 0.5} if head == "multi_label" else 0.5
    reference, max_length = MONITORED.get(name, (None, None))
    labelling = None
    if name in LABELLED:
        from scorekeeper.evaluation.drift import recorded_reference
        from scorekeeper.evaluation.labelling import LabelRequest

        plan_reference, sampling = LABELLED[name]
        recorded = recorded_reference(output.child(plan_reference)) if plan_reference else None
        labelling = LabelRequest(key=name, budget=LABEL_BUDGET, sampling=sampling, reference_name=plan_reference, reference=recorded)
    metrics = evaluate_run(
        run,
        labels,
        _manifest(runs / name, truth_from_files),
        EvaluationSettings(
            slice_columns=["source"],
            baseline=output.child(baseline) if baseline else None,
            head=head,
            thresholds=thresholds,
            truth_column="rating",
            max_length=max_length,
            drift_reference=output.child(reference) if reference else None,
            labelling=labelling,
        ),
    )
    metrics.finished_at = FINISHED_AT
    metrics.history = run_history(output, name, metrics, run.read_json(RunFolder.PLAN))
    if gates:
        metrics.gates = evaluate_gates(gates, metrics)
    return run, metrics


def build(out: Path) -> None:
    """Write every run's published files to out/<run>/."""
    from scorekeeper.report.report import publish_report

    # One DuckDB thread: a parallel sum's last bit depends on how the rows were split between threads,
    # and report.html shows every number's repr (data-value). The setting is restored afterwards.
    threads = os.environ.get("SCOREKEEPER_DUCKDB_THREADS")
    os.environ["SCOREKEEPER_DUCKDB_THREADS"] = "1"
    try:
        _build(out, publish_report)
    finally:
        if threads is None:
            os.environ.pop("SCOREKEEPER_DUCKDB_THREADS", None)
        else:
            os.environ["SCOREKEEPER_DUCKDB_THREADS"] = threads


def _build(out: Path, publish_report) -> None:
    from scorekeeper.scoring_summary import ScoringSummary

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        for name, head, make, baseline, gates in RUNS:
            make(runs / name)
            truth_from_files = name == "single-files"
            run, metrics = _evaluate(runs, name, head, baseline, gates, truth_from_files)
            run_info = {
                "run_id": name, "input_uri": "s3://golden/in.parquet", "model_uri": "s3://golden/model", "mode": "local",
                "num_processes": 2, "model_fingerprint": f"model-{name}", "input_fingerprint": "golden-input",
                "slice_columns": ["source"], "compare_to": baseline, "head": head,
            }  # fmt: skip
            publish_report(run, metrics.model_copy(update={"scoring": ScoringSummary.model_validate(SCORING)}), run_info)
            shutil.copytree(runs / name / "report", out / name)


def _close(a, b, path: str, problems: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                problems.append(f"{path}.{key}: only in {'after' if key in a else 'before'}")
            else:
                _close(a[key], b[key], f"{path}.{key}", problems)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{path}: {len(a)} items, before {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _close(x, y, f"{path}[{i}]", problems)
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, int | float) and isinstance(b, int | float)) or not math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
            problems.append(f"{path}: {a!r}, before {b!r}")
    elif a != b:
        problems.append(f"{path}: {a!r}, before {b!r}")


def compare(after: Path, before: Path) -> list[str]:
    """What differs between two builds: metrics.json by key (floats to TOLERANCE), other files byte for byte."""
    problems: list[str] = []
    names = {p.relative_to(before).as_posix() for p in before.rglob("*") if p.is_file()}
    names |= {p.relative_to(after).as_posix() for p in after.rglob("*") if p.is_file()}
    for name in sorted(names):
        a, b = after / name, before / name
        if not a.exists() or not b.exists():
            problems.append(f"{name}: only in {'after' if a.exists() else 'before'}")
        elif name.endswith("metrics.json"):
            _close(json.loads(a.read_bytes()), json.loads(b.read_bytes()), name, problems)
        elif a.read_bytes() != b.read_bytes():
            problems.append(f"{name}: the bytes differ")
    return problems


def snapshot(out: Path) -> dict:
    """A build as tests/golden/snapshot.json keeps it: every run's metrics.json, every parquet file's
    columns, every other file's sha256 (report.html's with its `data-value` numbers left out).

    A float's last bit may move with the library versions a machine resolves (DuckDB's and numpy's
    sums), so what holds full-precision floats is kept as values and compared to TOLERANCE:
    metrics.json, the parquet files' columns (a parquet file's bytes also name the writer's version),
    and report.html's `data-value` attributes, which `html_numbers` holds to the run's metrics.json.
    Every other byte, the numbers a reader sees included, is compared exactly."""
    metrics, tables, digests = {}, {}, {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        if name.endswith("metrics.json"):
            metrics[name] = json.loads(path.read_bytes())
        elif name.endswith(".parquet"):
            table = pq.read_table(path)
            tables[name] = {"schema": str(table.schema), "columns": table.to_pydict()}
        elif name.endswith(".html"):
            digests[name] = hashlib.sha256(_DATA_VALUE.sub('data-value=""', path.read_text()).encode()).hexdigest()
        else:
            digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"metrics": metrics, "tables": tables, "sha256": digests}


_DATA_VALUE = re.compile(r'data-value="[^"]*"')
_DATA_NUMBER = re.compile(r'data-key="([^"]*)" data-value="([^"]*)"')


def html_numbers(out: Path) -> list[str]:
    """Each report.html's `data-value` numbers against its run's metrics.json (floats to TOLERANCE):
    the page shows the document's numbers, at the paths its `data-key` attributes name."""
    problems: list[str] = []
    for page in sorted(out.rglob("report.html")):
        name = page.relative_to(out).as_posix()
        document = json.loads((page.parent / "metrics.json").read_bytes())
        for key, value in _DATA_NUMBER.findall(page.read_text()):
            path, node = json.loads(html.unescape(key)), document
            for part in path:
                node = node[part]
            if node is None:
                if value:
                    problems.append(f"{name} {path}: data-value {value!r} where metrics.json holds null")
            elif value == "" or not math.isclose(float(value), float(node), rel_tol=TOLERANCE, abs_tol=TOLERANCE):
                problems.append(f"{name} {path}: data-value {value!r}, metrics.json {node!r}")
    return problems


def compare_snapshot(out: Path, stored: dict) -> list[str]:
    """What differs between a build and a stored snapshot (as compare does, floats to TOLERANCE)."""
    problems: list[str] = []
    _close(snapshot(out), stored, "snapshot", problems)
    return problems + html_numbers(out)


def main(argv: list[str]) -> int:
    if argv[0] == "--snapshot":  # golden.py --snapshot OUT SNAPSHOT_JSON: build and store its snapshot
        out = Path(argv[1])
        build(out)
        Path(argv[2]).write_text(json.dumps(snapshot(out), sort_keys=True, separators=(",", ":")) + "\n")
        return 0
    out = Path(argv[0])
    build(out)
    print(f"wrote {sum(1 for p in out.rglob('*') if p.is_file())} files under {out}")
    if len(argv) > 1:
        problems = compare(out, Path(argv[1]))
        for line in problems[:40]:
            print(line)
        print(f"{len(problems)} difference(s) from {argv[1]}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))

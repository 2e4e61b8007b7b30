"""Drift and estimated performance on generated prediction tables (no scoring): does the alarm stay
quiet without drift, does it find the shifts that matter, does the estimate's interval hold the
truth, and what do drift and estimate add to the evaluate step.

    .venv/bin/python bench/drift.py replays     # no-drift replays at 1e3, 1e5, 1e6 rows (20 each): alarms
    .venv/bin/python bench/drift.py shifts      # class mix (PSI 0.2), texts twice as long, 30% unknown words at 1e4
    .venv/bin/python bench/drift.py coverage    # 20 labelled backfills per kind: 95% intervals' coverage (accuracy, macro/micro F1); a concept shift
    .venv/bin/python bench/drift.py timing [ROWS]   # evaluate with and without drift_reference (default 3M rows)
    .venv/bin/python bench/drift.py             # all four

Replays and shifts run the drift step itself (scorekeeper/evaluation/drift.py) over tables in
DuckDB; coverage and timing write run folders and go through the evaluation's driver
(evaluate_run), as the evaluate step does. Seeds are fixed: two runs print the same figures.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LABELS = ["negative", "neutral", "positive"]
MIX = np.array([0.5, 0.3, 0.2])
REPLAYS = 20


def predictions(rng: np.random.Generator, n: int, mix=MIX, length: float = 40.0, unknown: float = 0.02) -> pa.Table:
    """A single-label run's predictions as the drift step reads them: the predicted label drawn from
    `mix`, a score, tokens per row (log-normal around `length`) and unknown tokens (binomial)."""
    predicted = rng.choice(len(LABELS), size=n, p=mix)
    tokens = np.maximum(3, np.round(rng.lognormal(math.log(length), 0.5, n))).astype(np.int32)
    return pa.table({
        "row_index": pa.array(np.arange(n), pa.int64()),
        "predicted_label": pa.array(np.array(LABELS)[predicted]),
        "score": pa.array(0.34 + 0.66 * rng.beta(4, 2, n)),
        "tokens": pa.array(tokens),
        "unknown_tokens": pa.array(rng.binomial(tokens, unknown).astype(np.int32)),
    })  # fmt: skip


def drift_of(reference: pa.Table, current: pa.Table):
    import duckdb

    from scorekeeper.evaluation import drift as d
    from scorekeeper.evaluation import single_label

    con = duckdb.connect()
    con.from_arrow(reference).create_view("reference_predictions")
    con.from_arrow(current).create_view("predictions")
    r = d.RunSide("reference", "reference_predictions", d.columns_of(con, "reference_predictions"), LABELS)
    c = d.RunSide("current", "predictions", d.columns_of(con, "predictions"), LABELS)
    try:
        return d.drift(con, single_label.EVALUATION, r, c, [], "reference")
    finally:
        con.close()


def replays() -> dict:
    """Independent samples of one generator: how often does the alarm ring?"""
    out = {}
    for n in (1_000, 100_000, 1_000_000):
        rng = np.random.default_rng(n)
        alarms, worst = 0, []
        for _ in range(REPLAYS):
            result = drift_of(predictions(rng, n), predictions(rng, n))
            alarms += bool(result.alarm)  # null (nothing judged) does not happen at these row counts
            worst.append(max(s.psi for s in result.signals.values()))
        out[n] = {"alarms": alarms, "replays": REPLAYS, "max_psi": max(worst)}
        print(f"no drift, {n:>9,} rows: {alarms} alarm(s) in {REPLAYS} replays; largest PSI {max(worst):.5f}")
    return out


def psi_of(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum((q - p) * np.log(q / p)))


def mix_at_psi(target: float) -> np.ndarray:
    """The class mix moved from MIX (negative -> positive) until its PSI against MIX is `target`."""
    lo, hi = 0.0, 0.29
    for _ in range(60):
        t = (lo + hi) / 2
        if psi_of(MIX, MIX + np.array([-t, 0, t])) < target:
            lo = t
        else:
            hi = t
    return MIX + np.array([-lo, 0, lo])


def shifts(n: int = 10_000) -> dict:
    """Shifts that matter, each alarmed in every replay? And which signal says so."""
    moved = mix_at_psi(0.2)
    cases = {
        "class mix moved by PSI 0.2": {"mix": moved},
        "texts twice as long": {"length": 80.0},
        "30% unknown words": {"unknown": 0.32},
    }
    out = {}
    for name, change in cases.items():
        rng = np.random.default_rng(7)
        alarms, found = 0, {}
        for _ in range(REPLAYS):
            result = drift_of(predictions(rng, n), predictions(rng, n, **change))
            alarms += bool(result.alarm)  # null (nothing judged) does not happen at these row counts
            for s in result.drifted:
                found[s] = found.get(s, 0) + 1
        out[name] = {"alarms": alarms, "replays": REPLAYS, "drifted": found}
        print(f"{name:<28} at {n:,} rows: alarmed in {alarms} of {REPLAYS} replays; drifted signals {found}")
    print(f"(class mix {MIX.tolist()} -> {np.round(moved, 4).tolist()})")
    return out


# -- estimates: run folders through the evaluation's driver ---------------------------------------------


def labelled_run(root: Path, name: str, rng: np.random.Generator, n: int, concept_shift: float = 0.0) -> Path:
    """A run folder whose model is calibrated by construction (each row's truth drawn from its own
    probabilities); with `concept_shift`, that share of rows gets a truth unrelated to the input."""
    logits = rng.normal(0, 1.6, size=(n, len(LABELS))) + np.log(MIX)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    truth = (probs.cumsum(1) > rng.random((n, 1))).argmax(1)
    shifted = rng.random(n) < concept_shift
    truth[shifted] = rng.choice(len(LABELS), size=int(shifted.sum()))
    predicted = probs.argmax(1)
    run = root / name
    (run / "work").mkdir(parents=True)
    pq.write_table(
        pa.table({
            "row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
            "predicted_id": pa.array(predicted, pa.int64()), "predicted_label": pa.array(np.array(LABELS)[predicted]),
            "score": pa.array(probs.max(1)), "probabilities": pa.FixedSizeListArray.from_arrays(pa.array(probs.ravel()), len(LABELS)).cast(pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip
    pq.write_table(
        pa.table({"row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
                  "text": pa.array(["x"] * n), "label": pa.array(np.array(LABELS)[truth])}),
        run / "work" / "input.parquet",
    )  # fmt: skip
    (run / "plan.json").write_text(json.dumps({"files": [{"uri": "in", "fingerprint": name}], "labels": LABELS}))
    (run / "request.json").write_text(json.dumps({"id_column": None}))
    return run


TOPICS = ["price", "delivery", "quality"]


def labelled_multi_run(root: Path, name: str, rng: np.random.Generator, n: int, concept_shift: float = 0.0) -> Path:
    """A multi-label run folder calibrated by construction (each label's truth drawn from its own
    probability); with `concept_shift`, that share of rows gets truths unrelated to the input."""
    probs = 1 / (1 + np.exp(-(rng.normal(0, 1.8, size=(n, len(TOPICS))) + np.array([0.0, -0.8, -1.5]))))
    truth = rng.random(probs.shape) < probs
    shifted = rng.random(n) < concept_shift
    truth[shifted] = rng.random((int(shifted.sum()), len(TOPICS))) < 0.3
    predicted = [[TOPICS[j] for j in range(len(TOPICS)) if probs[i, j] > 0.5] for i in range(n)]
    run = root / name
    (run / "work").mkdir(parents=True)
    pq.write_table(
        pa.table({
            "row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
            "predicted_labels": pa.array(predicted, pa.list_(pa.string())), "probabilities": pa.array(probs.tolist(), pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip
    lists = [[TOPICS[j] for j in range(len(TOPICS)) if truth[i, j]] for i in range(n)]
    pq.write_table(
        pa.table({"row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
                  "text": pa.array(["x"] * n), "label": pa.array(lists, pa.list_(pa.string()))}),
        run / "work" / "input.parquet",
    )  # fmt: skip
    (run / "plan.json").write_text(json.dumps({"files": [{"uri": "in", "fingerprint": name}], "labels": TOPICS}))
    (run / "request.json").write_text(json.dumps({"id_column": None}))
    return run


def evaluate(run: Path, reference: Path | None = None, head: str = "single_label"):
    from scorekeeper.evaluation.driver import evaluate_run
    from scorekeeper.evaluation.settings import EvaluationSettings
    from scorekeeper.report.publish import publish_complete
    from scorekeeper.run_folder import RunFolder, StagedManifest
    from scorekeeper.storage import Location

    rows = pq.read_metadata(run / "predictions.parquet").num_rows
    label_type = "string" if head == "single_label" else "list<item: string>"
    manifest = StagedManifest(
        files=[], total_rows=rows, has_label=True, label_type=label_type, id_type="int64", has_text_pair=False,
        null_text_rows=0, slice_columns=[], staging_key="",
    )  # fmt: skip
    document = evaluate_run(
        RunFolder.from_uri(str(run)),
        LABELS if head == "single_label" else TOPICS,
        manifest,
        EvaluationSettings(head=head, drift_reference=Location.from_uri(str(reference)) if reference else None),
    )
    publish_complete(RunFolder.from_uri(str(run)), {"metrics.json": document.to_json_bytes()}, "2026-12-01T00:00:00+00:00")
    return document


def coverage(n: int = 10_000) -> dict:
    """20 labelled backfills from the reference's distribution: does the 95% interval hold the
    realized accuracy? And under a concept shift (30% of truths unrelated to the input)?"""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(11)
        reference = labelled_run(root, "reference", rng, n)
        evaluate(reference)
        out = {}
        for case, shift in (("same distribution", 0.0), ("concept shift (30% of truths unrelated to the input)", 0.3)):
            held, errors, f1_errors, f1_held = 0, [], [], 0
            for i in range(REPLAYS):
                run = labelled_run(root, f"{case[:4]}-{i}", rng, n, concept_shift=shift)
                doc = evaluate(run, reference)
                assert doc.estimated is not None and doc.estimated.accuracy_ci is not None and doc.accuracy is not None
                low, high = doc.estimated.accuracy_ci
                held += low <= doc.accuracy <= high
                errors.append(doc.estimated.accuracy - doc.accuracy)
                f1_errors.append((doc.estimated.macro_f1 or 0.0) - (doc.macro_f1 or 0.0))
                f1_held += _holds(doc.estimated.macro_f1_ci, doc.macro_f1)
            width = doc.estimated.accuracy_ci[1] - doc.estimated.accuracy_ci[0]
            f1_width = _width(doc.estimated.macro_f1_ci)
            out[case] = {"held": held, "backfills": REPLAYS, "mean_error": float(np.mean(errors)), "max_abs_error": float(np.max(np.abs(errors))),
                         "macro_f1_mean_error": float(np.mean(f1_errors)), "interval_width": width,
                         "macro_f1_held": f1_held, "macro_f1_interval_width": f1_width}  # fmt: skip
            print(
                f"{case}: the 95% interval held the accuracy in {held} of {REPLAYS} backfills of {n:,} rows; "
                f"estimate - truth mean {np.mean(errors):+.4f}, largest {np.max(np.abs(errors)):.4f} "
                f"(interval width {width:.4f}); macro-F1 estimate - truth mean {np.mean(f1_errors):+.4f}, "
                f"its interval held it in {f1_held} of {REPLAYS} (width {f1_width:.4f})"
            )
    out |= fresh_reference_coverage(n)
    out |= multi_label_coverage(n)
    return out


def fresh_reference_coverage(n: int) -> dict:
    """The same as `coverage`'s first case, but each backfill against a reference of its own: the
    interval's reference part is then sampled too (with one reference, every backfill shares its error)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(13)
        held = {"accuracy": 0, "macro_f1": 0}
        for i in range(REPLAYS):
            reference = labelled_run(root, f"reference-{i}", rng, n)
            evaluate(reference)
            doc = evaluate(labelled_run(root, f"fresh-{i}", rng, n), reference)
            assert doc.estimated is not None
            held["accuracy"] += _holds(doc.estimated.accuracy_ci, doc.accuracy)
            held["macro_f1"] += _holds(doc.estimated.macro_f1_ci, doc.macro_f1)
        case = "same distribution, a fresh reference per backfill"
        print(
            f"{case}: the 95% intervals held the accuracy in {held['accuracy']} and the macro-F1 in {held['macro_f1']} of {REPLAYS} backfills"
        )
        return {case: {"held": held, "backfills": REPLAYS}}


def _holds(ci: list[float] | None, value: float | None) -> bool:
    return ci is not None and value is not None and ci[0] <= value <= ci[1]


def _width(ci: list[float] | None) -> float:
    return ci[1] - ci[0] if ci else float("nan")


def multi_label_coverage(n: int) -> dict:
    """20 labelled multi-label backfills: do the 95% intervals of the estimated macro and micro F1 hold
    the realized F1s? And under a concept shift (30% of rows' truths unrelated to the input)?"""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(12)
        reference = labelled_multi_run(root, "reference", rng, n)
        evaluate(reference, head="multi_label")
        out = {}
        for case, shift in (("multi-label, same distribution", 0.0), ("multi-label, concept shift (30% of rows)", 0.3)):
            held = {"macro_f1": 0, "micro_f1": 0}
            errors: dict[str, list[float]] = {"macro_f1": [], "micro_f1": []}
            widths: dict[str, list[float]] = {"macro_f1": [], "micro_f1": []}
            for i in range(REPLAYS):
                doc = evaluate(labelled_multi_run(root, f"ml-{shift}-{i}", rng, n, concept_shift=shift), reference, head="multi_label")
                est = doc.estimated
                assert est is not None
                for name, value, ci, truth in (
                    ("macro_f1", est.macro_f1, est.macro_f1_ci, doc.macro_f1), ("micro_f1", est.micro_f1, est.micro_f1_ci, doc.micro_f1)
                ):  # fmt: skip
                    held[name] += _holds(ci, truth)
                    errors[name].append((value or 0.0) - (truth or 0.0))
                    widths[name].append(_width(ci))
            out[case] = {
                name: {"held": held[name], "backfills": REPLAYS, "mean_error": float(np.mean(errors[name])),
                       "interval_width": float(np.mean(widths[name]))}
                for name in held
            }  # fmt: skip
            print(
                f"{case}: the 95% intervals held the macro-F1 in {held['macro_f1']} and the micro-F1 in {held['micro_f1']} of "
                f"{REPLAYS} backfills of {n:,} rows; estimate - truth mean {np.mean(errors['macro_f1']):+.4f} / "
                f"{np.mean(errors['micro_f1']):+.4f} (mean widths {np.mean(widths['macro_f1']):.4f} / {np.mean(widths['micro_f1']):.4f})"
            )
    return out


def timing(n: int = 3_000_000) -> dict:
    """The evaluate step at n rows, with and without drift_reference (a labelled reference of n rows)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(5)
        reference = labelled_run(root, "reference", rng, n)
        evaluate(reference)
        current = labelled_run(root, "current", rng, n)
        seconds: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(2):  # alternated, twice: the machine is shared
            for key, ref in (("without", None), ("with", reference)):
                start = time.perf_counter()
                evaluate(current, ref)
                seconds[key].append(time.perf_counter() - start)
        without, with_drift = min(seconds["without"]), min(seconds["with"])
        print(
            f"evaluate at {n:,} rows: {without:.2f} s without drift_reference, {with_drift:.2f} s with it "
            f"(+{100 * (with_drift - without) / without:.0f}%); each the faster of 2 alternated runs {seconds}"
        )
        return {"rows": n, "without_s": without, "with_s": with_drift, "extra": (with_drift - without) / without}


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what in ("replays", "all"):
        replays()
    if what in ("shifts", "all"):
        shifts()
    if what in ("coverage", "all"):
        coverage()
    if what in ("timing", "all"):
        timing(int(argv[1]) if len(argv) > 1 else 3_000_000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Labelling plans and prediction-powered intervals on labelled backfills (docs/labelling.md): how
often the 95% intervals of accuracy and macro F1 hold the run's true value, how wide they are
against the sample alone (classical) and against a Wilson interval of a uniform sample of the same
size, and how often estimate_bias fires, with no shift, a covariate shift and a concept shift.

    nice -n 10 .venv/bin/python bench/labelling.py                    # generated 10k-row runs and the demo
    nice -n 10 .venv/bin/python bench/labelling.py --plans 300 --demo-run runs/demo-2 --json out.json
    nice -n 10 .venv/bin/python bench/labelling.py --timing 3000000   # what a plan and its estimates add to evaluate
    nice -n 10 .venv/bin/python bench/labelling.py --timing 3000000 --head multi_label   # (or regression)
    .venv/bin/python bench/labelling.py --head regression --prepare ROOT 3000000   # the --timing runs, once, for:
    .venv/bin/python bench/labelling.py --head regression --evaluate-once ROOT MODE 3000000 1000   # MODE without, with, pinned

Every label of a backfill is known; a plan hides all but its own rows' labels. Each backfill is
scored (or generated) once: its label-free predictions (the head kind's `label_free`, against the
reference's calibration), targets (`label_targets`) and inclusion probabilities (plan_design.sql)
are the library's, computed once per budget and sampling; the plans differ only in their key (the
draw U_i = sha256(f"{key}:{row_index}")), and each plan's estimates are the library's estimator
(labelling._estimate, _estimate_bias) over its labelled rows. The demo backfill is runs/demo-2
(setup.sh's second run: the held-out reviews with the final adapter), split by row: even rows are
the labelled reference, odd rows the backfill.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scorekeeper.evaluation import labelling  # noqa: E402
from scorekeeper.evaluation.base import Evaluation  # noqa: E402
from scorekeeper.evaluation.driver import evaluate_run  # noqa: E402
from scorekeeper.evaluation.duck import sql  # noqa: E402
from scorekeeper.evaluation.settings import EvaluationSettings  # noqa: E402
from scorekeeper.evaluation.single_label import EVALUATION as SINGLE  # noqa: E402
from scorekeeper.metrics.document import RecordedMetrics  # noqa: E402
from scorekeeper.run_folder import RunFolder, StagedManifest  # noqa: E402

Z = 1.959963984540054
LABELS = ["negative", "neutral", "positive", "mixed"]
PRIOR = np.array([0.4, 0.3, 0.2, 0.1])


@dataclass
class Backfill:
    name: str
    probs: np.ndarray  # rows x labels
    truth: np.ndarray  # label ids (-1: a label the model cannot predict)
    labels: list[str]


def generated(rng: np.random.Generator, n: int, skill: float = 1.6, prior=PRIOR) -> Backfill:
    truth = rng.choice(len(LABELS), size=n, p=prior)
    logits = rng.normal(0, 1, size=(n, len(LABELS)))
    logits[np.arange(n), truth] += skill
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return Backfill("generated", probs, truth, LABELS)


def covariate_shift(rng: np.random.Generator, pool: Backfill, n: int) -> Backfill:
    """Rows of the same generator, the uncertain ones four times as likely: P(label | text) unchanged."""
    score = pool.probs.max(1)
    weight = np.where(score < np.median(score), 4.0, 1.0)
    keep = rng.choice(len(score), size=min(n, len(score)), replace=False, p=weight / weight.sum())
    keep.sort()
    return Backfill(pool.name, pool.probs[keep], pool.truth[keep], pool.labels)


def concept_shift(rng: np.random.Generator, b: Backfill, share: float = 0.15) -> Backfill:
    """The same texts and predictions, a share of the labels moved to another label: P(label | text) changed."""
    truth = b.truth.copy()
    moved = rng.random(len(truth)) < share
    k = len(b.labels)
    truth[moved] = (truth[moved] + rng.integers(1, k, size=int(moved.sum()))) % k
    return Backfill(b.name, b.probs, truth, b.labels)


def write_run(root: Path, name: str, b: Backfill) -> RunFolder:
    """A run folder of a labelled single-label run (predictions.parquet, staged input with its labels)."""
    run = root / name
    (run / "work").mkdir(parents=True)
    n = len(b.truth)
    predicted = b.probs.argmax(1)
    pq.write_table(
        pa.table({
            "row_index": pa.array(range(n), pa.int64()), "id": pa.array(range(n), pa.int64()),
            "predicted_id": pa.array(predicted, pa.int64()), "predicted_label": pa.array([b.labels[i] for i in predicted]),
            "score": pa.array(b.probs.max(1)), "probabilities": pa.array(b.probs.tolist(), pa.list_(pa.float64())),
        }),
        run / "predictions.parquet",
    )  # fmt: skip
    truth = [b.labels[t] if t >= 0 else "unknown" for t in b.truth]
    staged = {"row_index": pa.array(range(n), pa.int64()), "id": pa.array(range(n), pa.int64()), "text": [f"t{i}" for i in range(n)]}
    pq.write_table(pa.table(staged | {"label": pa.array(truth)}), run / "work" / "input.parquet")
    (run / "plan.json").write_text(json.dumps({"files": [], "labels": b.labels}))
    return RunFolder.from_uri(str(run))


def manifest(n: int, label_type: str = "string") -> StagedManifest:
    return StagedManifest(
        files=[], total_rows=n, has_label=True, label_type=label_type, id_type="int64", has_text_pair=False,
        null_text_rows=0, slice_columns=[], staging_key="",
    )  # fmt: skip


def reference_records(root: Path, name: str, b: Backfill) -> RecordedMetrics:
    """The reference run's metrics.json, as evaluate_run records it (its calibration bins)."""
    run = write_run(root, name, b)
    document = evaluate_run(run, b.labels, manifest(len(b.truth)))
    return RecordedMetrics.parse(document.as_dict()) or RecordedMetrics()


class Prepared:
    """One backfill against one reference: every row's f and Y per target, and the library's pieces."""

    def __init__(self, root: Path, name: str, b: Backfill, reference: RecordedMetrics):
        run = write_run(root, name, b)
        import logging

        from scorekeeper.evaluation.base import Coverage
        from scorekeeper.evaluation.driver import open_evaluation

        self.con = open_evaluation(run, b.labels)
        ev = Evaluation(self.con, run, b.labels, manifest(len(b.truth)), [], 0.5, "label", logging.getLogger("bench"))
        source, column = SINGLE.truth_table(ev)
        missing, unmatched, scored = self.con.execute(sql("coverage.sql")).fetchone()
        SINGLE.metrics(ev, Coverage(source, column, len(b.truth), int(missing), int(unmatched), int(scored)))
        self.con.execute("CREATE OR REPLACE TEMP TABLE pp_focus AS SELECT * FROM predictions")  # every row's cells
        self.model = SINGLE.label_free(ev, reference)
        self.con.execute("CREATE OR REPLACE TEMP TABLE pp_planned AS SELECT row_index FROM predictions")  # every row's targets
        SINGLE.label_targets(ev)
        self.n = len(b.truth)
        self.v_lf = SINGLE.label_free_variance(ev, reference, self.n)
        cells = self.con.execute(
            "SELECT c.metric, c.term, c.row_index, c.f, t.y FROM pp_cells AS c JOIN pp_targets AS t USING (row_index, metric, term) "
            "ORDER BY c.metric, c.term, c.row_index"
        ).fetchnumpy()
        self.f: dict = {}
        self.y: dict = {}
        keys = list(dict.fromkeys(zip(cells["metric"].tolist(), cells["term"].tolist(), strict=True)))
        for i, key in enumerate(keys):
            block = slice(i * self.n, (i + 1) * self.n)
            self.f[key], self.y[key] = np.asarray(cells["f"][block], float), np.asarray(cells["y"][block], float)
        self.f_all = {k: float(v.sum()) for k, v in self.f.items()}
        self.u = np.array([u for (u,) in self.con.execute("SELECT u FROM pp_label_free ORDER BY row_index").fetchall()])
        self.truth = {
            "accuracy": float(self.y[("accuracy", "")].mean()),
            "macro_f1": labelling.f1_of_totals(
                labelling._f1_parts(self.model.metrics[1], _Cells(self.y)), {k: float(v.sum()) for k, v in self.y.items()}
            )[0],
        }
        self.ev = ev

    def pi(self, budget: int, sampling: str) -> np.ndarray:
        labelling.set_variables(self.con, key="bench", active=sampling == "active", target=min(budget, self.n))
        self.con.execute(sql("plan_design.sql"))
        return np.array([p for (p,) in self.con.execute("SELECT pi FROM pp_design ORDER BY row_index").fetchall()])

    def estimate(self, pi: np.ndarray, planned: np.ndarray) -> dict:
        rows = np.flatnonzero(planned)
        sample = labelling._Sample(pi=pi[rows], y={k: v[rows] for k, v in self.y.items()}, f={k: v[rows] for k, v in self.f.items()})
        out = {spec.name: labelling._estimate(spec, sample, self.f_all, self.n, False) for spec in self.model.metrics}
        bias = labelling._estimate_bias(self.model.metrics[0], sample, self.f_all, self.n, self.v_lf or 0.0)
        return {"metrics": out, "bias": bias, "labelled": len(rows)}


class _Cells:
    """What labelling._f1_parts reads of a sample: its terms per metric."""

    def __init__(self, y: dict):
        self.y = y

    def terms(self, source: str) -> list[str]:
        return [t for (m, t) in self.y if m == source]


def draws(keys: list[str], n: int) -> np.ndarray:
    """U_i per key and row, as the plan reads it."""
    out = np.empty((len(keys), n))
    for j, key in enumerate(keys):
        out[j] = [int.from_bytes(hashlib.sha256(f"{key}:{i}".encode()).digest()[:8], "big") / 2**64 for i in range(n)]
    return out


def wilson_width(p: float, n: int) -> float:
    if n == 0:
        return float("nan")
    denom = 1 + Z**2 / n
    return 2 * Z * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n * n)) / denom


def run_setting(prep: Prepared, u_draws: np.ndarray, budget: int, sampling: str) -> dict:
    pi = prep.pi(budget, sampling)
    cover = {"accuracy": 0, "macro_f1": 0}
    width = {"accuracy": [], "macro_f1": []}
    classical_width = {"accuracy": [], "macro_f1": []}
    classical_cover = {"accuracy": 0, "macro_f1": 0}
    fired = 0
    sizes = []
    for row in u_draws:
        got = prep.estimate(pi, row < pi)
        sizes.append(got["labelled"])
        for name in cover:
            m = got["metrics"][name]
            truth = prep.truth[name]
            cover[name] += int(m.ci is not None and m.ci[0] <= truth <= m.ci[1])
            classical_cover[name] += int(m.classical_ci is not None and m.classical_ci[0] <= truth <= m.classical_ci[1])
            width[name].append(m.ci[1] - m.ci[0] if m.ci else float("nan"))
            classical_width[name].append(m.classical_ci[1] - m.classical_ci[0] if m.classical_ci else float("nan"))
        fired += int(got["bias"].p is not None and got["bias"].p < 0.05)
    plans = len(u_draws)
    acc = prep.truth["accuracy"]
    wilson = float(np.mean([wilson_width(acc, s) for s in sizes]))
    return {
        "budget": budget, "sampling": sampling, "plans": plans, "rows": prep.n, "mean_labelled": float(np.mean(sizes)),
        "coverage_accuracy": cover["accuracy"] / plans, "coverage_macro_f1": cover["macro_f1"] / plans,
        "classical_coverage_accuracy": classical_cover["accuracy"] / plans,
        "width_accuracy": float(np.nanmean(width["accuracy"])), "width_macro_f1": float(np.nanmean(width["macro_f1"])),
        "classical_width_accuracy": float(np.nanmean(classical_width["accuracy"])),
        "classical_width_macro_f1": float(np.nanmean(classical_width["macro_f1"])),
        "wilson_width_accuracy": wilson,
        "ratio_to_wilson": float(np.nanmean(width["accuracy"])) / wilson,
        "predicted_ratio": float(prep.u.mean() / math.sqrt(acc * (1 - acc))),
        "estimate_bias_fired": fired / plans,
        "true_accuracy": acc, "true_macro_f1": prep.truth["macro_f1"],
        "label_free_accuracy": prep.f_all[("accuracy", "")] / prep.n,
    }  # fmt: skip


def demo_backfill(folder: Path, data: Path) -> Backfill:
    """runs/demo-2's predictions with the held-out reviews' labels (joined on review_id)."""
    table = pq.read_table(folder / "predictions.parquet").to_pydict()
    labels = json.loads((folder / "report" / "metrics.json").read_text())["labels"]
    with open(data, newline="") as f:
        truth_of = {r["review_id"]: r["label"] for r in csv.DictReader(f)}
    truth = np.array([labels.index(truth_of[i]) if truth_of[i] in labels else -1 for i in table["id"]])
    return Backfill("demo", np.array(table["probabilities"]), truth, labels)


def subset(b: Backfill, rows: np.ndarray, name: str) -> Backfill:
    return Backfill(name, b.probs[rows], b.truth[rows], b.labels)


def timing(n: int, budget: int = 1000, repeats: int = 3, work: Path | None = None, head: str = "single_label") -> dict:
    """The evaluate step at n rows against a labelled reference of n rows (bench/drift.py's calibrated
    runs; `head` single_label, multi_label or regression), without a plan, drawing a plan of `budget`
    rows and estimating from it (the run is labelled), and estimating from the pinned plan (the
    labels-back rerun). Each evaluation runs in a fresh process, as the flow's evaluate step does
    (`_evaluate_once`), interleaved `repeats` times: its wall, its CPU time (user + system, DuckDB's
    threads included: less at the mercy of a shared machine than the wall) and its peak RSS
    (ru_maxrss). The figures are the medians."""
    import statistics
    import subprocess

    with tempfile.TemporaryDirectory(prefix="scorekeeper-labelling-timing-", dir=work) as tmp:
        root = Path(tmp)
        current = timing_runs(root, n, head)
        figures: dict[str, dict[str, list[float]]] = {
            k: {"wall": [], "cpu": [], "rss_mib": [], "plan_cpu": []} for k in ("without", "with", "pinned")
        }
        for _ in range(repeats):
            for mode in figures:
                if mode == "pinned":
                    pin_plan(current)
                command = [sys.executable, __file__, "--head", head, "--evaluate-once", str(root), mode, str(n), str(budget)]
                done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
                if done.returncode != 0:
                    raise RuntimeError(f"evaluation {mode} failed: {done.stderr[-2000:]}")
                once = json.loads(done.stdout.strip().splitlines()[-1])
                for key in ("wall", "cpu", "rss_mib", "plan_cpu"):
                    figures[mode][key].append(once[key])
    med = {mode: {k: statistics.median(v) for k, v in f.items()} for mode, f in figures.items()}
    out = {"head": head, "rows": n, "budget": budget, "repeats": repeats, "median": med, "runs": figures}
    for mode in ("with", "pinned"):
        for key in ("wall", "cpu"):
            out[f"extra_{key}_{mode}"] = med[mode][key] / med["without"][key] - 1
    print(f"{head}: evaluate at {n:,} rows with drift_reference, each in a fresh process, medians of {repeats} interleaved runs:")
    for mode, label in (("without", "without a plan"), ("with", f"drawing a plan of {budget} rows and estimating"),
                        ("pinned", "estimating from the pinned plan (labels back)")):  # fmt: skip
        m = med[mode]
        extra = "" if mode == "without" else f" (wall {out[f'extra_wall_{mode}']:+.1%}, CPU {out[f'extra_cpu_{mode}']:+.1%})"
        own = "" if mode == "without" else f"; the plan's step {m['plan_cpu']:.2f} CPU s ({m['plan_cpu'] / med['without']['cpu']:+.1%})"
        print(f"  {label}: wall {m['wall']:.1f} s, CPU {m['cpu']:.1f} s, peak RSS {m['rss_mib']:.0f} MiB{extra}{own}")
        print(
            f"    walls {', '.join(f'{w:.1f}' for w in figures[mode]['wall'])}; CPU {', '.join(f'{c:.1f}' for c in figures[mode]['cpu'])}"
        )
    return out


def timing_runs(root: Path, n: int, head: str = "single_label") -> Path:
    """root/reference (evaluated: its calibration or residual bins recorded) and root/current, two
    labelled runs of n rows of the head kind; returns root/current. `--prepare` makes them once for
    `--evaluate-once`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import drift as drift_bench  # bench/drift.py: calibrated labelled runs of n rows

    rng = np.random.default_rng(6)
    make = {"single_label": drift_bench.labelled_run, "multi_label": drift_bench.labelled_multi_run, "regression": regression_run}[head]
    reference = make(root, "reference", rng, n)
    from scorekeeper.report.publish import publish_complete

    labels, label_type = _head_labels(head)
    document = evaluate_run(RunFolder.from_uri(str(reference)), labels, manifest(n, label_type), EvaluationSettings(head=head))
    publish_complete(RunFolder.from_uri(str(reference)), {"metrics.json": document.to_json_bytes()}, "2026-12-01T00:00:00+00:00")
    return make(root, "current", rng, n)


def regression_run(root: Path, name: str, rng: np.random.Generator, n: int) -> Path:
    """A labelled regression run folder of n rows, one output (`stars`): truth N(3, 1), the prediction
    the truth plus noise whose spread grows with the prediction (so the residual bins differ)."""
    truth = rng.normal(3.0, 1.0, size=n)
    prediction = truth + rng.normal(0, 1, size=n) * (0.3 + 0.1 * np.abs(truth))
    run = root / name
    (run / "work").mkdir(parents=True)
    pq.write_table(
        pa.table({"row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
                  "prediction": pa.array(prediction, pa.float64())}),
        run / "predictions.parquet",
    )  # fmt: skip
    pq.write_table(
        pa.table({"row_index": pa.array(np.arange(n), pa.int64()), "id": pa.array(np.arange(n), pa.int64()),
                  "text": pa.array(["x"] * n), "label": pa.array(truth, pa.float64())}),
        run / "work" / "input.parquet",
    )  # fmt: skip
    (run / "plan.json").write_text(json.dumps({"files": [{"uri": "in", "fingerprint": name}], "labels": REGRESSION_OUTPUTS}))
    (run / "request.json").write_text(json.dumps({"id_column": None}))
    return run


REGRESSION_OUTPUTS = ["stars"]


def pin_plan(current: Path) -> None:
    """The labels-back rerun's state: the plan drawn by a run "with" published as report/label_plan.parquet."""
    if not (current / "report" / labelling.PLAN_FILE).exists():
        (current / "report").mkdir(exist_ok=True)
        (current / "report" / labelling.PLAN_FILE).write_bytes((current / labelling.PLAN_WORK).read_bytes())


def _head_labels(head: str) -> tuple[list[str], str]:
    """The labels (outputs) of the timing runs of a head kind, and their staged label type."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import drift as drift_bench

    return {
        "single_label": (drift_bench.LABELS, "string"),
        "multi_label": (drift_bench.TOPICS, "list<item: string>"),
        "regression": (REGRESSION_OUTPUTS, "double"),
    }[head]


def _evaluate_once(root: Path, mode: str, n: int, budget: int, head: str = "single_label") -> None:
    """One evaluation of root/current against root/reference in this (fresh) process; prints its
    wall, CPU time, peak RSS and the CPU time of the plan's own step (plan_cpu: the driver's call of
    labelling.label_run, its statements, DuckDB's threads and its Python) as JSON."""
    import resource

    from scorekeeper.evaluation import driver
    from scorekeeper.evaluation.labelling import LabelRequest
    from scorekeeper.storage import Location

    plan_cpu = [0.0]
    label_run = driver.label_run

    def timed_label_run(*args, **kwargs):
        began = time.process_time()
        try:
            return label_run(*args, **kwargs)
        finally:
            plan_cpu[0] += time.process_time() - began

    driver.label_run = timed_label_run

    current, reference = root / "current", root / "reference"
    if mode == "pinned":
        pin_plan(current)
    labels, label_type = _head_labels(head)
    recorded = RecordedMetrics.parse(json.loads((reference / "report" / "metrics.json").read_text()))
    request = LabelRequest(
        key="current", budget=budget, sampling="active", reference_name="reference", reference=recorded, pinned=mode == "pinned"
    )
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    evaluate_run(
        RunFolder.from_uri(str(current)),
        labels,
        manifest(n, label_type),
        EvaluationSettings(head=head, drift_reference=Location.from_uri(str(reference)), labelling=None if mode == "without" else request),
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": after.ru_maxrss / 1024, "plan_cpu": plan_cpu[0]}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plans", type=int, default=300)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--budgets", default="100,300,1000")
    parser.add_argument("--demo-run", default="runs/demo-2", help="a completed run of the demo's held-out reviews (setup.sh's)")
    parser.add_argument("--demo-data", default="demo/data/reviews.csv")
    parser.add_argument("--only", default="", help="generated or demo")
    parser.add_argument("--json", default=None)
    parser.add_argument("--timing", type=int, default=0, help="instead: the evaluate step's cost at this many rows (e.g. 3000000)")
    parser.add_argument("--repeats", type=int, default=3, help="with --timing: interleaved runs of each evaluation")
    parser.add_argument("--head", default="single_label", help="with --timing, --prepare, --evaluate-once: the head kind")
    parser.add_argument("--prepare", nargs=2, metavar=("ROOT", "ROWS"), help="write the --timing runs under ROOT (for --evaluate-once)")
    parser.add_argument("--evaluate-once", nargs=4, metavar=("ROOT", "MODE", "ROWS", "BUDGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.evaluate_once:
        root, mode, rows, budget = args.evaluate_once
        _evaluate_once(Path(root), mode, int(rows), int(budget), args.head)
        return 0
    if args.prepare:
        timing_runs(Path(args.prepare[0]), int(args.prepare[1]), args.head)
        return 0
    if args.timing:
        result = timing(args.timing, repeats=args.repeats, head=args.head)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return 0
    budgets = [int(b) for b in args.budgets.split(",")]
    rng = np.random.default_rng(35)
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scorekeeper-labelling-bench-") as tmp:
        root = Path(tmp)
        settings: list[tuple[str, str, Backfill, RecordedMetrics]] = []
        if args.only in ("", "generated"):
            ref = reference_records(root, "gen-ref", generated(rng, args.rows))
            base = generated(rng, args.rows)
            pool = generated(rng, 3 * args.rows)
            settings += [
                ("generated", "none", base, ref),
                ("generated", "covariate", covariate_shift(rng, pool, args.rows), ref),
                ("generated", "concept", concept_shift(rng, base), ref),
            ]
        demo = Path(args.demo_run)
        if args.only in ("", "demo") and (demo / "predictions.parquet").exists():
            full = demo_backfill(demo, Path(args.demo_data))
            n = len(full.truth)
            even, odd = np.arange(0, n, 2), np.arange(1, n, 2)
            ref = reference_records(root, "demo-ref", subset(full, even, "demo"))
            back = subset(full, odd, "demo")
            uncertain = odd[full.probs[odd].max(1) < np.median(full.probs[odd].max(1))]
            shifted = np.sort(np.concatenate([odd, uncertain]))  # the uncertain rows twice: covariate shift by design
            settings += [
                ("demo", "none", back, ref),
                ("demo", "covariate", Backfill("demo", full.probs[shifted], full.truth[shifted], full.labels), ref),
                ("demo", "concept", concept_shift(rng, back), ref),
            ]
        elif args.only in ("", "demo"):
            print(f"no demo run at {demo} (run ./setup.sh, or give --demo-run): demo backfills skipped", file=sys.stderr)
        for i, (source, shift, backfill, ref) in enumerate(settings):
            prep = Prepared(root, f"backfill-{i}", backfill, ref)
            keys = [f"{source}-{shift}-plan-{j}" for j in range(args.plans)]
            u_draws = draws(keys, prep.n)
            for budget in budgets:
                if budget >= prep.n:
                    continue
                for sampling in ("active", "uniform"):
                    result = {"backfill": source, "shift": shift} | run_setting(prep, u_draws, budget, sampling)
                    results.append(result)
                    print(
                        f"{source:9} {shift:9} N={prep.n:5} B={budget:4} {sampling:7} |L|~{result['mean_labelled']:6.1f} "
                        f"cover acc {result['coverage_accuracy']:.3f} f1 {result['coverage_macro_f1']:.3f} "
                        f"(classical acc {result['classical_coverage_accuracy']:.3f}) "
                        f"width acc {result['width_accuracy']:.4f} classical {result['classical_width_accuracy']:.4f} "
                        f"wilson {result['wilson_width_accuracy']:.4f} ratio {result['ratio_to_wilson']:.3f} "
                        f"(predicted {result['predicted_ratio']:.3f}) f1 width {result['width_macro_f1']:.4f} "
                        f"bias fired {result['estimate_bias_fired']:.3f} truth {result['true_accuracy']:.4f} "
                        f"label-free {result['label_free_accuracy']:.4f}",
                        flush=True,
                    )
            prep.con.close()
    print(f"{len(results)} settings x {args.plans} plans in {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How soon a bad input is refused: a duplicate-id input against a 1-row run, both through
`scorekeeper run`, in one run of this script (so both see the same machine load); and the refusals
that need the model's window (head_tokens, chunk_overlap, chunk_aggregate max on a single-label
head), the labelling plan's (a negative label_budget, an unknown label_sampling, a plan over an
input without rows, a rerun under another budget, the labels of another run's plan) and if_empty
fail's (a missing input, an empty folder), each against the 3 s target: exit 2, one line on
stderr, no traceback, nothing written.

    .venv/bin/python bench/early_refusal.py [--repeat 3] [--json OUT]

The model is a tiny BERT classifier built from a config (random weights, saved like a real model:
tests/models.py). Each case runs `--repeat` times, alternating; the figure is the ratio of the
median walls, refusal / 1-row run (the refusal is checked for: exit 2 and the duplicate named).
The target is <= 0.6: the refusal comes from the input check the CLI makes before it starts
Prefect's temporary server or any scoring process (scorekeeper/precheck.py). The other refusals
(the model's config files read up front, precheck_model; the labelling plan's, against a 6-row run
with a plan drawn once by the CLI) each come in under 3 s (median wall).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))


def _timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([SCOREKEEPER, "run", *args], capture_output=True, text=True, timeout=600)
    return time.perf_counter() - start, done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=None)
    options = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.models import build_tiny_classifier

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = build_tiny_classifier(work / "model", "bert", seed=1)
        (work / "one.csv").write_text("review_id,text,label\nr1,the delivery was quick,positive\n")
        (work / "dupes.csv").write_text("review_id,text,label\nr1,good,positive\nr2,bad,negative\nr1,fine,neutral\n")
        common = ["--model-uri", str(model), "--id-column", "review_id", "--num-processes", "1"]
        short = build_tiny_classifier(work / "short", "bert", seed=1, max_position_embeddings=24)  # a 22-token window
        window_cases = {
            "head_tokens_refusal": ["--long-text", "head_tail", "--head-tokens", "22"],
            "chunk_overlap_refusal": ["--long-text", "chunk", "--chunk-overlap", "22"],
            "max_single_label_refusal": ["--long-text", "chunk", "--chunk-aggregate", "max"],
        }
        # a run with a labelling plan (6 rows, 2 of them drawn uniformly), and the labels of rows outside its plan
        rows = [f"r{i},review number {i},{'positive' if i % 2 else 'negative'}" for i in range(6)]
        (work / "six.csv").write_text("review_id,text,label\n" + "\n".join(rows) + "\n")
        runs = ["--output-uri", str(work / "planned"), "--run-name", "night", "--label-column", "none"]
        plan_run = ["--input-uri", str(work / "six.csv"), *common, *runs, "--label-budget", "2", "--label-sampling", "uniform"]
        wall, done = _timed(plan_run)
        assert done.returncode == 0, done.stderr[-2000:]
        import pyarrow.parquet as pq

        planned = set(pq.read_table(work / "planned" / "night" / "report" / "label_plan.parquet").column("id").to_pylist())
        outside = [r for r in rows if r.split(",")[0] not in planned]
        (work / "elsewhere.csv").write_text("review_id,label\n" + "\n".join(f"{r.split(',')[0]},{r.split(',')[2]}" for r in outside) + "\n")
        (work / "empty.csv").write_text("review_id,text\n")
        (work / "empty_folder").mkdir()
        fresh = ["--input-uri", str(work / "one.csv"), *common, "--output-uri", str(work / "fresh")]
        other = ["--label-column", "label", "--ground-truth-uri", str(work / "elsewhere.csv"), "--label-budget", "2"]
        plan_cases = {
            "negative_label_budget": ([*fresh, "--label-budget", "-1"], "--label-budget: Input should be greater than or equal to 0"),
            "unknown_label_sampling": ([*fresh, "--label-budget", "2", "--label-sampling", "most"], "--label-sampling: Input should be"),
            "plan_over_no_rows": ([*fresh[:1], str(work / "empty.csv"), *fresh[2:], "--label-budget", "2"], "no rows in the input"),
            "another_label_budget": ([*plan_run[:-4], "--label-budget", "3"], "drew its labelling plan with label_budget 2"),
            "another_runs_plan": ([*plan_run[:-6], *other, "--label-sampling", "uniform"], "labels of another run's plan"),
            "if_empty_missing_input": ([*fresh[:1], str(work / "missing"), *fresh[2:], "--if-empty", "fail"], "input not found"),
            "if_empty_empty_folder": ([*fresh[:1], str(work / "empty_folder"), *fresh[2:], "--if-empty", "fail"], "holds no files"),
        }
        night = work / "planned" / "night"
        published = {p: p.stat().st_mtime_ns for p in night.rglob("*")}
        walls: dict[str, list[float]] = {"one_row_run": [], "duplicate_refusal": []} | {name: [] for name in [*window_cases, *plan_cases]}
        for k in range(options.repeat):
            wall, done = _timed(["--input-uri", str(work / "one.csv"), "--output-uri", str(work / f"runs{k}"), *common])
            assert done.returncode == 0, done.stderr[-2000:]
            walls["one_row_run"].append(wall)
            wall, done = _timed(["--input-uri", str(work / "dupes.csv"), "--output-uri", str(work / f"bad{k}"), *common])
            assert done.returncode == 2 and "duplicate values: 'r1' x2" in done.stderr, done.stderr[-2000:]
            walls["duplicate_refusal"].append(wall)
            for name, flags in window_cases.items():
                args = ["--input-uri", str(work / "one.csv"), "--model-uri", str(short), "--output-uri", str(work / f"w{k}"), *flags]
                wall, done = _timed(args)
                assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
                walls[name].append(wall)
            for name, (args, message) in plan_cases.items():
                wall, done = _timed(args)
                assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, (name, done.stderr[-2000:])
                assert "Traceback" not in done.stderr and not (work / "fresh").exists(), name
                assert {p: p.stat().st_mtime_ns for p in night.rglob("*")} == published, f"{name} wrote into the planned run"
                walls[name].append(wall)
    medians = {name: statistics.median(values) for name, values in walls.items()}
    ratio = medians["duplicate_refusal"] / medians["one_row_run"]
    print(f"1-row run: median {medians['one_row_run']:.2f} s ({', '.join(f'{w:.2f}' for w in walls['one_row_run'])})")
    print(
        f"duplicate-id refusal: median {medians['duplicate_refusal']:.2f} s ({', '.join(f'{w:.2f}' for w in walls['duplicate_refusal'])})"
    )
    print(f"refusal / 1-row run: {ratio:.3f} (target <= 0.6)")
    for name in window_cases:
        print(f"{name.replace('_', ' ')}: median {medians[name]:.2f} s ({', '.join(f'{w:.2f}' for w in walls[name])}) (target < 3 s)")
    for name in plan_cases:
        print(f"{name.replace('_', ' ')}: median {medians[name]:.2f} s ({', '.join(f'{w:.2f}' for w in walls[name])}) (target < 3 s)")
    window_ok = all(medians[name] < 3.0 for name in [*window_cases, *plan_cases])
    if options.json:
        Path(options.json).write_text(json.dumps({"walls": walls, "medians": medians, "ratio": ratio}, indent=2) + "\n")
    return 0 if ratio <= 0.6 and window_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Where the evaluate step's time goes: every DuckDB statement of a single-label evaluation, timed,
over a completed run folder (bench/scale.py leaves them in <work>/scale-runs/).

    python bench/evaluate_profile.py build/scale/scale-runs/scale-3000000 [--slice-columns category] [--top 25]
                                     [--drift-reference RUN [--repeat 3]]

The evaluation runs as the flow runs it (scorekeeper/evaluation/driver.py, the connection's settings from the
environment: SCOREKEEPER_DUCKDB_MEMORY_LIMIT=4GB shows what spilling costs), with each statement
timed through the connection. The recomputed metrics are checked against the run's metrics.json:
equal but for the last digits of float sums, which vary with DuckDB's threads.

With --drift-reference (a completed run, as the flow's drift_reference names one), the run is evaluated
without and with it, alternated --repeat times, and what drift and estimates add to the evaluation is
the ratio of the fastest of each (the statements shown are the fastest run with the reference's).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scorekeeper.evaluation import driver as evaluation  # noqa: E402
from scorekeeper.evaluation import duck  # noqa: E402
from scorekeeper.evaluation.settings import EvaluationSettings  # noqa: E402
from scorekeeper.run_folder import RunFolder  # noqa: E402
from scorekeeper.storage import Location  # noqa: E402

# what the flow adds after the evaluation (tasks/evaluation.py, flows/score.py), and its clock
NOT_EVALUATED = {"finished_at", "history", "gates", "scoring", "precision"}


class TimedConnection:
    """A DuckDB connection whose execute() adds its seconds to `times`, keyed by the statement's first words."""

    def __init__(self, con, times: dict[str, float]):
        self._con, self._times = con, times

    def __getattr__(self, name):
        return getattr(self._con, name)

    def execute(self, query: str, *args, **kwargs):
        began = time.perf_counter()
        result = self._con.execute(query, *args, **kwargs)
        key = getattr(query, "name", None) or " ".join(query.split())[:100]
        self._times[key] = self._times.get(key, 0.0) + time.perf_counter() - began
        return result


def differences(new, old, path: str = "") -> list[str]:
    """Where two metrics documents differ by more than float summation order (1e-12 relative)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return [d for key in sorted(set(new) | set(old), key=str) for d in differences(new.get(key), old.get(key), f"{path}.{key}")]
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [d for i, (a, b) in enumerate(zip(new, old)) for d in differences(a, b, f"{path}[{i}]")]
    if isinstance(new, float) and isinstance(old, float):
        return [] if math.isclose(new, old, rel_tol=1e-12, abs_tol=1e-12) else [f"{path}: {new!r} != {old!r}"]
    return [] if new == old else [f"{path}: {str(new)[:60]} != {str(old)[:60]}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a completed single-label run folder")
    ap.add_argument("--slice-columns", nargs="*", default=None, help="default: the run's own (request.json)")
    ap.add_argument("--top", type=int, default=25, help="statements shown, slowest first")
    ap.add_argument("--drift-reference", type=Path, default=None, help="a completed run: time the evaluation with and without it")
    ap.add_argument("--repeat", type=int, default=3, help="with --drift-reference: alternated evaluations of each")
    args = ap.parse_args(argv)
    folder = args.run.resolve()
    run = RunFolder.under(str(folder.parent), folder.name)
    manifest = run.read_manifest()
    stored = json.loads((folder / RunFolder.METRICS).read_text())
    if manifest is None or stored.get("head", "single_label") != "single_label":
        raise SystemExit(f"{folder}: not a completed single-label run")
    request = json.loads((folder / RunFolder.REQUEST).read_text())
    slices = request.get("slice_columns", []) if args.slice_columns is None else args.slice_columns
    reference = Location.from_uri(str(args.drift_reference.resolve())) if args.drift_reference else None

    def timed(drift_reference: Location | None):
        times: dict[str, float] = {}
        connect_run = evaluation.connect_run
        evaluation.connect_run = lambda run: TimedConnection(connect_run(run), times)
        try:
            began = time.perf_counter()
            document = evaluation.evaluate_run(
                run,
                stored["labels"],
                manifest,
                EvaluationSettings(
                    slice_columns=slices, truth_column=request.get("label_column") or "label", drift_reference=drift_reference
                ),
            )
            return time.perf_counter() - began, times, document
        finally:
            evaluation.connect_run = connect_run

    runs = {"without": [], "with": []}
    for _ in range(args.repeat if reference else 1):
        runs["without"].append(timed(None))
        if reference:
            runs["with"].append(timed(reference))
    total, times, document = min(runs["with"] or runs["without"], key=lambda r: r[0])
    for key, seconds in sorted(times.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{seconds:8.2f}  {key}")
    print(
        f"evaluate {total:.2f} s ({sum(times.values()):.2f} in statements), peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, DuckDB {duck.settings()['memory_limit']}"
    )
    if reference:
        without = min(r[0] for r in runs["without"])
        print(
            f"without drift_reference {without:.2f} s, with it {total:.2f} s: +{100 * (total - without) / without:.1f}% "
            f"(fastest of {args.repeat} alternated each: without {[round(r[0], 2) for r in runs['without']]}, "
            f"with {[round(r[0], 2) for r in runs['with']]})"
        )
        if "drift" not in stored:
            document.drift = document.estimated = None  # the run was scored without one: compare the rest
    new = {k: v for k, v in json.loads(document.model_dump_json()).items() if k not in NOT_EVALUATED}
    old = {k: v for k, v in stored.items() if k not in NOT_EVALUATED}
    wrong = differences(new, old)
    print("metrics: the same as the run's metrics.json" if not wrong else "metrics differ:\n  " + "\n  ".join(wrong[:20]))
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How soon a bad input is refused: a duplicate-id input against a 1-row run, both through
`scorekeeper run`, in one run of this script (so both see the same machine load).

    .venv/bin/python bench/early_refusal.py [--repeat 3] [--json OUT]

The model is a tiny BERT classifier built from a config (random weights, saved like a real model:
tests/models.py). Each case runs `--repeat` times, alternating; the figure is the ratio of the
median walls, refusal / 1-row run (the refusal is checked for: exit 2 and the duplicate named).
The target is <= 0.6: the refusal comes from the input check the CLI makes before it starts
Prefect's temporary server or any scoring process (scorekeeper/precheck.py).
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
        walls: dict[str, list[float]] = {"one_row_run": [], "duplicate_refusal": []}
        for k in range(options.repeat):
            wall, done = _timed(["--input-uri", str(work / "one.csv"), "--output-uri", str(work / f"runs{k}"), *common])
            assert done.returncode == 0, done.stderr[-2000:]
            walls["one_row_run"].append(wall)
            wall, done = _timed(["--input-uri", str(work / "dupes.csv"), "--output-uri", str(work / f"bad{k}"), *common])
            assert done.returncode == 2 and "duplicate values: 'r1' x2" in done.stderr, done.stderr[-2000:]
            walls["duplicate_refusal"].append(wall)
    medians = {name: statistics.median(values) for name, values in walls.items()}
    ratio = medians["duplicate_refusal"] / medians["one_row_run"]
    print(f"1-row run: median {medians['one_row_run']:.2f} s ({', '.join(f'{w:.2f}' for w in walls['one_row_run'])})")
    print(
        f"duplicate-id refusal: median {medians['duplicate_refusal']:.2f} s ({', '.join(f'{w:.2f}' for w in walls['duplicate_refusal'])})"
    )
    print(f"refusal / 1-row run: {ratio:.3f} (target <= 0.6)")
    if options.json:
        Path(options.json).write_text(json.dumps({"walls": walls, "medians": medians, "ratio": ratio}, indent=2) + "\n")
    return 0 if ratio <= 0.6 else 1


if __name__ == "__main__":
    sys.exit(main())

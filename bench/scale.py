"""Scale mode: how the parent flow process grows with the rows it handles.

    python bench/scale.py [--rows 1000000,3000000,10000000] [--work DIR] [--json OUT]
                          [--cli-args "--num-processes 1"] [--seed 7]

For each row count it builds an input of short labelled texts (cached in --work), runs
`scorekeeper run` on it in a subprocess with the bench's small BERT, and reports:
- each step's wall time, from the flow's own log lines (a task's window runs from the end of the
  step before it to its "Finished in state" line);
- each process's peak memory (RSS), sampled every 0.2 s over the whole process tree: the flow
  process (the parent: read, plan, gather, evaluate and report run there), Prefect's temporary
  server, and the scoring processes, plus the flow process's peak inside each step's window and
  its RSS at the step's end (what the step left resident for the next one).

Texts are short on purpose (4-12 words, --max-length 32) and the model is the smallest BERT that
is still one (bert-1x32: 1 layer, hidden 32, bench/models.py): what is measured is everything
around the model, which does not depend on its size, and scoring 10M rows of long texts with a
real model on CPU would take a day. Expect about 7,000-10,000 rows/s of scoring on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import corpus  # noqa: E402
import models  # noqa: E402

MODEL = "bert-1x32"
CHUNK = 200_000
FINISHED = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+\s*\| Task run '(.+?)(?:-[0-9a-f]{3,})?' - Finished in state (\w+)")
BEGAN = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+\s*\| Flow run '.+?' - Beginning flow run")


def build_input(path: Path, rows: int, seed: int = 7) -> Path:
    """`rows` short texts with ids, labels and a slice column, written in row groups as it goes."""
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    words, freqs = corpus.word_list()
    words = np.asarray(words)
    p = np.asarray(freqs, dtype=np.float64) / np.sum(freqs)
    rng = np.random.default_rng(seed)
    labels = np.asarray(corpus.LABELS)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(
        tmp, pa.schema([("id", pa.string()), ("text", pa.string()), ("label", pa.string()), ("category", pa.string())])
    ) as w:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            lengths = rng.integers(4, 13, n)
            picks = words[rng.choice(len(words), size=int(lengths.sum()), p=p)]
            texts = [" ".join(x) for x in np.split(picks, np.cumsum(lengths)[:-1])]
            table = pa.table(
                {
                    "id": [f"r{i:09d}" for i in range(start, start + n)],
                    "text": texts,
                    "label": labels[rng.integers(0, len(labels), n)],
                    "category": np.asarray(["a", "b", "c", "d"])[rng.integers(0, 4, n)],
                }
            )
            w.write_table(table, row_group_size=100_000)
    tmp.rename(path)
    return path


def _kind(proc: psutil.Process, root: int) -> str:
    if proc.pid == root:
        return "flow"
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    if "scorekeeper.worker" in cmd or "accelerate" in cmd:
        return "scoring"
    if "uvicorn" in cmd or "prefect" in cmd or "api_server" in cmd:
        return "server"
    return "other"


class Sampler(threading.Thread):
    """RSS of every process in the tree under `pid`, by kind, every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.interval, self.samples, self.done = pid, interval, [], threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.done.is_set():
            sample = {"t": time.time(), "flow": 0, "server": 0, "scoring": 0, "other": 0}
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for proc in procs:
                try:
                    sample[_kind(proc, self.pid)] += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.samples.append(sample)
            self.done.wait(self.interval)


def _clock(day: datetime, hms: str) -> float:
    return datetime.strptime(f"{day:%Y-%m-%d} {hms}", "%Y-%m-%d %H:%M:%S.%f").timestamp()


def run_once(data: Path, model_dir: Path, out: Path, rows: int, cli_args: list[str]) -> dict:
    run_name = f"scale-{rows}"
    cmd = [str(Path(sys.executable).with_name("scorekeeper")), "run", "--input-uri", str(data), "--model-uri", str(model_dir)]
    cmd += ["--output-uri", str(out), "--run-name", run_name, "--id-column", "id", "--slice-columns", "category"]
    cmd += ["--max-length", "32", *cli_args]
    env = dict(os.environ, PREFECT_LOGGING_LEVEL="INFO", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=out)
    sampler = Sampler(proc.pid)
    sampler.start()
    lines = []
    for line in proc.stdout:
        lines.append((time.time(), line.rstrip("\n")))
    code = proc.wait()
    sampler.done.set()
    sampler.join()
    wall = time.time() - started
    if code != 0:
        tail = "\n".join(text for _, text in lines[-30:])
        raise SystemExit(f"scorekeeper run failed with exit code {code} at {rows} rows:\n{tail}")

    day = datetime.fromtimestamp(started)
    steps, previous = [], None
    for seen, text in lines:
        if m := BEGAN.match(text):
            previous = _clock(day, m.group(1))
        elif (m := FINISHED.match(text)) and previous is not None:
            end = _clock(day, m.group(1))
            window = [s for s in sampler.samples if previous <= s["t"] <= end]
            steps.append(
                {
                    "step": m.group(2),
                    "seconds": round(end - previous, 2),
                    "flow_peak_mb": round(max((s["flow"] for s in window), default=0) / 2**20, 1),
                    "flow_end_mb": round(window[-1]["flow"] / 2**20, 1) if window else 0.0,
                }
            )
            previous = end
    peaks = {k: round(max((s[k] for s in sampler.samples), default=0) / 2**20, 1) for k in ("flow", "server", "scoring")}
    return {"rows": rows, "wall_s": round(wall, 1), "steps": steps, "peak_mb": peaks, "summary": lines[-1][1] if lines else ""}


def print_result(r: dict) -> None:
    print(f"\n{r['rows']:,} rows: {r['wall_s']} s in all; peak RSS (MB): " + ", ".join(f"{k} {v}" for k, v in r["peak_mb"].items()))
    print(f"  {'step':<22} {'seconds':>9} {'share':>7} {'flow peak MB':>13} {'flow at end MB':>15}")
    total = sum(s["seconds"] for s in r["steps"]) or 1.0
    for s in r["steps"]:
        print(f"  {s['step']:<22} {s['seconds']:>9.2f} {s['seconds'] / total:>7.1%} {s['flow_peak_mb']:>13.1f} {s['flow_end_mb']:>15.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1000000,3000000,10000000", help="comma-separated row counts")
    ap.add_argument("--work", default=str(BENCH / ".work"), help="cache for inputs, the model and runs")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--cli-args", default="", help="extra arguments for `scorekeeper run`, one shell string")
    ap.add_argument("--seed", type=int, default=7, help="the input's sample (another seed: new rows of the same generator)")
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    model_dir = models.build_model(MODEL, work / "models" / MODEL, corpus.train_tokenizer(work / "tokenizer.json"))
    results = []
    for rows in [int(x.replace("_", "")) for x in args.rows.split(",") if x]:
        data = build_input(work / (f"scale-{rows}.parquet" if args.seed == 7 else f"scale-{rows}-seed{args.seed}.parquet"), rows, args.seed)
        out = work / "scale-runs"
        out.mkdir(exist_ok=True)
        subprocess.run(["rm", "-rf", str(out / f"scale-{rows}")], check=True)
        result = run_once(data, model_dir, out, rows, shlex.split(args.cli_args))
        print_result(result)
        results.append(result)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Side-by-side throughput benchmark: the notebook loop, a plain sorted loop and scorekeeper.

    python bench/run.py [--rows 20000] [--device cpu|cuda] [--model NAME[,NAME]] [--work DIR]
                        [--methods a,b,c,d] [--json OUT] [--baseline-rows N] [--memory-check]

Builds (cached in --work) the corpus and the model, then runs each method in a fresh
subprocess, one after the other, so each one pays its own start-up and its peak memory is its
own (os.wait4 gives the child's rusage; psutil, when present, samples the whole process tree).

    a  notebook loop (bench/baselines.py)        c  scorekeeper's scoring step alone (plug point)
    b  plain length-sorted loop (baselines.py)   d  scorekeeper end to end through its CLI
    e  dense-shape ceiling (CUDA; baselines.py)

Why subprocesses and not functions: start-up, imports and memory are part of what is measured,
and one method's allocator state must not flatter or penalise the next.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import corpus  # noqa: E402
import models  # noqa: E402

NAMES = {"a": "notebook loop", "b": "sorted loop", "c": "scorekeeper step", "d": "scorekeeper CLI", "e": "dense ceiling"}
# --- plug points: scorekeeper's side ---------------------------------------------------------
# (c): same arguments and JSON as baselines.py; the variable lets a stand-in be tried.
STEP_SCRIPT = os.environ.get("BENCH_STEP_SCRIPT", str(BENCH / "step.py"))


def child_env() -> dict:
    """Children see the repo on PYTHONPATH, so scorekeeper runs from the checkout uninstalled."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def module_available(module: str) -> bool:
    """Whether `python -m module` would find it (asked in a child: importing it here would
    load torch into the parent)."""
    code = f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    try:
        return subprocess.run([sys.executable, "-c", code], env=child_env(), cwd=REPO, capture_output=True, timeout=120).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


def step_command(model_dir, input_path, json_out, probs_out, device, tokens_per_batch) -> list[str] | None:
    """(c) The scoring step alone. None while the script does not exist."""
    if not Path(STEP_SCRIPT).is_file():
        return None
    cmd = [
        sys.executable,
        STEP_SCRIPT,
        "--model",
        str(model_dir),
        "--input",
        str(input_path),
        "--json",
        str(json_out),
        "--device",
        device,
    ]
    if probs_out:
        cmd += ["--probs", str(probs_out)]
    if tokens_per_batch:
        cmd += ["--tokens-per-batch", str(tokens_per_batch)]
    return cmd


def cli_command() -> list[str] | None:
    """(d) How to start `scorekeeper`: the installed script, else the checkout's cli.main."""
    exe = shutil.which("scorekeeper", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe:
        return [exe]
    if module_available("scorekeeper.cli"):
        return [sys.executable, "-c", "import sys; from scorekeeper.cli import main; sys.exit(main())"]
    return None


def cli_probs(out_dir: Path, npz: Path) -> bool:
    """(d) Probabilities from the run's predictions.parquet (row_index, probabilities), as .npz."""
    import pyarrow.parquet as pq

    found = sorted(Path(out_dir).glob("**/predictions.parquet"))
    if not found:
        return False
    t = pq.read_table(found[0])
    if not {"row_index", "probabilities"} <= set(t.column_names):
        return False
    np.savez(npz, index=t.column("row_index").to_numpy(), probs=np.asarray(t.column("probabilities").to_pylist(), dtype=np.float32))
    return True


# ---------------------------------------------------------------------------------------------


def run_child(cmd: list[str], log_path: Path, timeout: float) -> dict:
    """Run `cmd` in its own session; return rc, wall, the child's maxrss and the tree's peak RSS."""
    try:
        import psutil
    except ImportError:
        psutil = None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    busy0, self0 = _busy_cpu_s(), _self_cpu_s()
    with open(log_path, "w") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=child_env(), start_new_session=True)
        peak, stop = [0], threading.Event()

        def sample():  # sum of RSS over the child and its descendants, every 0.2 s
            while not stop.wait(0.2):
                if time.perf_counter() - t0 > timeout:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)  # our own child's process group only
                    except ProcessLookupError:
                        pass
                if psutil is None:
                    continue
                try:
                    root = psutil.Process(proc.pid)
                    procs = [root] + root.children(recursive=True)
                    peak[0] = max(peak[0], sum(p.memory_info().rss for p in procs))
                except (psutil.Error, OSError):
                    pass

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        stop.set()
        watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    child_cpu = usage.ru_utime + usage.ru_stime
    other = None
    if busy0 is not None:  # CPU time the machine spent on anything but this child and us
        other = max(0.0, (_busy_cpu_s() - busy0 - child_cpu - (_self_cpu_s() - self0)) / wall)
    return dict(
        rc=proc.returncode,
        proc_s=wall,
        maxrss_mb=usage.ru_maxrss / 1024,
        tree_peak_mb=peak[0] / 2**20 if peak[0] else None,
        child_cpu_s=child_cpu,
        other_cores=other,
        last_line=tail[0][-200:],
        log=str(log_path),
    )


def _busy_cpu_s() -> float | None:
    """Seconds of CPU the whole machine has been busy (all cores), from /proc/stat via psutil."""
    try:
        import psutil
    except ImportError:
        return None
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _self_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def prepare(work: Path, rows: int, model: str) -> tuple[Path, dict, Path]:
    """Corpus and model, built once per work dir (tokenizer first: both depend on it)."""
    tok = corpus.train_tokenizer(work / "tokenizer.json")
    data = work / f"corpus-{rows}.parquet"
    if rows > 100_000:  # big inputs are a cheap repeat of the 20,000-row corpus
        meta = corpus.make_corpus(work / "corpus-20000.parquet", 20_000, tok)
        meta = corpus.repeat_corpus(work / "corpus-20000.parquet", data, rows)
    else:
        meta = corpus.make_corpus(data, rows, tok)
    return data, meta, models.build_model(model, work / "models" / model, tok)


def run_method(m: str, args, work: Path, data: Path, meta: dict, model_dir: Path, model: str, probs: bool = True) -> dict:
    """One method in one subprocess; returns its result row (status 'ok', 'n/a' or 'failed')."""
    tag = f"{model}-{meta['rows']}-{m}" + (f"-p{args.num_processes}" if m == "d" and args.num_processes != 1 else "")
    out_json, out_probs = work / "results" / f"{tag}.json", work / "results" / f"{tag}.npz"
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.unlink(missing_ok=True)
    row = dict(method=m, name=NAMES[m], model=model, input_rows=meta["rows"])
    if m in "abe":
        cmd = [
            sys.executable,
            str(BENCH / "baselines.py"),
            m,
            "--model",
            str(model_dir),
            "--input",
            str(data),
            "--json",
            str(out_json),
            "--device",
            args.device,
        ]
        cmd += ["--probs", str(out_probs)] if probs else []
        if m == "a" and args.baseline_rows and args.baseline_rows < meta["rows"]:
            cmd += ["--sample", str(args.baseline_rows)]
        if m == "b" and args.tokens_per_batch:
            cmd += ["--tokens-per-batch", str(args.tokens_per_batch)]
    elif m == "c":
        cmd = step_command(model_dir, data, out_json, out_probs if probs else None, args.device, args.tokens_per_batch)
        cmd = cmd and cmd + shlex.split(args.step_args)
    else:
        cmd = cli_command()
        out_dir = work / "runs" / tag
        shutil.rmtree(out_dir, ignore_errors=True)  # a leftover run would be resumed, not re-run
        if cmd:
            cmd += [
                "run",
                "--input-uri",
                str(data),
                "--model-uri",
                str(model_dir),
                "--output-uri",
                str(out_dir),
                "--num-processes",
                str(args.num_processes),
            ]
            cmd += ["--tokens-per-batch", str(args.tokens_per_batch)] if args.tokens_per_batch else []
            cmd += shlex.split(args.cli_args)
    if cmd is None:
        return dict(row, status="n/a", note="not available yet")
    print(f"  {m} ({NAMES[m]}) ...", flush=True)
    proc = run_child(cmd, work / "logs" / f"{tag}.log", args.timeout)
    row.update(proc)
    if proc["rc"] != 0:
        return dict(row, status="failed", note=f"rc={proc['rc']}: {proc['last_line']} (see {proc['log']})")
    if m == "d":  # timed from outside: start-up included; token counts from the corpus
        row.update(
            rows=meta["rows"],
            useful_tokens=meta["useful_tokens"],
            padded_tokens=None,
            wall_s=proc["proc_s"],
            first_batch_s=None,
            status="ok",
        )
        if probs and cli_probs(out_dir, out_probs):
            row["probs_path"] = str(out_probs)
        return row
    row.update(json.loads(out_json.read_text()), status="ok")
    return row


def add_rates(results: list[dict]) -> None:
    """rows/s, useful tokens/s, padding efficiency, and each ratio to (a) and (b).

    Ratios are of rows/s (per-row throughput), so a sampled (a) compares fairly; the dense
    ceiling (e) has no rows, so its ratios are of useful tokens/s.
    """
    for r in results:
        if r.get("status") == "ok":
            r["rows_per_s"] = r["rows"] / r["wall_s"]
            r["tokens_per_s"] = r["useful_tokens"] / r["wall_s"]
            r["padding_eff"] = r["useful_tokens"] / r["padded_tokens"] if r.get("padded_tokens") else None
    ok = {r["method"]: r for r in results if r.get("status") == "ok"}
    for r in ok.values():
        for ref in "ab":
            if ref in ok:
                key = "tokens_per_s" if "e" in (r["method"], ref) else "rows_per_s"
                r[f"vs_{ref}"] = r[key] / ok[ref][key]
    if "e" in ok:
        for r in ok.values():
            r["vs_e_tokens"] = r["tokens_per_s"] / ok["e"]["tokens_per_s"]


def cross_check(results: list[dict]) -> None:
    """Max |p - p_b| per method, on the rows both scored (a may be a sample; e is not rows)."""
    ok = {r["method"]: r for r in results if r.get("status") == "ok" and r.get("probs_path")}
    if "b" not in ok:
        return
    ref = np.load(ok["b"]["probs_path"])
    ref_probs = np.empty_like(ref["probs"])
    ref_probs[ref["index"]] = ref["probs"]
    for m, r in ok.items():
        if m in "be":
            continue  # e scores dense chunks, not rows
        got = np.load(r["probs_path"])
        idx = got["index"] if "index" in got.files else np.arange(len(got["probs"]))
        r["max_abs_diff_vs_b"] = float(np.abs(got["probs"] - ref_probs[idx]).max())


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(model: str, meta: dict, results: list[dict], device: str) -> None:
    print(
        f"\n{model} on {device}: {meta['rows']:,} rows, {meta['useful_tokens']:,} useful tokens "
        f"(median {meta['median_tokens']:.0f}, mean {meta['mean_tokens']:.1f}, max {meta['max_tokens']})"
    )
    head = (
        f"{'method':<22}{'rows/s':>10}{'useful tok/s':>14}{'pad eff':>9}{'1st batch s':>12}"
        f"{'wall s':>9}{'proc s':>9}{'RSS MB':>8}{'tree MB':>9}{'vs a':>8}{'vs b':>8}{'max|dp| vs b':>14}"
        f"{'other cores':>12}"
    )
    print(head + "\n" + "-" * len(head))
    for r in results:
        label = f"{r['method']} {r['name']}"
        if r["status"] != "ok":
            print(f"{label:<22}  {r['status']}: {r['note']}")
            continue
        sampled = r.get("sampled") and f" (sample of {r['rows']:,})"
        rps = "-" if r["method"] == "e" else f"{r['rows_per_s']:.1f}"  # e has chunks, not rows
        print(
            f"{label:<22}{rps:>10}{r['tokens_per_s']:>14,.0f}{fmt(r['padding_eff'], '.3f'):>9}"
            f"{fmt(r['first_batch_s'], '.2f'):>12}{r['wall_s']:>9.1f}{r['proc_s']:>9.1f}{r['maxrss_mb']:>8,.0f}"
            f"{fmt(r.get('tree_peak_mb'), ',.0f'):>9}"
            f"{fmt(r.get('vs_a'), '.2f'):>8}{fmt(r.get('vs_b'), '.2f'):>8}"
            f"{fmt(r.get('max_abs_diff_vs_b'), '.1e'):>14}{fmt(r.get('other_cores'), '.2f'):>12}"
            f"{sampled or ''}"
        )
    for r in results:
        if r.get("sampled"):
            full = meta["rows"] / r["rows_per_s"]
            print(
                f"note: ({r['method']}) ran on an evenly spaced sample of {r['rows']:,} rows; a full run "
                f"would take about {full:,.0f} s. Its ratios are per-row throughput ratios."
            )
        if r["method"] == "e" and r.get("status") == "ok":
            print("note: (e) is the ceiling (one dense shape, no padding); its ratios are of useful tokens/s.")
        if (r.get("other_cores") or 0) > 0.2:
            print(
                f"WARNING: ({r['method']}) shared the CPUs: other processes used {r['other_cores']:.2f} "
                "cores on average while it ran; its figures are pessimistic."
            )
        diff = r.get("max_abs_diff_vs_b")
        if device == "cpu" and diff is not None and diff > 1e-4 and r["method"] in "acd":
            print(f"WARNING: ({r['method']}) disagrees with (b) by {diff:.1e} (> 1e-4 on CPU fp32)")


def memory_check(args, work: Path) -> list[dict]:
    """Peak RSS of the scoring step on --rows and on --memory-rows rows: the ratio must be <= 1.25."""
    out = []
    for model in args.models:
        rows_out = []
        for rows in (args.rows, args.memory_rows):
            data, meta, model_dir = prepare(work, rows, model)
            rows_out.append(run_method(args.memory_method, args, work, data, meta, model_dir, model, probs=False))
        small, big = rows_out
        print(f"\nmemory check, {model}, method {args.memory_method} ({NAMES[args.memory_method]}):")
        for r in rows_out:
            rss = f"{r['maxrss_mb']:,.0f} MB peak RSS, {r['proc_s']:.0f} s" if r["status"] == "ok" else f"{r['status']}: {r['note']}"
            print(f"  {r['input_rows']:>10,} rows: {rss}")
        if small["status"] == big["status"] == "ok":
            ratio = big["maxrss_mb"] / small["maxrss_mb"]
            print(f"  ratio {ratio:.2f} (target <= 1.25): {'PASS' if ratio <= 1.25 else 'FAIL'}")
            big["rss_ratio"] = ratio
        out += rows_out
    return out


def scaling_check(args, work: Path) -> list[dict]:
    """(d) end to end with each process count: rows/s, and rows/s per process against 1 process.

    On a GPU machine a process is a device, and per-process throughput near 1.00 is the goal. On
    CPU one process already uses every core (a batch per core), so P processes share the same
    cores: the total stays about flat and per-process throughput is about 1/P by construction.
    """
    out = []
    for model in args.models:
        data, meta, model_dir = prepare(work, args.rows, model)
        rows_out = []
        for p in args.scaling:
            args.num_processes = p
            r = run_method("d", args, work, data, meta, model_dir, model, probs=False)
            r["processes"] = p
            rows_out.append(r)
        add_rates(rows_out)
        base = next((r for r in rows_out if r["processes"] == 1 and r["status"] == "ok"), None)
        print(f"\nscaling, {model} on {args.device}, {meta['rows']:,} rows, (d) end to end:")
        print(f"{'processes':>10}{'rows/s':>10}{'per process':>13}{'total vs 1':>12}{'per process vs 1':>18}{'proc s':>9}")
        for r in rows_out:
            if r["status"] != "ok":
                print(f"{r['processes']:>10}  {r['status']}: {r['note']}")
                continue
            per = r["rows_per_s"] / r["processes"]
            r["per_process_vs_1"] = per / base["rows_per_s"] if base else None
            print(
                f"{r['processes']:>10}{r['rows_per_s']:>10.1f}{per:>13.1f}"
                f"{fmt(base and r['rows_per_s'] / base['rows_per_s'], '.2f'):>12}"
                f"{fmt(r['per_process_vs_1'], '.2f'):>18}{r['proc_s']:>9.1f}"
            )
        out += rows_out
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000, help="corpus rows (default 20,000)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda[:N])")
    ap.add_argument(
        "--model",
        help="comma-separated; default bert-tiny-bench on cpu, bert-base,qwen2-0.5b-like on cuda. Choices: " + ", ".join(models.SPECS),
    )
    ap.add_argument("--work", default=str(BENCH / ".work"), help="cache for corpus, models, results")
    ap.add_argument("--methods", help="comma-separated subset of a,b,c,d,e; default a,b,c,d (+e on cuda)")
    ap.add_argument("--json", help="write all results (config, corpus, rows) to this file")
    ap.add_argument(
        "--baseline-rows",
        type=int,
        help="run (a) on this many evenly spaced rows and extrapolate per row; 0 = all rows. Default: 1000 on cpu, all on cuda",
    )
    ap.add_argument(
        "--tokens-per-batch",
        type=int,
        help="padded-token budget for (b), (c) and (d); "
        "default 2048 on cpu (as scorekeeper), 65536 on cuda for (b), scorekeeper's own default for (c), (d)",
    )
    ap.add_argument("--num-processes", type=int, default=1, help="(d): scorekeeper run --num-processes")
    ap.add_argument("--step-args", default="", help="extra arguments for (c), one shell string")
    ap.add_argument("--cli-args", default="", help="extra arguments for (d)'s `scorekeeper run`")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per method before it is killed")
    ap.add_argument(
        "--memory-check", action="store_true", help="instead of the table: peak RSS of one method on --rows and --memory-rows rows"
    )
    ap.add_argument("--memory-rows", type=int, default=2_000_000, help="large input for --memory-check")
    ap.add_argument(
        "--scaling",
        help="instead of the table: (d) with each of these process counts "
        "(comma-separated, e.g. 1,2), rows/s per process against 1 process",
    )
    ap.add_argument(
        "--memory-method",
        default="c",
        choices=list("abc"),
        help="method for --memory-check (c; a or b only to test the harness on small inputs)",
    )
    args = ap.parse_args(argv)
    cuda = args.device.startswith("cuda")
    args.models = (args.model or ("bert-base,qwen2-0.5b-like" if cuda else "bert-tiny-bench")).split(",")
    methods = (args.methods or ("a,b,c,d,e" if cuda else "a,b,c,d")).split(",")
    if args.baseline_rows is None:
        args.baseline_rows = 0 if cuda else 1000
    bad = [m for m in methods if m not in NAMES] + [m for m in args.models if m not in models.SPECS]
    if bad:
        ap.error(f"unknown method or model: {', '.join(bad)}")
    work = Path(args.work).resolve()
    t_start = time.perf_counter()

    if args.scaling:
        args.scaling = [int(p) for p in args.scaling.split(",")]
        all_results = scaling_check(args, work)
    elif args.memory_check:
        all_results = memory_check(args, work)
    else:
        all_results = []
        for model in args.models:
            print(f"preparing corpus ({args.rows:,} rows) and {model} in {work} ...", flush=True)
            data, meta, model_dir = prepare(work, args.rows, model)
            results = [run_method(m, args, work, data, meta, model_dir, model) for m in methods]
            add_rates(results)
            cross_check(results)
            print_table(model, meta, results, args.device)
            all_results += [dict(r, corpus=meta) for r in results]
    total = time.perf_counter() - t_start
    print(f"\ntotal {total:,.0f} s")
    if args.json:
        env = dict(
            python=platform.python_version(), cpus=os.cpu_count(), machine=platform.machine(), argv=sys.argv[1:] if argv is None else argv
        )
        Path(args.json).write_text(json.dumps(dict(env=env, total_s=total, results=all_results), indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

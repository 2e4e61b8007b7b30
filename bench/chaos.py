"""A fault campaign: many trials, each killing one random part of a real run at a random moment,
then rerunning it under the same name; every trial's final outputs must equal a clean run's.

    .venv/bin/python bench/chaos.py --trials 100 --seed 1        # the campaign (about 40 min on 2 cores)
    .venv/bin/python bench/chaos.py --seed 1 --only 17            # replay trial 17 of that campaign
    .venv/bin/python bench/chaos.py --trials 3 --json out.json    # a short one, machine-readable

One stack serves every trial: tiny models built from configs (tests/models.py, offline), a real moto
S3 server on loopback behind a forwarding process on the endpoint every client uses (the "S3 server"
a trial kills: moto keeps its objects in memory, so the campaign kills the endpoint's process and
restarts it on the same port, as a restarted MinIO keeps its disk), and one `prefect server start`
with the scoring-group deployment and two process workers on its pool (two "machines" for fan-out).
Every run is `scorekeeper run` (or the flow called in a process of its own) pointed at that server,
so no run pays for a temporary Prefect server.

A trial draws (from `--seed` and its number alone, so `--only N` replays its choices) a
configuration, a part to kill and a moment:

- configurations: `s3` (replica, 2 processes, everything on S3), `local` (pipeline, 2 stages, local
  folders), `fanout` (2 groups on the two machines, 1 process each, long texts scored in chunks, S3);
- parts: the CLI, the flow process (the flow called in a process of its own), a scoring process, a
  fan-out group's worker (the machine: its Prefect worker, the group's flow run and its scoring
  process, all at once), the S3 server (killed for 0.5-6 s, then restarted);
- moments, read from the run's own files: reading (the run's lease taken, no plan yet), scoring
  (the job written, k of the ranges committed), gather (every range committed, no
  predictions.parquet), evaluate (predictions.parquet, no report), publish (report files, no
  complete.json); a random delay is added, and the moment recorded is the one the files show at the
  kill.

Each trial then checks: the faulted run ends by itself (no hang, no process left behind); while it
and the rerun run, whenever complete.json exists every file it vouches for is the file it vouches
for (`run_seal.unverified_reason`: never half-published); the rerun completes (exit 0), scores
exactly the ranges without a usable commit record before it (every other commit record is
untouched: same attempt) and `scoring.rows_scored` says so; predictions.parquet has every row once,
and its rows and metrics.json's metrics equal the clean run's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIGS = ("s3", "local", "fanout")
PARTS = {
    "s3": ("cli", "flow", "scoring", "s3"),
    "local": ("cli", "flow", "scoring"),
    "fanout": ("cli", "flow", "scoring", "group", "s3"),
}
MOMENTS = ("reading", "scoring", "gather", "evaluate", "publish")
# Where a part can die: a scoring process or a group's machine only while scoring.
PART_MOMENTS = {"scoring": ("scoring",), "group": ("scoring",)}
ROWS = {"s3": 48, "local": 36, "fanout": 32}
ROWS_PER_RANGE = 4
GROUP_POOL = "scorekeeper-groups"
FAULTED_TIMEOUT_S = 240  # a faulted run that has not ended by then hangs
RERUN_TIMEOUT_S = 300
ORPHAN_GRACE_S = 30  # a process of a killed run still alive after this is left behind
SCORE_TOLERANCE = 1e-6
# metrics.json keys that say how a run went, not what it found.
VOLATILE = ("scoring", "run_id", "finished_at", "started_at", "history", "timings", "duration", "wall")


# -- the S3 server's endpoint: a process that forwards every connection to moto ----------------------


def relay_main(listen_port: int, upstream_port: int) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(256)
    print("ready", flush=True)

    def copy(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(1 << 16):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def pair(client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", upstream_port))
        except OSError:
            client.close()
            return
        threading.Thread(target=copy, args=(client, upstream), daemon=True).start()
        copy(upstream, client)

    while True:
        client, _ = server.accept()
        threading.Thread(target=pair, args=(client,), daemon=True).start()


class Relay:
    def __init__(self, upstream_port: int, log: Path):
        from scorekeeper.launch.command import free_port

        self.port, self.upstream_port, self.log = free_port(), upstream_port, log
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        for _ in range(100):  # the port may still be held for a moment by the killed one's sockets
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--relay", str(self.port), str(self.upstream_port)],
                stdout=subprocess.PIPE, stderr=open(self.log, "ab"), start_new_session=True,
            )  # fmt: skip
            if self.process.stdout.readline().strip() == b"ready":
                return
            self.process.wait()
            time.sleep(0.1)
        raise RuntimeError(f"the S3 endpoint could not listen on port {self.port} again")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


# -- the stack -------------------------------------------------------------------------------------


def flow_child(parameters_json: str) -> int:
    """The flow called in a process of its own (as a Prefect worker's flow-run process calls it)."""
    from scorekeeper.flows.score import score_dataset

    try:
        score_dataset(**json.loads(parameters_json))
    except BaseException as exc:  # the exit code is what the campaign reads
        print(f"flow failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
        return 3
    return 0


def make_rows(n: int, seed: int, max_words: int) -> list[dict]:
    from tests.helpers import LABELS, WORDS

    rng = random.Random(seed)
    return [
        {
            "review_id": f"r{i:05d}",
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))),
            "label": rng.choice(LABELS),
            "channel": rng.choice(["web", "app"]),
        }
        for i in range(n)
    ]


class Stack:
    """moto behind its endpoint, one Prefect server with the group deployment, two machines."""

    def __init__(self, root: Path, configs: set[str], prefect_api: str | None = None):
        from tests.models import build_tiny_classifier
        from tests.prefect_deployed import PrefectServer
        from tests.s3server import MotoServer

        self.root = root
        started = time.time()
        self.moto = MotoServer(root / "moto.log")
        self.relay = Relay(self.moto.port, root / "relay.log")
        self.bucket = self.moto.create_bucket("chaos")
        model = build_tiny_classifier(root / "model", "bert", seed=1, max_position_embeddings=64)
        self.model_local = str(model)
        self.moto.upload_folder(model, f"s3://{self.bucket}/model")
        self.inputs: dict[str, str] = {}
        for config in CONFIGS:
            rows = make_rows(ROWS[config], seed=CONFIGS.index(config), max_words=120 if config == "fanout" else 30)
            body = "".join(json.dumps(r) + "\n" for r in rows).encode()
            if config == "local":
                path = root / "local" / "in.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(body)
                self.inputs[config] = str(path)
            else:
                self.moto.filesystem().pipe_file(f"{self.bucket}/in/{config}.jsonl", body)
                self.inputs[config] = f"s3://{self.bucket}/in/{config}.jsonl"
        # Services that watch schedules, late or paused runs and workers: nothing here needs them
        # (a lost group is the parent's to find), and each costs the shared cores a little.
        for service in ("late_runs", "foreman", "cancellation_cleanup", "pause_expirations", "triggers", "repossessor", "event_logger", "db_vacuum", "cleanup_reconciler"):  # fmt: skip
            os.environ.setdefault(f"PREFECT_SERVER_SERVICES_{service.upper()}_ENABLED", "false")
        self.prefect = None if prefect_api else PrefectServer(root / "prefect")
        self.api_url = prefect_api or self.prefect.api_url
        self.machines: dict[str, Machine] = {}
        if "fanout" in configs:
            if self.prefect is None:
                raise ValueError(
                    "the fanout configuration deploys the scoring group on a Prefect server of its own: leave --prefect-api out"
                )
            self.prefect.cli("work-pool", "create", GROUP_POOL, "--type", "process")
            self.prefect.cli("--no-prompt", "deploy", "--name", "group", timeout=240)
            self.machines = {name: Machine(self, name) for name in ("machine-a", "machine-b")}
        self.setup_s = time.time() - started

    def environment(self) -> dict[str, str]:
        env = self.moto.environment(dict(os.environ)) | {"AWS_ENDPOINT_URL_S3": self.relay.endpoint}
        return env | {
            "PREFECT_API_URL": self.api_url,
            "PREFECT_HOME": str(self.root / "prefect-client"),
            "PREFECT_UI_URL": "",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_VERBOSITY": "error",
            "TOKENIZERS_PARALLELISM": "false",
        }

    def parameters(self, config: str, output: str) -> dict:
        on_s3 = config != "local"
        params = {
            "input_uri": self.inputs[config],
            "id_column": "review_id",
            "slice_columns": ["channel"],
            "model_uri": f"s3://{self.bucket}/model" if on_s3 else self.model_local,
            "output_uri": f"s3://{self.bucket}/runs/{output}" if on_s3 else str(self.root / "local" / "runs" / output),
            "run_name": "r",
            "rows_per_range": ROWS_PER_RANGE,
            "collective_timeout_s": 20,
        }
        if config == "s3":
            params |= {"num_processes": 2}
        elif config == "local":
            params |= {"num_processes": 2, "mode": "pipeline"}
        else:
            params |= {"num_processes": 1, "fan_out": 2, "long_text": "chunk", "group_stall_timeout_s": 10, "group_retries": 2}
        return params

    def view(self, params: dict) -> RunView:
        uri = params["output_uri"].rstrip("/") + "/" + params["run_name"]
        if uri.startswith("s3://"):
            return RunView(self.moto.filesystem(), uri.removeprefix("s3://"))  # moto itself: seen while its endpoint is down
        import fsspec

        return RunView(fsspec.filesystem("file"), uri)

    def ensure_machines(self) -> None:
        for machine in self.machines.values():
            if not machine.alive():
                machine.start()

    def stop(self) -> None:
        for machine in self.machines.values():
            machine.stop()
        if self.prefect is not None:
            self.prefect.stop()
        self.relay.kill()
        self.moto.stop()


class Machine:
    """`prefect worker start` on the groups pool, from a folder of its own (tests/test_fan_out.py)."""

    def __init__(self, stack: Stack, name: str):
        self.stack, self.name = stack, name
        self.folder = stack.root / name
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        from tests.prefect_deployed import PREFECT

        self.folder.mkdir(parents=True, exist_ok=True)
        env = self.stack.environment() | self.stack.prefect.env | {"SCOREKEEPER_CACHE": str(self.folder / "cache")}
        env["AWS_ENDPOINT_URL_S3"] = self.stack.relay.endpoint
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            env[key] = self.stack.environment()[key]
        self.process = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", GROUP_POOL, "--type", "process", "--limit", "1", "--name", self.name],
            cwd=self.folder, env=env, stdout=open(self.folder / "worker.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def family(self) -> list:
        import psutil

        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def die(self) -> None:
        """The machine is gone: its worker, flow runs and scoring processes stopped, then killed."""
        from tests.prefect_deployed import lose_at_once

        lose_at_once(self.family())
        self.process.wait()

    def stop(self) -> None:
        from tests.prefect_deployed import stop_process_group

        if self.alive():
            stop_process_group(self.process, first=signal.SIGINT)


# -- what a run's files say ------------------------------------------------------------------------


def committed(keys: set[str]) -> int:
    return sum(k.startswith("work/commits/") and k.endswith(".json") for k in keys)


class RunView:
    """The run folder as a reader sees it (moto directly, or the local disk)."""

    def __init__(self, fs, path: str):
        self.fs, self.path = fs, path.rstrip("/")

    def exists(self, name: str) -> bool:
        try:
            return self.fs.exists(f"{self.path}/{name}")
        except OSError:
            return False

    def names(self, folder: str) -> list[str]:
        try:
            return [p.rsplit("/", 1)[-1] for p in self.fs.ls(f"{self.path}/{folder}", detail=False)]
        except (FileNotFoundError, OSError):
            return []

    def read(self, name: str) -> bytes:
        return self.fs.cat_file(f"{self.path}/{name}")

    def keys(self) -> set[str]:
        """Every file of the run folder, relative to it: one listing (one request on S3)."""
        try:
            return {p[len(self.path) + 1 :] for p in self.fs.find(self.path)}
        except (FileNotFoundError, OSError):
            return set()

    def phase(self, ranges: int, keys: set[str] | None = None) -> str:
        keys = self.keys() if keys is None else keys
        if "complete.json" in keys:
            return "done"
        if any(k.startswith("report/") for k in keys):
            return "publish"
        if "predictions.parquet" in keys:
            return "evaluate"
        if "work/job.json" in keys:
            return "gather" if committed(keys) >= ranges else "scoring"
        if any(k.startswith("work/lease/") for k in keys):
            return "reading"
        return "starting"

    def commits(self) -> dict[int, dict]:
        found = {}
        for name in self.names("work/commits"):
            if name.endswith(".json"):
                try:
                    record = json.loads(self.read(f"work/commits/{name}"))
                except (OSError, ValueError):
                    continue
                found[record["range_index"]] = record
        return found

    def usable_commits(self) -> dict[int, dict]:
        """The commit records whose shard is there with the recorded size (what a rerun keeps)."""
        usable = {}
        for index, record in self.commits().items():
            try:
                size = self.fs.size(f"{self.path}/work/shards/{record['shard'].rsplit('/', 1)[-1]}")
            except (FileNotFoundError, OSError):
                continue
            if size == record.get("shard_bytes", size):
                usable[index] = record
        return usable

    def half_published(self) -> str | None:
        """Why complete.json vouches for files that are not the ones there; None when it does (or
        is absent). Read twice around the check, so a rerun republishing in between is no finding."""
        from scorekeeper.run_folder import CompletionRecord, RunFolder
        from scorekeeper.run_seal import COMPARED, unverified_reason

        try:
            before = self.read("complete.json")
        except (FileNotFoundError, OSError):
            return None
        try:
            record = CompletionRecord.model_validate_json(before)
        except ValueError:
            problem = "complete.json is not a completion record"
        else:
            run = RunFolder(self.fs, self.path)
            files = (*COMPARED, *[f"{RunFolder.REPORT_DIR}/{name}" for name in record.files])
            try:
                problem = unverified_reason(run, files)
            except (FileNotFoundError, OSError) as exc:  # gone between its listing and its reading
                problem = f"a file complete.json vouches for vanished while read: {exc}"
        if problem is None:
            return None
        try:
            after = self.read("complete.json")
        except (FileNotFoundError, OSError):
            return None
        return problem if after == before else None


class Lanes:
    """Trials side by side: shared ones together, an exclusive one alone (and before later shared ones)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.shared = 0
        self.exclusive = False
        self.waiting = 0

    @contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        with self.cond:
            if exclusive:
                self.waiting += 1
                self.cond.wait_for(lambda: not self.exclusive and self.shared == 0)
                self.waiting -= 1
                self.exclusive = True
            else:
                self.cond.wait_for(lambda: not self.exclusive and self.waiting == 0)
                self.shared += 1
        try:
            yield
        finally:
            with self.cond:
                if exclusive:
                    self.exclusive = False
                else:
                    self.shared -= 1
                self.cond.notify_all()


# -- one trial -------------------------------------------------------------------------------------


@dataclass
class Trial:
    number: int
    config: str
    part: str
    target: str
    delay_s: float
    commits_first: int = 0  # scoring: kill once this many ranges are committed
    downtime_s: float = 0.0
    moment: str = ""  # what the run's files showed at the kill
    killed: str = ""
    faulted_exit: int | None = None
    rerun_exit: int | None = None
    rows: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0
    max_score_diff: float = 0.0
    metric_diffs: list[str] = field(default_factory=list)
    pending_before: list[int] = field(default_factory=list)
    rescored: list[int] = field(default_factory=list)
    rows_scored: int | None = None
    minimal: bool = False
    half_published: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    faulted_s: float = 0.0
    rerun_s: float = 0.0
    wall_s: float = 0.0

    @property
    def exclusive(self) -> bool:
        """Whether the trial kills what other trials share (the S3 endpoint, the machines) or needs
        both machines: then it runs alone."""
        return self.config == "fanout" or self.part == "s3"

    @staticmethod
    def draw(seed: int, number: int) -> Trial:
        rng = random.Random(f"chaos-{seed}-{number}")
        config = rng.choices(CONFIGS, weights=(4, 3, 3))[0]
        part = rng.choice(PARTS[config])
        target = rng.choice(PART_MOMENTS.get(part, MOMENTS))
        return Trial(
            number, config, part, target,
            delay_s=round(rng.uniform(0, 0.6 if target in ("reading", "evaluate") else 0.25), 3),
            commits_first=rng.randrange(ROWS[config] // ROWS_PER_RANGE // (2 if config == "fanout" else 1) - 1),
            downtime_s=round(rng.uniform(0.5, 6.0), 2) if part == "s3" else 0.0,
        )  # fmt: skip


def descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


class Runner:
    def __init__(self, stack: Stack, root: Path, log):
        self.stack, self.root, self.log = stack, root, log

    def launch(self, trial: Trial, params: dict, how: str, tag: str) -> subprocess.Popen:
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        out = open(logs / f"t{trial.number:03d}-{tag}.log", "wb")
        if how == "flow":
            command = [sys.executable, __file__, "--flow", json.dumps(params)]
        else:
            command = [str(Path(sys.executable).with_name("scorekeeper")), "run"]
            for key, value in params.items():
                command += [f"--{key.replace('_', '-')}", ",".join(value) if isinstance(value, list) else str(value)]
        return subprocess.Popen(command, env=self.stack.environment(), stdout=out, stderr=subprocess.STDOUT, cwd=self.root)

    def clean(self, config: str, name: str = "clean") -> dict:
        params = self.stack.parameters(config, f"{name}-{config}")
        process = self.launch(Trial(-1, config, "", "", 0), params, "cli", f"{name}-{config}")
        if process.wait(timeout=RERUN_TIMEOUT_S) != 0:
            raise RuntimeError(f"the {name} {config} run failed: see {self.root}/logs/t-01-{name}-{config}.log")
        view = self.stack.view(params)
        return {"predictions": read_predictions(view), "metrics": json.loads(view.read("report/metrics.json"))}

    def run(self, trial: Trial, clean: dict) -> Trial:
        started = time.time()
        self.stack.ensure_machines()
        params = self.stack.parameters(trial.config, f"t{trial.number:03d}")
        view = self.stack.view(params)
        ranges = math.ceil(ROWS[trial.config] / ROWS_PER_RANGE)
        how = "flow" if trial.part == "flow" else "cli"
        self._started = time.time()
        process = self.launch(trial, params, how, "faulted")
        self._watched: list = []
        seals = SealWatch(view, trial)
        try:
            self._strike(trial, process, view, ranges, seals)
            self._finish_faulted(trial, process, seals)
            if not self.stack.relay.alive():
                self.stack.relay.start()
            self.stack.ensure_machines()
            self._rerun(trial, params, view, how, seals, clean)
        finally:
            if process.poll() is None:
                process.kill()
            if not self.stack.relay.alive():
                self.stack.relay.start()
        trial.wall_s = round(time.time() - started, 1)
        return trial

    def _strike(self, trial: Trial, process: subprocess.Popen, view: RunView, ranges: int, seals: SealWatch) -> None:
        order = ["starting", *MOMENTS, "done"]
        deadline = time.time() + FAULTED_TIMEOUT_S
        seen: list[str] = []
        while time.time() < deadline and process.poll() is None:
            keys = view.keys()
            phase = view.phase(ranges, keys)
            seals.check()
            reached = order.index(phase) >= order.index(trial.target)
            if trial.target == "scoring" and phase == "scoring":
                reached = committed(keys) >= trial.commits_first
                phase = f"scoring {committed(keys)}"
            if not seen or seen[-1] != phase:
                seen.append(phase)
            if reached and self._victims(trial, process):
                break
            # Just before a short moment (gather, publish), look as often as a listing allows.
            close = order.index(trial.target) - order.index(phase.split()[0]) == 1 and trial.target in ("gather", "publish")
            time.sleep(0.005 if close else 0.04)
        else:
            trial.moment = "ended" if process.poll() is not None else view.phase(ranges)
            trial.problems.append(
                f"never reached {trial.target}: the run {'ended' if process.poll() is not None else 'hung'} first (seen {seen})"
            )
            return
        time.sleep(trial.delay_s)
        if process.poll() is not None:
            trial.moment = "ended"
            trial.problems.append("the run ended before the kill")
            return
        victims = self._victims(trial, process)
        trial.moment = view.phase(ranges)
        if not victims:
            trial.problems.append(f"no {trial.part} to kill at {trial.moment}")
            return
        self._watched = descendants(process.pid) + [p for m in self.stack.machines.values() for p in m.family()[1:]]
        if trial.part in ("cli", "flow"):
            os.kill(process.pid, signal.SIGKILL)
            trial.killed = f"{trial.part} pid {process.pid} (SIGKILL)"
        elif trial.part == "scoring":
            victim = random.Random(trial.number).choice(victims)
            victim.kill()
            trial.killed = f"scoring process pid {victim.pid} (SIGKILL)"
        elif trial.part == "group":
            machine = victims[0]
            machine.die()
            trial.killed = f"{machine.name} (its worker, group flow run and scoring process)"
        else:
            self.stack.relay.kill()
            trial.killed = f"S3 endpoint for {trial.downtime_s} s"
            down_until = time.time() + trial.downtime_s
            while time.time() < down_until:
                seals.check()
                time.sleep(0.1)
            self.stack.relay.start()

    def _victims(self, trial: Trial, process: subprocess.Popen) -> list:
        if trial.part in ("cli", "flow", "s3"):
            return [process]
        from tests.prefect_deployed import scoring_processes

        if trial.part == "scoring":
            pool = descendants(process.pid) + [p for m in self.stack.machines.values() for p in m.family()] * (trial.config == "fanout")
            return scoring_processes(pool)
        return [m for m in self.stack.machines.values() if m.alive() and scoring_processes(m.family())]

    def _finish_faulted(self, trial: Trial, process: subprocess.Popen, seals: SealWatch) -> None:
        deadline = time.time() + FAULTED_TIMEOUT_S
        while process.poll() is None and time.time() < deadline:
            seals.check()
            time.sleep(0.2)
        if process.poll() is None:
            trial.problems.append(f"hang: the faulted run did not end within {FAULTED_TIMEOUT_S} s")
            process.kill()
        trial.faulted_exit = process.wait()
        trial.faulted_s = round(time.time() - self._started, 1)
        if trial.part in ("cli", "flow"):  # what the killed process had started must end by itself
            deadline = time.time() + ORPHAN_GRACE_S
            watched = self._watched
            while time.time() < deadline and any(_running(p) for p in watched):
                time.sleep(0.2)
            alive = [p for p in watched if _running(p) and not _machine_process(p, self.stack)]
            for p in alive:
                trial.left_behind.append(" ".join(_cmdline(p))[:120])
                p.kill()
        problem = seals.check(force=True)
        if problem:
            trial.half_published.append(f"after the fault: {problem}")

    def _rerun(self, trial: Trial, params: dict, view: RunView, how: str, seals: SealWatch, clean: dict) -> None:
        before = view.usable_commits()
        ranges = math.ceil(ROWS[trial.config] / ROWS_PER_RANGE)
        trial.pending_before = sorted(set(range(ranges)) - set(before))
        process = self.launch(trial, params, how, "rerun")
        rerun_started = time.time()
        deadline = time.time() + RERUN_TIMEOUT_S
        while process.poll() is None and time.time() < deadline:
            seals.check()
            time.sleep(0.2)
        if process.poll() is None:
            trial.problems.append(f"hang: the rerun did not end within {RERUN_TIMEOUT_S} s")
            process.kill()
        trial.rerun_exit = process.wait()
        trial.rerun_s = round(time.time() - rerun_started, 1)
        problem = seals.check(force=True)
        if problem:
            trial.half_published.append(f"after the rerun: {problem}")
        trial.half_published += seals.found
        if trial.rerun_exit != 0:
            trial.problems.append(f"the rerun exited {trial.rerun_exit}")
            return
        after = view.commits()
        trial.rescored = sorted(i for i, record in after.items() if before.get(i, {}).get("attempt") != record.get("attempt"))
        metrics = json.loads(view.read("report/metrics.json"))
        trial.rows_scored = (metrics.get("scoring") or {}).get("rows_scored")
        rows_pending = sum(min(ROWS_PER_RANGE, ROWS[trial.config] - i * ROWS_PER_RANGE) for i in trial.pending_before)
        trial.minimal = trial.rescored == trial.pending_before and trial.rows_scored == rows_pending and set(after) == set(range(ranges))
        if not trial.minimal:
            trial.problems.append(
                f"resume not minimal: missing before {trial.pending_before}, rescored {trial.rescored}, "
                f"rows_scored {trial.rows_scored} (expected {rows_pending})"
            )
        compare(trial, read_predictions(view), metrics, clean)


def _cmdline(p) -> list[str]:
    import psutil

    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _running(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _machine_process(p, stack: Stack) -> bool:
    return any(p.pid == q.pid for m in stack.machines.values() for q in m.family())


class SealWatch:
    """Checks, while a trial runs, that complete.json never vouches for files that are not there."""

    def __init__(self, view: RunView, trial: Trial):
        self.view, self.trial = view, trial
        self.found: list[str] = []
        self._last = 0.0

    def check(self, force: bool = False) -> str | None:
        if not force and time.time() - self._last < 0.5:
            return None
        self._last = time.time()
        problem = self.view.half_published()
        if problem and not force:
            self.found.append(problem)
        return problem


def read_predictions(view: RunView):
    import io

    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(view.read("predictions.parquet")))


def flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if prefix == "" and key in VOLATILE:
                continue
            out |= flat(item, f"{prefix}{key}.")
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out |= flat(item, f"{prefix}{i}.")
        return out
    return {prefix.rstrip("."): value}


def compare(trial: Trial, table, metrics: dict, clean: dict) -> None:
    import numpy as np

    reference = clean["predictions"]
    rows = table.column("row_index").to_pylist()
    trial.rows = len(rows)
    n = reference.num_rows
    trial.lost = len(set(range(n)) - set(rows))
    trial.duplicated = len(rows) - len(set(rows))
    if rows != list(range(n)) or table.column("id").to_pylist() != reference.column("id").to_pylist():
        trial.mismatched = max(1, sum(a != b for a, b in zip(rows, range(n))))
        trial.problems.append("predictions.parquet's rows are not the clean run's")
        return
    labels = table.column("predicted_label").to_pylist()
    expected = reference.column("predicted_label").to_pylist()
    got = np.array(table.column("probabilities").to_pylist(), dtype=float)
    want = np.array(reference.column("probabilities").to_pylist(), dtype=float)
    diff = np.abs(got - want).max(axis=1)
    trial.max_score_diff = float(diff.max())
    trial.mismatched = int(
        sum(a != b for a, b in zip(labels, expected)) + ((diff > SCORE_TOLERANCE) & [a == b for a, b in zip(labels, expected)]).sum()
    )
    if trial.mismatched:
        differing = [i for i, (a, b, d) in enumerate(zip(labels, expected, diff)) if a != b or d > SCORE_TOLERANCE]
        trial.problems.append(
            f"{trial.mismatched} rows differ from the clean run's (max score difference {trial.max_score_diff:.2e}; rows {differing[:12]})"
        )
    mine, theirs = flat(metrics), flat(clean["metrics"])
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key, "<absent>"), theirs.get(key, "<absent>")
        if isinstance(a, float) and isinstance(b, float):
            if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(b))):
                trial.metric_diffs.append(f"{key}: {a!r} != {b!r}")
        elif a != b:
            trial.metric_diffs.append(f"{key}: {a!r} != {b!r}")
    if trial.metric_diffs:
        trial.problems.append(f"metrics.json differs from the clean run's in {len(trial.metric_diffs)} values: {trial.metric_diffs[:3]}")


# -- the campaign ----------------------------------------------------------------------------------


def summary(trials: list[Trial], wall_s: float, setup_s: float | None, command: str, controls: list[Trial] = ()) -> str:
    lines = [f"fault campaign: {command}", ""]
    for control in controls:
        lines.append(
            f"control {control.config}: a second clean run {'equals' if not control.problems else 'DIFFERS from'} the first "
            f"(max score difference {control.max_score_diff:.1e}{'; ' + '; '.join(control.problems)[:300] if control.problems else ''})"
        )
    lines.append("")
    parts = sorted({t.part for t in trials})
    moments = [m for m in (*MOMENTS, "done", "ended", "starting") if any(t.moment == m for t in trials)]
    lines.append("| part killed | " + " | ".join(moments) + " | trials |")
    lines.append("|---|" + "---:|" * (len(moments) + 1))
    for part in parts:
        counts = Counter(t.moment for t in trials if t.part == part)
        lines.append(f"| {part} | " + " | ".join(str(counts.get(m, 0)) for m in moments) + f" | {sum(counts.values())} |")
    configs = Counter(t.config for t in trials)
    failed = [t for t in trials if t.problems or t.half_published or t.left_behind]
    lines += [
        "",
        f"trials {len(trials)} ({', '.join(f'{c} {configs[c]}' for c in CONFIGS if configs[c])}); "
        f"faulted runs that failed {sum(t.faulted_exit not in (0, None) for t in trials)}, that completed anyway {sum(t.faulted_exit == 0 for t in trials)}",
        f"rows checked {sum(t.rows for t in trials)}: lost {sum(t.lost for t in trials)}, duplicated {sum(t.duplicated for t in trials)}, "
        f"mismatched {sum(t.mismatched for t in trials)} (max score difference {max((t.max_score_diff for t in trials), default=0):.1e}), "
        f"metric values differing {sum(len(t.metric_diffs) for t in trials)}",
        f"resumes minimal {sum(t.minimal for t in trials)} of {len(trials)} (ranges rescored {sum(len(t.rescored) for t in trials)}, "
        f"all of them missing before the rerun)",
        f"half-published seen {sum(len(t.half_published) for t in trials)}; processes left behind {sum(len(t.left_behind) for t in trials)}; "
        f"hangs {sum(any('hang' in p for p in t.problems) for t in trials)}",
        f"wall {wall_s / 60:.1f} min ({'' if setup_s is None else f'set-up {setup_s:.0f} s, '}{wall_s / max(1, len(trials)):.0f} s a trial)",
        f"trials with a problem: {len(failed)}",
    ]
    for t in failed:
        lines.append(
            f"  trial {t.number} ({t.config}, {t.part} at {t.moment}): {'; '.join(t.problems + t.half_published + t.left_behind)[:400]} (replay: --only {t.number})"
        )
    return "\n".join(lines)


def merged(paths: list[str], wall_s: float | None) -> int:
    """One summary of a campaign run as several processes (each its own stack, a share of the
    trials): each trial counted once, the first record of it kept."""
    records = [json.loads(Path(p).read_text()) for p in paths]
    trials: dict[int, Trial] = {}
    for record in records:
        for t in record["trials"]:
            trials.setdefault(t["number"], Trial(**t))
    controls = [Trial(**c) for record in records for c in record.get("controls", [])]
    wall = wall_s if wall_s is not None else max(r["wall_s"] for r in records)
    done = [trials[n] for n in sorted(trials)]
    print(summary(done, wall, None, " + ".join(r["command"][:80] for r in records), controls))
    return 1 if any(t.problems or t.half_published or t.left_behind for t in done) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", type=int, action="append", help="run only trial N of the campaign (repeatable)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="draw only trials of these configurations")
    parser.add_argument("--work", help="keep the stack's files here (default: a temporary folder, removed)")
    parser.add_argument("--json", help="write every trial's record here")
    parser.add_argument("--prefect-api", help="a running Prefect server's API URL (not with the fanout configuration)")
    parser.add_argument("--no-control", action="store_true", help="skip the control (each clean run twice)")
    parser.add_argument("--lanes", type=int, default=2, help="trials run side by side (one that kills a shared part runs alone)")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="print the summary of campaigns run in parts (their --json files)")
    parser.add_argument("--wall-s", type=float, help="with --merge: the whole campaign's wall time")
    parser.add_argument("--relay", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--flow", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relay:
        relay_main(*args.relay)
        return 0
    if args.flow:
        return flow_child(args.flow)
    if args.merge:
        return merged(args.merge, args.wall_s)

    command = "bench/chaos.py " + " ".join(argv if argv is not None else sys.argv[1:])
    numbers = args.only or list(range(args.trials))
    allowed = set(args.configs.split(","))
    trials = [Trial.draw(args.seed, n) for n in numbers]
    trials = [t for t in trials if t.config in allowed]
    root = Path(args.work or tempfile.mkdtemp(prefix="scorekeeper-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.time()
    stack = Stack(root, {t.config for t in trials}, args.prefect_api)
    done: list[Trial] = []
    controls: list[Trial] = []
    try:
        print(f"stack up in {stack.setup_s:.0f} s under {root}", flush=True)
        configs = sorted({t.config for t in trials})
        with ThreadPoolExecutor(max_workers=max(1, args.lanes)) as pool:
            clean = dict(zip(configs, pool.map(lambda c: Runner(stack, root, print).clean(c), configs)))
            # The control: each configuration's clean run again, compared with the first (no fault).
            again = (
                {} if args.no_control else dict(zip(configs, pool.map(lambda c: Runner(stack, root, print).clean(c, "control"), configs)))
            )
        for config in again:
            control = Trial(-1, config, "none", "none", 0)
            compare(control, again[config]["predictions"], again[config]["metrics"], clean[config])
            controls.append(control)
            print(
                f"control {config}: two clean runs {'agree' if not control.problems else 'DIFFER: ' + '; '.join(control.problems)[:300]}",
                flush=True,
            )
        lanes = Lanes()
        queue = list(trials)
        queue_lock = threading.Lock()

        def lane() -> None:
            runner = Runner(stack, root, print)
            while True:
                with queue_lock:
                    if not queue:
                        return
                    trial = queue.pop(0)
                with lanes.hold(trial.exclusive):
                    runner.run(trial, clean[trial.config])
                with queue_lock:
                    done.append(trial)
                status = "ok" if not (trial.problems or trial.half_published or trial.left_behind) else "PROBLEM"
                print(
                    f"trial {trial.number:3d} {trial.config:6s} {trial.part:7s} target {trial.target:8s} at {trial.moment:8s} "
                    f"exit {trial.faulted_exit}/{trial.rerun_exit} missing {len(trial.pending_before)} rescored {len(trial.rescored)} "
                    f"{trial.faulted_s:5.1f}+{trial.rerun_s:5.1f} s {status} {'; '.join(trial.problems)[:200]}",
                    flush=True,
                )

        threads = [threading.Thread(target=lane, daemon=True) for _ in range(max(1, args.lanes))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.sort(key=lambda t: t.number)
    finally:
        stack.stop()
        wall = time.time() - started
        text = summary(done, wall, stack.setup_s, command, controls)
        print(text, flush=True)
        if args.json:
            record = {"command": command, "wall_s": wall, "controls": [asdict(t) for t in controls], "trials": [asdict(t) for t in done]}
            Path(args.json).write_text(json.dumps(record, indent=1))
        if not args.work:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    return 1 if any(t.problems or t.half_published or t.left_behind for t in done) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Two reruns that take over one stale lease never both run (scorekeeper/lease.py).

Two real processes, started once, race round after round: in each round a fresh run folder holds
a lease whose job is gone (expired), both are told the same instant to take it, and exactly one
may proceed; the other is refused with RunConflict. Locally (a hard link is the exclusive create)
and on moto's S3 server (a conditional PUT).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from scorekeeper.lease import generation_name, generations, lease_holder
from scorekeeper.run_folder import RunFolder
from tests.s3server import moto  # noqa: F401  (a fixture)

RACER = textwrap.dedent(
    """
    import sys, time
    from scorekeeper.errors import RunConflict
    from scorekeeper.lease import take_lease
    from scorekeeper.run_folder import RunFolder

    me = sys.argv[1]
    print("ready", flush=True)
    for line in sys.stdin:
        uri, at = line.split()
        run = RunFolder.from_uri(uri)
        run.exists("x")  # the filesystem's client made before the start, as a rerun has it by then
        time.sleep(max(0.0, float(at) - time.time() - 0.01))  # asleep until just before the start ...
        while time.time() < float(at):  # ... then both wait it out to the same instant
            pass
        try:
            take_lease(run, "r", owner=me)
            print("won", flush=True)
        except RunConflict:
            print("refused", flush=True)
    """
)

STALE = {"owner": "killed-job", "host": "elsewhere", "pid": 1, "renewed_at": 0.0}  # expired long ago


def _race(uris: list[str], env: dict | None = None) -> list[tuple[str, str]]:
    racers = [
        subprocess.Popen([sys.executable, "-c", RACER, f"racer-{i}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for i in range(2)
    ]
    try:
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready"
        results = []
        for uri in uris:
            at = time.time() + 0.15
            for racer in racers:
                racer.stdin.write(f"{uri} {at}\n")
                racer.stdin.flush()
            results.append(tuple(racer.stdout.readline().strip() for racer in racers))
        return results
    finally:
        for racer in racers:
            racer.stdin.close()
            racer.wait(timeout=30)


def _check(results: list[tuple[str, str]], runs: list[RunFolder]) -> None:
    assert all(sorted(r) == ["refused", "won"] for r in results), results
    for run, result in zip(runs, results, strict=True):
        holder = lease_holder(run)
        assert holder is not None and holder["owner"] == f"racer-{result.index('won')}"
        assert generations(run) == [0, 1]  # the stale generation 0, the winner's 1; the loser created none


def test_two_processes_taking_over_one_stale_lease_never_both_proceed(tmp_path):
    runs = []
    for k in range(30):
        run = RunFolder.from_uri(str(tmp_path / f"r{k}"))
        run.publish_bytes(json.dumps(STALE).encode(), generation_name(0))
        runs.append(run)
    _check(_race([run.uri for run in runs]), runs)


@pytest.mark.integration
def test_two_processes_taking_over_one_stale_lease_on_s3_never_both_proceed(moto):  # noqa: F811
    bucket = moto.create_bucket("lease")
    fs = moto.filesystem()
    runs = []
    for k in range(15):
        fs.pipe_file(f"{bucket}/r{k}/{generation_name(0)}", json.dumps(STALE).encode())
        runs.append(RunFolder(fs, f"{bucket}/r{k}"))
    _check(_race([f"s3://{bucket}/r{k}" for k in range(15)], env=moto.environment()), runs)

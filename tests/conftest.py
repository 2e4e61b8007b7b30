"""Shared fixtures: tiny models built once per session, and a quiet, offline environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile

import pytest

# Prefect's home for this session (before anything imports Prefect): the session's API server
# (tests/prefect_session.py) keeps its SQLite database there, not in ~/.prefect, which every
# session on the machine would share (contending for one database file that grows by every run),
# and no profile of the user's reaches the tests. Removed when the session ends.
_PREFECT_HOME = tempfile.mkdtemp(prefix="scorekeeper-tests-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Tiny classifiers (random weights, safetensors, local tokenizers) and a LoRA adapter."""
    from tests.models import build_lora_adapter, build_tiny_classifier

    root = tmp_path_factory.mktemp("models")
    built = {
        "bert": str(build_tiny_classifier(root / "bert", "bert", seed=1)),
        "llama": str(build_tiny_classifier(root / "llama", "llama", seed=2)),
    }
    built["bert_adapter"] = str(build_lora_adapter(built["bert"], root / "bert_adapter", seed=3))
    return built


@pytest.fixture(scope="session")
def deployed(tmp_path_factory):
    """One `prefect server start` with the project's deployments, shared by the tests of
    deployments, fan-out and the process-pool path (tests/prefect_deployed.py)."""
    from tests.prefect_deployed import start_and_deploy

    found = start_and_deploy(tmp_path_factory.mktemp("prefect-deployed") / "prefect-home")
    try:
        yield found
    finally:
        found.server.stop()


@pytest.fixture
def prefect_api():
    """Prefect pointed at the session's one API server (tests/prefect_session.py) during the test."""
    from tests import prefect_session

    with prefect_session.api() as url:
        yield url


# -- the order of the files ------------------------------------------------------------------
# ./test.sh hands whole files to two xdist workers in collection order (--dist loadfile
# --no-loadscope-reorder). A long file started last keeps one worker busy while the other idles,
# so the files are collected longest first: by each test's duration in the last run that ran it
# (pytest's cache, recorded below), else by its tier (an integration or slow test is a subprocess,
# a server or a model: tens of seconds; a fast one well under one). The order of the tests inside a
# file is kept.
_DURATIONS = "scorekeeper/test_seconds"
_GUESS_S = {True: 30.0, False: 0.3}
_SEEN: dict[str, float] = {}


def _recorded_seconds(config) -> dict[str, float]:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: the controller's reading, so both collect alike
        return workerinput.get(_DURATIONS) or {}
    cache = getattr(config, "cache", None)
    return cache.get(_DURATIONS, {}) if cache is not None else {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput[_DURATIONS] = _recorded_seconds(node.config)


def pytest_collection_modifyitems(config, items):
    recorded = _recorded_seconds(config)
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def cost(tests: list) -> float:
        heavy = lambda item: any(item.get_closest_marker(m) for m in ("integration", "slow"))  # noqa: E731
        return sum(recorded.get(item.nodeid, _GUESS_S[heavy(item)]) for item in tests)

    items[:] = [item for tests in sorted(files.values(), key=cost, reverse=True) for item in tests]


def pytest_runtest_logreport(report):
    """Each test's setup, call and teardown, summed (in xdist's controller: as the workers report them)."""
    _SEEN[report.nodeid] = _SEEN.get(report.nodeid, 0.0) + report.duration


# The files that ask for one of these session fixtures go to one xdist worker, as one unit: each
# worker would otherwise start a server of its own (`deployed`: a `prefect server start` and
# `prefect deploy`, about 30 CPU-s), and they share it one module after another as
# tests/prefect_deployed.py describes. Found from the files' text: a function taking the fixture.
_ONE_WORKER = ("deployed",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    units: dict[str, str] = {}

    class SharedServers(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            if path not in units:
                text = (config.rootpath / path).read_text() if (config.rootpath / path).is_file() else ""
                asks = [name for name in _ONE_WORKER if re.search(rf"\bdef \w+\([^)]*\b{name}\b", text)]
                units[path] = f"the files asking for {asks[0]}" if asks else path
            return units[path]

    return SharedServers(config, log)


# -- leaving ----------------------------------------------------------------------------------
_SESSION: dict[str, int] = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """The session's Prefect server goes last, after a bounded drain of what is still to be sent."""
    from tests import prefect_session

    _SESSION["exitstatus"] = int(exitstatus)
    cache = getattr(session.config, "cache", None)
    if _SEEN and cache is not None and not hasattr(session.config, "workerinput"):
        cache.set(_DURATIONS, {**cache.get(_DURATIONS, {}), **{k: round(v, 2) for k, v in _SEEN.items()}})
    try:
        prefect_session.stop()
    finally:
        shutil.rmtree(_PREFECT_HOME, ignore_errors=True)


def pytest_unconfigure(config):
    """Leave as soon as pytest has said everything. Prefect's log and event workers drain at
    interpreter exit without a time limit, and logs held for a temporary server that a test has
    already stopped are retried for minutes (a CI run sat there after '355 passed'). The results
    are printed and the exit status is pytest's own."""
    if "exitstatus" in _SESSION:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_SESSION["exitstatus"])


@pytest.fixture(scope="session")
def golden_build(tmp_path_factory):
    """bench/golden.py's evaluations built once, through connections that check each SQL file's
    header as it runs (tests/sql_check.py): (the folder of published files, the SQL files run in order).
    tests/test_golden.py compares the files with the snapshot, tests/test_evaluation_kinds.py reads
    the documents, tests/test_sql_files.py the order. Once for the whole run: under xdist the first
    worker to ask builds it into the run's shared temporary folder, holding a file lock, and the
    other reads what it left (a build that failed leaves nothing, so the next asker builds again)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, order = shared / "golden" / "build", shared / "golden" / "ran.json"
    with FileLock(str(shared / "golden.lock")):
        if not order.is_file():
            shutil.rmtree(out, ignore_errors=True)
            out.parent.mkdir(exist_ok=True)
            order.write_text(json.dumps(_build_golden(out)))
    return out, json.loads(order.read_text())


def _build_golden(out) -> list[str]:
    from bench.golden import build
    from scorekeeper.evaluation import duck
    from tests.sql_check import Checked

    ran: list[str] = []
    connect = duck.connect
    duck.connect = lambda fs=None: Checked(connect(fs), ran)
    try:
        build(out)
    finally:
        duck.connect = connect
    return ran

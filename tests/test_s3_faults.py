"""Object-storage faults: 5xx replies, throttling and dropped connections between scorekeeper and S3.

A fault-injecting proxy (tests/faultproxy.py) stands in front of the loopback moto server, and the
standard AWS chain's endpoint (AWS_ENDPOINT_URL_S3) points at the proxy, so the flow's steps and
the scoring subprocesses alike go through it. Transient faults are absorbed by the bounded
retries (storage.S3_MAX_ATTEMPTS, storage.S3FS_ATTEMPTS, the I/O tasks' IO_RETRIES: the runs go
through the flow) and the run's result is exact; a persistent fault fails the run within a measured time and publishes nothing; a conditional create
whose response was lost still counts as the writer's own commit, once.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs
from botocore.exceptions import BotoCoreError

from scorekeeper.run_folder import CommitRecord
from scorekeeper.storage import S3_MAX_ATTEMPTS, S3FS_ATTEMPTS, Location
from scorekeeper.tasks.retries import IO_RETRIES
from tests.faultproxy import FaultProxy
from tests.helpers import make_rows, probabilities, reference_probabilities, run_flow
from tests.s3server import moto  # noqa: F401  (moto is a fixture)

pytestmark = pytest.mark.integration

ROWS = 17
ROWS_PER_RANGE = 3  # 6 ranges: 6 shard PUTs and 6 conditional commit PUTs from 2 processes


@pytest.fixture(scope="module")
def proxy(moto):
    with FaultProxy(moto.endpoint) as p:
        yield p


@pytest.fixture
def through_proxy(moto, proxy, monkeypatch, tmp_path):
    """This process and its subprocesses reach S3 through the proxy, with the standard AWS chain."""
    for name in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(name, raising=False)
    with moto.in_this_process(monkeypatch, {"AWS_ENDPOINT_URL_S3": proxy.endpoint, "SCOREKEEPER_CACHE": str(tmp_path / "cache")}):
        proxy.clear()
        yield proxy
        proxy.clear()


def _dataset(moto, models, bucket: str) -> tuple[list[dict], dict]:
    """Input (two CSV files), ground truth (Parquet) and the model folder in the bucket."""
    fs = moto.filesystem()
    rows = make_rows(ROWS, seed=11)
    for name, part in (("part-1.csv", rows[:8]), ("part-2.csv", rows[8:])):
        text = "review_id,text\n" + "".join(f'{r["review_id"]},"{r["text"]}"\n' for r in part)
        fs.pipe_file(f"{bucket}/eval/input/{name}", text.encode())
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"review_id": r["review_id"], "label": r["label"]} for r in rows]), sink)
    fs.pipe_file(f"{bucket}/eval/truth.parquet", sink.getvalue())
    params = dict(
        input_uri=f"s3://{bucket}/eval/input/",
        id_column="review_id",
        ground_truth_uri=f"s3://{bucket}/eval/truth.parquet",
        model_uri=moto.upload_folder(models["bert"], f"s3://{bucket}/models/bert"),
        output_uri=f"s3://{bucket}/runs",
        run_name="r",
        rows_per_range=ROWS_PER_RANGE,
    )
    return rows, params


def _run_objects(moto, bucket: str) -> list[str]:
    """Every object under the run folder, read from moto directly (not through the proxy)."""
    return sorted(p.removeprefix(f"{bucket}/runs/r/") for p in moto.filesystem().find(f"{bucket}/runs/r"))


# -- transient faults and a persistent one: bounded, nothing published, the rerun exact ------------


def test_transient_faults_are_retried_a_persistent_one_fails_within_the_bound_and_the_rerun_is_exact(moto, models, through_proxy):
    """One run through transient 5xx replies, throttling and dropped connections on every kind of
    request of its scoring (two processes), whose predictions PUT then fails for good: the gather
    task gives up within the retries' bound and publishes nothing, every range committed exactly
    once. Once the store recovers, a rerun under the same name (one process) scores nothing again,
    publishes through transient faults of its own, and its predictions are exact."""
    proxy = through_proxy
    bucket = moto.create_bucket("faults")
    rows, params = _dataset(moto, models, bucket)
    run = f"/{bucket}/runs/r/"
    commits, shards = run + r"work/commits/range-", run + r"work/shards/range-"
    # The plan, by request kind; a request gets the first fault whose rule hits it. Every fault
    # here is transient: the next attempt of the same request goes through.
    scoring = {
        # commit records: conditional PUTs from the scoring processes
        "commit PUT 503 SlowDown": dict(kind="error", method="PUT", target=commits, status=503, code="SlowDown", every=2, times=3),
        "commit PUT response lost": dict(kind="lose_response", method="PUT", target=commits, skip=1, every=2, times=2),
        # shards: plain PUTs from the scoring processes
        "shard PUT 500": dict(kind="error", method="PUT", target=shards, times=2),
        "shard PUT connection reset": dict(kind="drop", method="PUT", target=shards, skip=1, times=1),
        # listings (ListObjectsV2): the model folder, the input prefix, the commit records
        "listing 503 SlowDown": dict(kind="error", method="GET", target=r"[?&]list-type=2", status=503, code="SlowDown", every=3, times=3),
        "listing cut mid-body": dict(kind="truncate", method="GET", target=r"[?&]list-type=2", skip=1, every=4, times=2),
        # object reads: the model files (flow), job.json and the staged input (scoring processes)
        "model GET 500": dict(kind="error", method="GET", target=rf"/{bucket}/models/bert/[^?]+$", times=1),
        "model GET cut mid-body": dict(kind="truncate", method="GET", target=rf"/{bucket}/models/bert/[^?]+$", skip=1, times=1),
        "job.json GET 503 SlowDown": dict(kind="error", method="GET", target=run + r"work/job\.json", status=503, code="SlowDown", times=1),
        "staged input GET cut mid-body": dict(kind="truncate", method="GET", target=run + r"work/input\.parquet", times=2),
        "HEAD 500": dict(kind="error", method="HEAD", target=run, every=5, times=2),
    }
    # what the rerun publishes
    publishing = {
        "predictions PUT 500": dict(kind="error", method="PUT", target=run + r"predictions\.parquet$", times=2),
        "predictions PUT response lost": dict(kind="lose_response", method="PUT", target=run + r"predictions\.parquet$", times=1),
        "metrics.json PUT 503 SlowDown": dict(
            kind="error", method="PUT", target=run + r"report/metrics\.json$", status=503, code="SlowDown", times=1
        ),
    }
    for name, rule in scoring.items():
        proxy.add(name, **rule)
    proxy.add("predictions PUT 500 forever", "error", rf"{run}predictions\.parquet$", "PUT")

    started = time.time()
    with pytest.raises(OSError, match="internal error") as failure:
        run_flow(2, **params)
    elapsed = time.time() - started
    puts = proxy.exchanges("predictions PUT 500 forever")
    first = min(e.at for e in puts)
    retrying = max(e.at for e in puts) - first
    print(f"\npersistent 500: failed after {elapsed:.1f} s in all, {len(puts)} PUTs over {retrying:.1f} s: {failure.value!r}")

    # Bounded: the gather task's attempts (IO_RETRIES) of S3_MAX_ATTEMPTS requests each (s3fs does
    # not repeat a 500), each attempt's backoff at most 1+2+4+8 s, the task's retry delay between.
    attempts = IO_RETRIES["retries"] + 1
    assert len(puts) == attempts * S3_MAX_ATTEMPTS
    assert retrying < attempts * 16 + IO_RETRIES["retries"] * IO_RETRIES["retry_delay_seconds"]
    # Nothing partial published: no predictions, no report, no unfinished multipart upload.
    objects = _run_objects(moto, bucket)
    assert "predictions.parquet" not in objects
    assert not [o for o in objects if o.startswith("report/")]
    assert not moto.filesystem().call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads")
    # A commit whose response was lost was sent again and met 412 from the store (its first PUT
    # had landed), and still counted as that process's commit: had create_exclusive said "not
    # ours", the process would have removed its shard and the rerun would score its range again.
    lost = proxy.exchanges("commit PUT response lost")
    assert 200 in {e.upstream_status for e in lost}
    answered = [e for e in proxy.exchanges() if e.method == "PUT" and e.target in {x.target for x in lost} and e.rule is None]
    assert 412 in {e.upstream_status for e in answered}

    # Exactly one commit per range, each naming the one shard of its range: nothing duplicated,
    # and the committed ranges survive the failure.
    ranges = (ROWS + ROWS_PER_RANGE - 1) // ROWS_PER_RANGE
    commit_names = [o for o in objects if o.startswith("work/commits/")]
    shard_names = [o for o in objects if o.startswith("work/shards/")]
    assert commit_names == [f"work/commits/range-{i:07d}.json" for i in range(ranges)]
    records = [CommitRecord.from_bytes(moto.filesystem().cat_file(f"{bucket}/runs/r/{c}")) for c in commit_names]
    assert [(r.start, r.end) for r in records] == [(s, min(s + ROWS_PER_RANGE, ROWS)) for s in range(0, ROWS, ROWS_PER_RANGE)]
    assert sorted(f for r in records for f in r.files()) == shard_names

    # The store recovers: a rerun under the same name scores nothing again and publishes.
    proxy.remove("predictions PUT 500 forever")
    for name, rule in publishing.items():
        proxy.add(name, **rule)
    result = run_flow(1, **params)
    injected = proxy.injected()
    print(f"requests {dict(proxy.requests())}; injected {injected}")
    # Every scripted fault really happened, as many times as scripted.
    assert injected == {name: rule["times"] for name, rule in (scoring | publishing).items()}
    assert result.scoring["rows_scored"] == 0

    table = result.predictions
    assert table.column("row_index").to_pylist() == list(range(ROWS))
    assert table.column("id").to_pylist() == [r["review_id"] for r in rows]
    expected = reference_probabilities(models["bert"], [r["text"] for r in rows])
    assert np.abs(probabilities(table) - expected).max() < 1e-4
    assert result.metrics["rows"] == result.metrics["scored"] == result.metrics["evaluated"] == ROWS
    assert result.metrics["missing_predictions"] == 0
    objects = _run_objects(moto, bucket)
    assert [o for o in objects if o.startswith("work/commits/")] == commit_names  # the rerun committed nothing again
    assert {"predictions.parquet", "report/metrics.json"} <= set(objects)


def test_persistent_throttling_is_retried_by_both_layers_within_their_product(moto, through_proxy, monkeypatch):
    """SlowDown and dropped connections are retried by botocore and then by s3fs's loop: the bound
    is their product. AWS_MAX_ATTEMPTS, the standard variable, sets botocore's share."""
    proxy = through_proxy
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = moto.create_bucket("slow")
    moto.filesystem().pipe_file(f"{bucket}/run/b.json", b"{}")
    run = Location.from_uri(f"s3://{bucket}/run")
    proxy.add("PUT 503 SlowDown forever", "error", r"/run/a\.json$", "PUT", status=503, code="SlowDown")
    proxy.add("GET reset forever", "drop", r"/run/b\.json$", "GET")
    started = time.time()
    with pytest.raises(OSError, match="reduce your request rate"):
        run.publish_bytes(b"{}", "a.json")
    throttled = time.time() - started
    started = time.time()
    # s3fs hands on botocore's connection errors untranslated: not an OSError, but named clearly.
    with pytest.raises((OSError, BotoCoreError), match=r"b\.json"):
        run.read_bytes("b.json")
    dropped = time.time() - started
    injected = proxy.injected()
    print(f"\nSlowDown forever: {injected['PUT 503 SlowDown forever']} PUTs in {throttled:.1f} s; "
          f"reset forever: {injected['GET reset forever']} GETs in {dropped:.1f} s")  # fmt: skip
    assert injected["PUT 503 SlowDown forever"] == 2 * S3FS_ATTEMPTS
    assert 2 <= injected["GET reset forever"] <= 2 * 2 * S3FS_ATTEMPTS  # aiohttp may reconnect once itself
    assert throttled < 15 and dropped < 15


# -- a conditional create whose response is lost -------------------------------------------------


def test_a_commit_whose_response_was_lost_is_ours_exactly_once(moto, through_proxy):
    proxy = through_proxy
    bucket = moto.create_bucket("lost")
    run = Location.from_uri(f"s3://{bucket}/run")
    name = "work/commits/range-0000000.json"
    ours, theirs = b'{"attempt": "ours"}\n', b'{"attempt": "theirs"}\n'
    proxy.add("our response lost", "lose_response", rf"/{bucket}/run/{name}$", "PUT", times=1)

    # Our PUT lands at the store but its answer never arrives; botocore sends it again, the store
    # answers 412 (the key exists now), and create_exclusive reads the object back: our bytes.
    assert run.create_exclusive(ours, name)
    puts = [e for e in proxy.exchanges() if e.method == "PUT"]
    assert [(e.rule, e.upstream_status) for e in puts] == [("our response lost", 200), (None, 412)]
    # Another writer's PUT of the same record meets 412, its answer lost too, then 412 again:
    # the object holds other bytes, so the range is not theirs.
    proxy.add("their response lost", "lose_response", rf"/{bucket}/run/{name}$", "PUT", times=1)
    assert not run.create_exclusive(theirs, name)
    assert proxy.injected() == {"our response lost": 1, "their response lost": 1}
    puts = [e for e in proxy.exchanges() if e.method == "PUT"]
    assert [(e.rule, e.upstream_status) for e in puts[2:]] == [("their response lost", 412), (None, 412)]
    assert moto.objects(bucket) == {f"{bucket}/run/{name}": ours}

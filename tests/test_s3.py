"""Object storage: credentials, exclusive commits, safe publishing, the model cache, and a whole run
whose input, ground truth, model, adapter and outputs all live in S3.

S3 here is moto's standalone server on a loopback port (tests/s3server.py), reached over HTTP by
s3fs exactly as production reaches S3.
"""

from __future__ import annotations

import contextvars
import io
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import InputError, ModelError
from scorekeeper.storage import Location, StorageAccess, child_environment, fs_and_path, is_local, use_storage_access
from scorekeeper.tasks import fetch
from scorekeeper.tasks.credentials import _secret_fields, access_from_fields
from tests import prefect_session
from tests.helpers import LABELS, make_rows, probabilities, reference_probabilities
from tests.s3server import AWS_VARIABLES, moto  # noqa: F401  (moto is a fixture)

SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))


# -- credentials: pure ---------------------------------------------------------------------------


def test_aws_credentials_block_becomes_s3fs_options_and_worker_environment():
    access = access_from_fields(
        {
            "aws_access_key_id": "AKIAEXAMPLE",
            "aws_secret_access_key": "wJalr-secret",
            "aws_session_token": None,
            "profile_name": None,
            "region_name": "eu-west-1",
            "aws_client_parameters": {"endpoint_url": "http://minio.internal:9000", "verify": True, "use_ssl": True},
        },
        "'aws-credentials/prod'",
    )
    assert access.s3_options == {
        "key": "AKIAEXAMPLE",
        "secret": "wJalr-secret",
        "client_kwargs": {"endpoint_url": "http://minio.internal:9000", "region_name": "eu-west-1"},
    }
    assert access.environment == {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalr-secret",
        "AWS_SESSION_TOKEN": "",  # an inherited token must not pair with the block's keys
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL_S3": "http://minio.internal:9000",
    }
    assert "wJalr" not in repr(access) and "wJalr" not in str(access) and "aws-credentials/prod" in repr(access)


def test_secret_block_takes_a_json_object_and_never_echoes_a_value():
    fields = _secret_fields(
        {"value": json.dumps({"AWS_ACCESS_KEY_ID": "A1", "AWS_SECRET_ACCESS_KEY": "B2", "AWS_ENDPOINT_URL_S3": "http://ceph:7480"})},
        "'secret/ceph'",
    )
    access = access_from_fields(fields, "'secret/ceph'")
    assert access.s3_options == {"key": "A1", "secret": "B2", "client_kwargs": {"endpoint_url": "http://ceph:7480"}}
    with pytest.raises(InputError) as plain:
        _secret_fields({"value": "plain-secret-string"}, "'secret/x'")
    with pytest.raises(InputError) as half:
        access_from_fields({"aws_secret_access_key": "half-secret"}, "'secret/x'")
    with pytest.raises(InputError) as empty:
        access_from_fields({"password": "unrelated-secret"}, "'secret/x'")
    for error, secret in ((plain, "plain-secret-string"), (half, "half-secret"), (empty, "unrelated-secret")):
        assert secret not in str(error.value) and "secret/x" in str(error.value)


def test_storage_access_reaches_every_filesystem_and_task_thread_in_its_scope(tmp_path):
    access = StorageAccess(
        "test", {"key": "k1", "secret": "s1", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}, {"AWS_ACCESS_KEY_ID": "k1"}
    )
    outside, _ = fs_and_path("s3://bucket/x")
    with use_storage_access(access):
        inside, path = fs_and_path("s3://bucket/x")
        assert path == "bucket/x" and inside.key == "k1" and inside.secret == "s1"
        assert inside.client_kwargs["endpoint_url"] == "http://127.0.0.1:9"
        assert not inside.dircache.use_listings_cache  # other processes write into folders we list
        assert is_local(fs_and_path(str(tmp_path))[0])
        assert child_environment() == {"AWS_ACCESS_KEY_ID": "k1"}
        # Prefect runs submitted tasks in threads with a copy of the flow's context.
        with ThreadPoolExecutor(1) as pool:
            in_thread = pool.submit(contextvars.copy_context().run, lambda: fs_and_path("s3://bucket/y")[0]).result()
        assert in_thread is inside  # same options, same cached filesystem
    assert outside is not inside and outside.key is None
    assert child_environment() == {}


# -- object storage semantics, against the moto server -----------------------------------------


@pytest.mark.integration
def test_standard_aws_chain_finds_a_profile_and_the_generic_endpoint_variable(moto, tmp_path, monkeypatch):
    bucket = moto.create_bucket()
    moto.filesystem().pipe_file(f"{bucket}/hello.txt", b"hello")
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[scoring]\naws_access_key_id = {moto.key}\naws_secret_access_key = {moto.secret}\n")
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # skip_instance_cache: a filesystem made earlier in this process holds the environment of then.
    with pytest.raises(Exception, match="(?i)credentials"):
        fs, path = fs_and_path(f"s3://{bucket}/hello.txt", skip_instance_cache=True)
        fs.cat_file(path)
    monkeypatch.setenv("AWS_PROFILE", "scoring")
    fs, path = fs_and_path(f"s3://{bucket}/hello.txt", skip_instance_cache=True)
    assert fs.cat_file(path) == b"hello"


@pytest.mark.integration
def test_create_exclusive_on_s3_has_one_winner_and_survives_a_retried_put(moto):
    run = Location.from_uri(f"s3://{moto.create_bucket()}/run", **moto.storage_options())
    assert run.create_exclusive(b"first", "work/commits/range-0000000.json")
    assert not run.create_exclusive(b"second", "work/commits/range-0000000.json")
    assert run.read_bytes("work/commits/range-0000000.json") == b"first"
    # A PUT whose response was lost is retried and meets 412: the object holds our bytes, so it is ours.
    assert run.create_exclusive(b"first", "work/commits/range-0000000.json")

    barrier = threading.Barrier(8)

    def racer(i: int) -> bool:
        barrier.wait()
        return run.create_exclusive(f"writer {i}".encode(), "work/commits/range-0000001.json")

    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(racer, range(8)))
    assert won.count(True) == 1
    assert run.read_bytes("work/commits/range-0000001.json") == f"writer {won.index(True)}".encode()


@pytest.mark.integration
def test_publishing_to_s3_leaves_only_whole_files_and_listings_see_other_writers(moto, tmp_path):
    bucket = moto.create_bucket()
    run = Location.from_uri(f"s3://{bucket}/run", **moto.storage_options())
    assert run.list_names("work/commits") == []
    run.publish_json({"a": 1}, "report/metrics.json")
    local = tmp_path / "p.parquet"
    pq.write_table(pa.table({"row_index": np.arange(1000)}), local)
    run.publish_local_file(str(local), "predictions.parquet")
    run.publish_json({"a": 2}, "report/metrics.json")  # a rerun replaces it in one PUT
    assert run.read_json("report/metrics.json") == {"a": 2}
    assert pq.read_table(io.BytesIO(run.read_bytes("predictions.parquet"))).num_rows == 1000
    assert sorted(moto.objects(bucket)) == [f"{bucket}/run/predictions.parquet", f"{bucket}/run/report/metrics.json"]
    # Another process (here: another client) commits a range; the next listing must show it.
    moto.filesystem().pipe_file(f"{bucket}/run/work/commits/range-0000000.json", b"{}")
    assert run.list_names("work/commits") == ["range-0000000.json"]


class _CountingFilesystem:
    """Passes everything through to a filesystem and counts its downloads."""

    def __init__(self, fs, counter: list[int]):
        self._fs, self._counter = fs, counter

    def get(self, rpaths, lpaths, **kwargs):
        self._counter.append(len(rpaths))
        return self._fs.get(rpaths, lpaths, **kwargs)

    def __getattr__(self, name):
        return getattr(self._fs, name)


@pytest.mark.integration
def test_model_folders_are_fetched_once_per_content(moto, models, tmp_path, monkeypatch):
    monkeypatch.setenv("SCOREKEEPER_CACHE", str(tmp_path / "cache"))
    downloads: list[int] = []
    real = fetch.fs_and_path
    monkeypatch.setattr(fetch, "fs_and_path", lambda uri: (lambda fs, p: (_CountingFilesystem(fs, downloads), p))(*real(uri)))
    bucket = moto.create_bucket()
    uri = moto.upload_folder(models["bert_adapter"], f"s3://{bucket}/adapters/lora/")
    moto.filesystem().pipe_file(f"{bucket}/adapters/lora/", b"")  # the "folder" marker consoles create
    access = StorageAccess("test", moto.storage_options())
    with use_storage_access(access):
        first = fetch.fetch_to_cache(uri, "adapter")
        assert sorted(os.listdir(first)) == sorted(os.listdir(models["bert_adapter"]))
        for name in os.listdir(first):
            assert Path(first, name).read_bytes() == Path(models["bert_adapter"], name).read_bytes()
        assert fetch.fetch_to_cache(uri.rstrip("/"), "adapter") == first  # same content: no download
        assert len(downloads) == 1
        moto.filesystem().pipe_file(f"{bucket}/adapters/lora/README.md", b"changed")
        second = fetch.fetch_to_cache(uri, "adapter")
        assert second != first and Path(second, "README.md").read_bytes() == b"changed" and len(downloads) == 2
        assert sorted(os.listdir(Path(first).parent)) == sorted([Path(first).name, Path(second).name])  # no staging left
        with pytest.raises(ModelError, match="must name a folder"):
            fetch.fetch_to_cache(uri + "README.md", "adapter")
        with pytest.raises(ModelError, match="not found"):
            fetch.fetch_to_cache(f"s3://{bucket}/adapters/nothing", "adapter")


# -- a whole run in S3 -----------------------------------------------------------------------------


@pytest.mark.integration
def test_cli_run_with_everything_in_s3_through_the_standard_aws_chain(moto, models, tmp_path):
    bucket = moto.create_bucket("run")
    fs = moto.filesystem()
    rows = make_rows(17, seed=5)
    # Input in two CSV files (read in path order), ground truth in a separate Parquet file.
    for name, part in (("part-1.csv", rows[:9]), ("part-2.csv", rows[9:])):
        text = "review_id,text\n" + "".join(f'{r["review_id"]},"{r["text"]}"\n' for r in part)
        fs.pipe_file(f"{bucket}/eval/input/{name}", text.encode())
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"review_id": r["review_id"], "label": r["label"]} for r in rows[::-1]]), sink)
    fs.pipe_file(f"{bucket}/eval/truth.parquet", sink.getvalue())
    model_uri = moto.upload_folder(models["bert"], f"s3://{bucket}/models/bert")
    adapter_uri = moto.upload_folder(models["bert_adapter"], f"s3://{bucket}/models/lora")

    env = prefect_session.cli_environment(
        moto.environment() | {"PREFECT_HOME": str(tmp_path / "prefect"), "SCOREKEEPER_CACHE": str(tmp_path / "cache")}
    )
    out = subprocess.run(
        [
            SCOREKEEPER, "run",
            "--input-uri", f"s3://{bucket}/eval/input/",
            "--id-column", "review_id",
            "--ground-truth-uri", f"s3://{bucket}/eval/truth.parquet",
            "--model-uri", model_uri,
            "--adapter-uri", adapter_uri,
            "--output-uri", f"s3://{bucket}/runs",
            "--run-name", "nightly-1",
            "--num-processes", "1",  # two ranks reading and committing in S3: test_s3_faults.py's transient run
            "--rows-per-range", "5",
        ],
        env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"s3://{bucket}/runs/nightly-1" in out.stdout

    run = f"{bucket}/runs/nightly-1"
    table = pq.read_table(io.BytesIO(fs.cat_file(f"{run}/predictions.parquet")))
    assert table.column("row_index").to_pylist() == list(range(17))
    assert table.column("id").to_pylist() == [r["review_id"] for r in rows]
    expected = reference_probabilities(models["bert"], [r["text"] for r in rows], adapter_dir=models["bert_adapter"])
    assert np.abs(probabilities(table) - expected).max() < 1e-4
    assert table.column("predicted_label").to_pylist() == [LABELS[i] for i in expected.argmax(axis=1)]
    metrics = json.loads(fs.cat_file(f"{run}/report/metrics.json"))
    assert metrics["rows"] == metrics["scored"] == metrics["evaluated"] == 17
    assert metrics["ground_truth_source"] == "ground_truth_uri" and metrics["missing_predictions"] == 0
    assert {"report.md", "report.html"} <= {p.rsplit("/", 1)[1] for p in fs.ls(f"{run}/report")}

    # Model and adapter were fetched once into the cache, by content.
    assert [len(os.listdir(tmp_path / "cache" / what)) for what in ("model", "adapter")] == [1, 1]
    # DuckDB read S3 through fsspec: its httpfs extension is not even installed.
    import duckdb

    assert not duckdb.execute("SELECT installed FROM duckdb_extensions() WHERE extension_name = 'httpfs'").fetchone()[0]
    # No credential anywhere: not in any object written, not in what the command printed.
    leaked = {path: moto.credentials_in(data) for path, data in moto.objects(bucket).items()}
    assert not {path: found for path, found in leaked.items() if found}
    assert not moto.credentials_in(out.stdout + out.stderr)
    assert json.loads(fs.cat_file(f"{run}/request.json"))["storage_block"] is None

"""No secret reaches Prefect or the terminal: a URI's credentials (a password, a signed URL's
signature and token) never become a flow-run parameter, a state message, a log line or an
artifact. The CLI hands them to its flow run out of band; a flow run given them is refused.

The integration test runs `scorekeeper run` against the session's Prefect API server
(tests/prefect_session.py) and reads every one of its flow runs' parameters, state messages, task
runs' state messages, logs and artifacts back through the API.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scorekeeper.errors import InputError
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import CREDENTIAL_PARAMETERS, RedactingFilter, has_secret, is_redacted, redact_text, redact_uri
from scorekeeper.tasks.credentials import hand_over_uris, handed_uris, with_handed_uris
from tests import prefect_session
from tests.helpers import basic_auth_server, make_rows, write_rows
from tests.waiting import poll

SCOREKEEPER = str(Path(sys.executable).with_name("scorekeeper"))
PASSWORD = "pa55-W0rd-s3cret"
SIGNATURE = "f00dfacecafe0123456789sig"
TOKEN = "FwoGZXIvYXdzEXAMPLETOKEN"
SECRETS = (PASSWORD, SIGNATURE, TOKEN)


def _presigned(base: str) -> str:
    return (
        f"{base}/eval/data.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261201%2Fus-east-1"
        f"&X-Amz-Date=20261201T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token={TOKEN}&X-Amz-Signature={SIGNATURE}"
    )


# -- redaction: one rule, every spelling ------------------------------------------------------------


def test_credential_query_values_are_redacted_case_insensitively_and_others_kept():
    uri = _presigned("https://bucket.s3.example.com")
    redacted = redact_uri(uri)
    assert not any(s in redacted for s in SECRETS) and "AKIAEXAMPLE" not in redacted
    assert "X-Amz-Date=20261201T000000Z" in redacted and "X-Amz-Expires=3600" in redacted  # not credentials
    assert redacted.count("=***") == 3 and has_secret(uri) and not has_secret(redacted) and is_redacted(redacted)
    for name in CREDENTIAL_PARAMETERS:
        for spelling in (name, name.upper(), name.title()):
            text = f"failed: https://h/x?a=1&{spelling}=S3CR3T&b=2 (404)"
            assert redact_text(text) == f"failed: https://h/x?a=1&{spelling}=***&b=2 (404)", spelling
    assert redact_text("https://h/x?sig=abc") == "https://h/x?sig=***"  # Azure SAS
    assert redact_text("https://h/x?design=1&tokens=5") == "https://h/x?design=1&tokens=5"  # whole names only
    assert not is_redacted("s3://bucket/runs") and is_redacted("s3://***@bucket/runs")


def test_error_messages_and_log_lines_are_redacted():
    uri = "http://reader:" + PASSWORD + "@h/x.csv?token=" + TOKEN
    assert not any(s in str(InputError(f"input not found: {uri}")) for s in SECRETS)
    record = logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "could not open %s", (uri,), None)
    try:
        raise FileNotFoundError(uri)
    except FileNotFoundError:
        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    text = logging.Formatter().format(record)
    assert "FileNotFoundError" in text and "http://***@h/x.csv?token=***" in text
    assert not any(s in text for s in SECRETS)


def test_the_cli_hands_credentials_out_of_band_and_the_flow_refuses_them_in_parameters(tmp_path):
    secret_input = f"http://reader:{PASSWORD}@127.0.0.1:1/in.csv"
    options = {"input_uri": secret_input, "model_uri": str(tmp_path), "output_uri": str(tmp_path / "out")}
    parameters, handed = hand_over_uris(options)
    assert parameters["input_uri"] == "http://***@127.0.0.1:1/in.csv" and handed == {"input_uri": secret_input}
    assert parameters["model_uri"] == options["model_uri"]
    with handed_uris(handed):
        assert with_handed_uris(ScoreRequest(**parameters)).input_uri == secret_input
        with pytest.raises(InputError, match="cannot be handed to the group machines"):
            with_handed_uris(ScoreRequest(**parameters, fan_out=2))
    # A flow run given the URI itself (a deployment run): its parameters are in Prefect already.
    with pytest.raises(InputError, match="carries credentials in the URI") as given:
        with_handed_uris(ScoreRequest(**options))
    assert PASSWORD not in str(given.value) and "storage_block" in str(given.value) and "scorekeeper run" in str(given.value)
    # A redacted URI this process was not handed (a retry from the UI of a CLI run).
    with pytest.raises(InputError, match="was not handed the URI") as retried:
        with_handed_uris(ScoreRequest(**parameters))
    assert PASSWORD not in str(retried.value)


def test_every_task_of_the_flow_raises_its_errors_redacted():
    import importlib
    import pkgutil

    from prefect import Task

    import scorekeeper.tasks

    found = {}
    for module in pkgutil.iter_modules(scorekeeper.tasks.__path__):
        found |= {t.name: t for t in vars(importlib.import_module(f"scorekeeper.tasks.{module.name}")).values() if isinstance(t, Task)}
    assert len(found) >= 13 and "read inputs" in found and "score ranges" in found
    assert [name for name, t in found.items() if not getattr(t.fn, "raises_redacted", False)] == []


@pytest.mark.integration  # a Prefect API server
def test_a_task_failing_with_a_foreign_error_quoting_a_secret_uri_has_a_redacted_state_message(prefect_api):
    """What Prefect stores of a task that fails with a library's error naming the signed URL."""
    from prefect import flow, get_client, task
    from prefect.exceptions import ObjectNotFound

    from scorekeeper.redact import raises_redacted

    @task(name="reads a signed url", retries=1, retry_delay_seconds=0, retry_condition_fn=lambda t, r, s: True)
    @raises_redacted
    def read_signed():
        raise ConnectionResetError(f"connection reset reading {_presigned('https://bucket.example.com')}")

    @flow(name="foreign error")
    def run():
        return read_signed(return_state=True).state_details.task_run_id

    task_run_id = run()
    with get_client(sync_client=True) as client:  # the server records task runs from their events: a moment later

        def recorded():
            try:
                found = client.read_task_run(task_run_id)
            except ObjectNotFound:
                return None
            return found if found.state and found.state.is_final() else None

        stored = poll(recorded, timeout=30)
    message = stored.state.message or ""
    assert stored.state.is_failed() and "X-Amz-Signature=***" in message and not any(s in message for s in SECRETS)
    assert stored.run_count == 2  # still retried: the redacted error is an OSError like the original
    with pytest.raises(ConnectionResetError) as raised:
        read_signed.fn()
    assert isinstance(raised.value.__cause__, ConnectionResetError) and SIGNATURE not in str(raised.value)


# -- against a real Prefect server ------------------------------------------------------------------


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    with basic_auth_server(folder, "reader", PASSWORD, signature=SIGNATURE) as host:
        yield folder, host


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = prefect_session.cli_environment()
    return subprocess.run([SCOREKEEPER, "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _stored_by_prefect(output_uri: str, since: datetime) -> list[tuple[str, str]]:
    """Every flow run's parameters and state message, its task runs' state messages, its logs and
    artifacts, as the API returns them: of the flow runs created since `since` and writing to
    `output_uri` (this test's; the session's server serves other tests too)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterStartTime,
        LogFilter,
        LogFilterFlowRunId,
    )

    with prefect_session.api(), get_client(sync_client=True) as client:
        recent = client.read_flow_runs(flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=since)))
        flow_runs = [r for r in recent if (r.parameters or {}).get("output_uri") == output_uri]
        ids = [r.id for r in flow_runs]
        stored = []
        for flow_run in flow_runs:
            stored.append((f"flow run {flow_run.name} parameters", json.dumps(flow_run.parameters)))
            stored.append((f"flow run {flow_run.name} state", f"{flow_run.state.name}: {flow_run.state.message}"))
        for task_run in client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids))):
            stored.append((f"task run {task_run.name} state", str(task_run.state.message if task_run.state else "")))
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)))
        stored += [("log", log.message) for log in logs]
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=ids)))
        stored += [(f"artifact {a.key}", json.dumps(a.data, default=str)) for a in artifacts]
    assert logs and artifacts, (len(logs), len(artifacts))  # what is checked below is there to check
    return stored


@pytest.mark.integration
def test_no_secret_of_a_uri_reaches_the_prefect_server_or_the_terminal(tmp_path, models, served):
    folder, host = served
    since = datetime.now(UTC) - timedelta(seconds=1)
    write_rows(folder / "in.csv", make_rows(6))
    (folder / "eval").mkdir()
    write_rows(folder / "eval" / "data.csv", make_rows(5))
    common = ["--model-uri", models["bert"], "--output-uri", str(tmp_path / "out"), "--num-processes", "1"]
    # Read with its password: the run works, and Prefect holds the redacted URI only.
    done = _cli(tmp_path, "--input-uri", f"http://reader:{PASSWORD}@{host}/in.csv", "--run-name", "ok", *common)
    assert done.returncode == 0, done.stderr[-3000:]
    # A presigned URL is one file (its `?` starts the query, not a glob), named by its path's suffix.
    signed = _cli(tmp_path, "--input-uri", _presigned(f"http://{host}"), "--run-name", "signed", *common)
    assert signed.returncode == 0 and "scored 5 rows" in signed.stdout, signed.stderr[-3000:]
    # A signed URL that fails: the error names it, redacted, on the terminal and in the state message.
    missing = _presigned(f"http://{host}/missing")
    failed = _cli(tmp_path, "--input-uri", missing, "--run-name", "missing", *common)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr, failed.stderr[-3000:]
    assert "X-Amz-Signature=***" in failed.stderr
    for text in (done.stdout, done.stderr, signed.stdout, signed.stderr, failed.stdout, failed.stderr):
        assert not any(s in text for s in SECRETS), text[-3000:]

    stored = _stored_by_prefect(str(tmp_path / "out"), since)
    parameters = [json.loads(text) for what, text in stored if what.endswith("parameters")]
    # The missing file is refused by the CLI's input check before any flow run starts (precheck.py):
    # Prefect never holds it. A task's state message quoting a secret URI is redacted:
    # test_a_task_failing_with_a_foreign_error_quoting_a_secret_uri_has_a_redacted_state_message.
    assert {p["input_uri"] for p in parameters} == {f"http://***@{host}/in.csv", redact_uri(_presigned(f"http://{host}"))}
    leaked = [(what, text) for what, text in stored if any(s in text for s in SECRETS)]
    assert not leaked
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert files and not [p for p in files if any(s.encode() in p.read_bytes() for s in SECRETS)]

    # The same flow run given the password itself (as a deployment run would be) is refused.
    from scorekeeper.flows.score import score_dataset

    with prefect_session.api(), pytest.raises(InputError) as refused:
        score_dataset(input_uri=f"http://reader:{PASSWORD}@{host}/in.csv", model_uri=models["bert"], output_uri=str(tmp_path / "out"))
    assert "carries credentials" in str(refused.value) and PASSWORD not in str(refused.value)

"""Publishing a run's report so that a run is complete when, and only when, its completion record
(complete.json, run_folder.CompletionRecord) is written, last and atomically.

The record is withdrawn before anything is published again, the report files are written
(metrics.json last), and only then the record, which also seals predictions.parquet, plan.json
and request.json as they are (scorekeeper/run_seal.py), so that a later run can tell they are the
files the run completed with. A failure on the way (a full disk under output_uri, a missing
bucket) removes what this attempt wrote and says so in one line: no file that looks complete is
left behind, and history and `compare_to` do not see the run.

metrics.json's bytes come from its one writer (MetricsDocument.to_json_bytes: strict JSON).
"""

from __future__ import annotations

import hashlib
import posixpath

from scorekeeper.errors import OutputError, storage_failure
from scorekeeper.run_folder import CompletionRecord, RunFolder
from scorekeeper.run_seal import seal_outputs


def publish_complete(run: RunFolder, files: dict[str, bytes], finished_at: str) -> dict[str, str]:
    """Publish the report files under report/ in the order given, then the completion record.
    Returns each file's URI."""
    report = run.child(RunFolder.REPORT_DIR)
    writing = RunFolder.COMPLETION
    try:
        run.remove(RunFolder.COMPLETION)  # republishing: not complete until the record is written again
        run.remove(RunFolder.REPORT_DIR)  # nothing of an earlier attempt's report is left to look current
        for name, data in files.items():
            writing = f"{RunFolder.REPORT_DIR}/{name}"
            run.publish_bytes(data, RunFolder.REPORT_DIR, name)
        writing = RunFolder.COMPLETION
        record = CompletionRecord(
            run_id=posixpath.basename(run.path),
            finished_at=finished_at,
            files={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
            outputs=seal_outputs(run),
        )
        run.publish_bytes(record.to_bytes(), RunFolder.COMPLETION)
    except OSError as exc:
        reason = storage_failure(exc)
        if reason is None:
            raise  # transient: the task's retry publishes everything again
        _remove_quietly(run, RunFolder.REPORT_DIR)
        raise OutputError(
            f"could not publish the report of run {record_name(run)} ({writing}): {reason}; nothing of the report was left "
            "behind and the run is not complete: make room under output_uri and rerun with the same run_name "
            "(committed ranges are not scored again)"
        ) from None
    return {name: report.uri + "/" + name for name in files}


def record_name(run: RunFolder) -> str:
    return posixpath.basename(run.path)


def _remove_quietly(run: RunFolder, name: str) -> None:
    try:
        run.remove(name)
    except OSError:
        pass

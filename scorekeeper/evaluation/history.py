"""The completed runs under output_uri: metrics.json's `history`, and the runs `compare_to` may name.

A run is complete when, and only when, its completion record (complete.json, scorekeeper/report/publish.py)
exists and vouches for its metrics.json (the sha256 it holds): a metrics.json that a failure while
publishing left behind is not a completed run. The output folder is listed once and the runs'
records, metrics.json and plan.json are fetched in one batch each (concurrently on object storage).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath

from scorekeeper.metrics.document import HistoryEntry, MetricsDocument, RecordedMetrics, history_entry
from scorekeeper.run_folder import CompletionRecord, RunFolder
from scorekeeper.storage import Location

log = logging.getLogger(__name__)


def completed_runs(output: Location) -> list[dict]:
    """One record per completed run under `output`, oldest first: its line in the history (a
    HistoryEntry's fields) plus `input_files` (the fingerprints of the files it read, in order)."""
    fs = output.fs
    fs.invalidate_cache(output.path)  # other runs finish while this one works
    try:
        entries = fs.ls(output.path, detail=True)
    except FileNotFoundError:
        return []
    folders = {posixpath.basename(e["name"].rstrip("/")): e["name"].rstrip("/") for e in entries if e.get("type") == "directory"}
    completions = _fetch(fs, {run_id: posixpath.join(path, RunFolder.COMPLETION) for run_id, path in folders.items()})
    raw = _fetch_raw(fs, {run_id: posixpath.join(folders[run_id], RunFolder.METRICS) for run_id in completions})
    metrics = {run_id: json.loads(data) for run_id, data in raw.items() if _vouched(run_id, completions[run_id], data)}
    plans = _fetch(fs, {run_id: posixpath.join(folders[run_id], RunFolder.PLAN) for run_id in metrics})
    records = []
    for run_id, data in metrics.items():
        recorded = RecordedMetrics.parse(data)
        if recorded is None:
            log.warning("ignoring run %s: its %s is not a metrics document", run_id, RunFolder.METRICS)
            continue
        plan = plans.get(run_id) or {}
        if recorded.finished_at is None:
            recorded.finished_at = completions[run_id].get("finished_at")
        entry = history_entry(run_id, recorded, plan).record()
        records.append(entry | {"input_files": [f.get("fingerprint") for f in plan.get("files", [])] if plan else None})
    return sorted(records, key=lambda r: (r["finished_at"] or "", r["run_id"]))


def run_history(output: Location, run_id: str, metrics: MetricsDocument, plan: dict) -> list[HistoryEntry]:
    """metrics.json's `history`: the completed runs under output_uri, oldest first, this run last."""
    earlier = [HistoryEntry.model_validate(_without(r, "input_files")) for r in completed_runs(output) if r["run_id"] != run_id]
    return earlier + [history_entry(run_id, metrics, plan)]


def _without(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


def is_complete(run: RunFolder) -> bool:
    """Whether the run completed: its completion record exists and vouches for its metrics.json."""
    record = run.read_completion()
    if record is None:
        return False
    try:
        return _vouched(record.run_id, record.model_dump(), run.read_bytes(RunFolder.METRICS))
    except FileNotFoundError:
        return False


def _vouched(run_id: str, record: dict, metrics: bytes) -> bool:
    try:
        files = CompletionRecord.model_validate(record).files
    except ValueError:
        log.warning("ignoring run %s: its %s is not a completion record", run_id, RunFolder.COMPLETION)
        return False
    if files.get("metrics.json") != hashlib.sha256(metrics).hexdigest():
        log.warning("ignoring run %s: its metrics.json is not the one its completion record vouches for", run_id)
        return False
    return True


def _fetch(fs, paths: dict[str, str]) -> dict[str, dict]:
    """{run_id: parsed JSON} of the files that exist; one batched read."""
    parsed = {}
    for run_id, data in _fetch_raw(fs, paths).items():
        try:
            parsed[run_id] = json.loads(data)
        except ValueError:
            log.warning("ignoring run %s: %s is not valid JSON", run_id, paths[run_id])
    return parsed


def _fetch_raw(fs, paths: dict[str, str]) -> dict[str, bytes]:
    """{run_id: bytes} of the files that exist; one batched read."""
    if not paths:
        return {}
    by_path = {_key(fs, p): run_id for run_id, p in paths.items()}
    found = fs.cat(list(paths.values()), on_error="omit")
    return {by_path[_key(fs, p)]: data for p, data in found.items() if _key(fs, p) in by_path and not isinstance(data, BaseException)}


def _key(fs, path: str) -> str:
    return fs._strip_protocol(path).rstrip("/")

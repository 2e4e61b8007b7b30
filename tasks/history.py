"""The completed runs under output_uri: metrics.json's `history`, and the runs `compare_to` may name.

A run is complete when its report/metrics.json exists. The output folder is listed once and the
runs' metrics.json and plan.json are fetched in one batch each (concurrently on object storage).
"""

from __future__ import annotations

import json
import logging
import posixpath
from datetime import UTC, datetime

from scorekeeper.metrics.document import HistoryEntry, MetricsDocument, RecordedMetrics, history_entry
from scorekeeper.run_folder import RunFolder
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
    metrics = _fetch(fs, {run_id: posixpath.join(path, RunFolder.METRICS) for run_id, path in folders.items()})
    plans = _fetch(fs, {run_id: posixpath.join(folders[run_id], RunFolder.PLAN) for run_id in metrics})
    records = []
    for run_id, data in metrics.items():
        recorded = RecordedMetrics.parse(data)
        if recorded is None:
            log.warning("ignoring run %s: its %s is not a metrics document", run_id, RunFolder.METRICS)
            continue
        plan = plans.get(run_id) or {}
        if recorded.finished_at is None:
            recorded.finished_at = _modified(fs, posixpath.join(folders[run_id], RunFolder.METRICS))
        entry = history_entry(run_id, recorded, plan).model_dump()
        records.append(entry | {"input_files": [f.get("fingerprint") for f in plan.get("files", [])] if plan else None})
    return sorted(records, key=lambda r: (r["finished_at"] or "", r["run_id"]))


def run_history(output: Location, run_id: str, metrics: MetricsDocument, plan: dict) -> list[HistoryEntry]:
    """metrics.json's `history`: the completed runs under output_uri, oldest first, this run last."""
    earlier = [HistoryEntry.model_validate(_without(r, "input_files")) for r in completed_runs(output) if r["run_id"] != run_id]
    return earlier + [history_entry(run_id, metrics, plan)]


def _without(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


def _fetch(fs, paths: dict[str, str]) -> dict[str, dict]:
    """{run_id: parsed JSON} of the files that exist; one batched read."""
    if not paths:
        return {}
    by_path = {_key(fs, p): run_id for run_id, p in paths.items()}
    found = fs.cat(list(paths.values()), on_error="omit")
    parsed = {}
    for path, data in found.items():
        run_id = by_path.get(_key(fs, path))
        if run_id is None or isinstance(data, BaseException):
            continue
        try:
            parsed[run_id] = json.loads(data)
        except ValueError:
            log.warning("ignoring run %s: %s is not valid JSON", run_id, path)
    return parsed


def _key(fs, path: str) -> str:
    return fs._strip_protocol(path).rstrip("/")


def _modified(fs, path: str) -> str | None:
    """A file's modification time (ISO 8601, UTC), for runs written before metrics.json had finished_at."""
    info = fs.info(path)
    value = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds") if isinstance(value, datetime) else None

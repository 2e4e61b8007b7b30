"""The completed runs under output_uri: metrics.json's `history`, and the runs `compare_to` may name.

A run is complete when, and only when, its completion record (complete.json, scorekeeper/report/publish.py)
exists, and the history takes a completed run only when the record vouches for what the history
reads of it (its metrics.json and plan.json, scorekeeper/run_seal.py): a metrics.json that a
failure while publishing left behind is not a completed run, and a run whose files changed after
it completed is left out, in metrics.json's `history_left_out` with the reason. The output folder
is listed once and the runs' records, metrics.json and plan.json are fetched in one batch each
(concurrently on object storage).
"""

from __future__ import annotations

import json
import logging
import posixpath

from pydantic import ValidationError

from scorekeeper.errors import InputError
from scorekeeper.head_kind import DEFAULT_HEAD, HeadKind
from scorekeeper.metrics.document import HistoryEntry, LeftOutRun, MetricsDocument, RecordedMetrics, history_entry
from scorekeeper.run_folder import CompletionRecord, RunFolder
from scorekeeper.run_seal import HISTORY, bytes_reason, unverified_reason
from scorekeeper.storage import Location

log = logging.getLogger(__name__)


def completed_runs(output: Location) -> list[dict]:
    """One record per completed run under `output` that vouches for its files, oldest first: its
    line in the history (a HistoryEntry's fields) plus `input_files` (the fingerprints of the files
    it read, in order) and `input_template` (the dated input_uri template it was filled from, or None)."""
    return scan_runs(output)[0]


def previous_run(output: Location, run_id: str, parameter: str, matches, matching: str) -> dict:
    """`previous` of `parameter` (compare_to, drift_reference): the latest completed run under
    `output` other than `run_id` whose record `matches`; refused when none does, `matching` saying in
    words what the runs were asked to share."""
    runs = [r for r in completed_runs(output) if r["run_id"] != run_id]
    same = [r for r in runs if matches(r)]
    if not same:
        raise InputError(
            f"{parameter} 'previous': no completed run under {output.uri} {matching} "
            f"({len(runs)} other completed run(s) there); run once without {parameter}, or name a run"
        )
    return same[-1]  # oldest first: the last is the latest


def refuse_other_head(output: Location, name: str, head: HeadKind, parameter: str, advice: str) -> None:
    """Refuse `parameter`'s run `name` when it scored another kind of head than this run's `head`."""
    other_head = output.child(name).read_json(RunFolder.METRICS).get("head", DEFAULT_HEAD)
    if other_head != head:
        raise InputError(f"{parameter}: run {name!r} scored a {other_head} head and this run a {head} head; {advice}")


def scan_runs(output: Location) -> tuple[list[dict], list[LeftOutRun]]:
    """(completed_runs, the completed runs left out and why, by run id)."""
    fs = output.fs
    fs.invalidate_cache(output.path)  # other runs finish while this one works
    try:
        entries = fs.ls(output.path, detail=True)
    except FileNotFoundError:
        return [], []
    folders = {posixpath.basename(e["name"].rstrip("/")): e["name"].rstrip("/") for e in entries if e.get("type") == "directory"}
    raw_records = _fetch_raw(fs, {run_id: posixpath.join(path, RunFolder.COMPLETION) for run_id, path in folders.items()})
    left_out: list[LeftOutRun] = []

    def leave_out(run_id: str, reason: str) -> None:
        log.warning("ignoring run %s: %s", run_id, reason)
        left_out.append(LeftOutRun(run_id=run_id, reason=reason))

    completions: dict[str, CompletionRecord] = {}
    for run_id, data in raw_records.items():
        try:
            completions[run_id] = CompletionRecord.model_validate_json(data)
        except ValidationError:
            leave_out(run_id, f"its {RunFolder.COMPLETION} is not a completion record")
    raw = {name: _fetch_raw(fs, {run_id: posixpath.join(folders[run_id], name) for run_id in completions}) for name in HISTORY}
    records = []
    for run_id, completion in completions.items():
        problem = bytes_reason(completion, {name: raw[name].get(run_id) for name in HISTORY}, optional=(RunFolder.PLAN,))
        if problem is not None:
            leave_out(run_id, problem)
            continue
        try:
            recorded = RecordedMetrics.parse(json.loads(raw[RunFolder.METRICS][run_id]))
            plan = json.loads(raw[RunFolder.PLAN][run_id]) if run_id in raw[RunFolder.PLAN] else {}
        except ValueError:
            recorded = None
        if recorded is None:
            leave_out(run_id, f"its {RunFolder.METRICS} or {RunFolder.PLAN} is not a document this version reads")
            continue
        if recorded.finished_at is None:
            recorded.finished_at = completion.finished_at
        entry = history_entry(run_id, recorded, plan).record()
        records.append(
            entry
            | {
                "input_files": [f.get("fingerprint") for f in plan.get("files", [])] if plan else None,
                "input_template": plan.get("input_template"),
            }
        )
    return sorted(records, key=lambda r: (r["finished_at"] or "", r["run_id"])), sorted(left_out, key=lambda r: r.run_id)


def run_history(output: Location, run_id: str, metrics: MetricsDocument | RecordedMetrics, plan: dict) -> list[HistoryEntry]:
    """metrics.json's `history`: the completed runs under output_uri, oldest first, this run last."""
    return history_and_left_out(output, run_id, metrics, plan)[0]


def history_and_left_out(
    output: Location, run_id: str, metrics: MetricsDocument | RecordedMetrics, plan: dict
) -> tuple[list[HistoryEntry], list[LeftOutRun]]:
    """metrics.json's `history` and `history_left_out` (the completed runs whose files are not the
    ones they vouch for, with the reason), from one listing."""
    runs, left_out = scan_runs(output)
    earlier = [HistoryEntry.model_validate(_without(r, "input_files", "input_template")) for r in runs if r["run_id"] != run_id]
    return earlier + [history_entry(run_id, metrics, plan)], [r for r in left_out if r.run_id != run_id]


def _without(record: dict, *keys: str) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def is_complete(run: RunFolder) -> bool:
    """Whether the run completed and vouches for its metrics.json as it is now."""
    return unverified_reason(run, (RunFolder.METRICS,)) is None


def _fetch_raw(fs, paths: dict[str, str]) -> dict[str, bytes]:
    """{run_id: bytes} of the files that exist; one batched read."""
    if not paths:
        return {}
    by_path = {_key(fs, p): run_id for run_id, p in paths.items()}
    found = fs.cat(list(paths.values()), on_error="omit")
    return {by_path[_key(fs, p)]: data for p, data in found.items() if _key(fs, p) in by_path and not isinstance(data, BaseException)}


def _key(fs, path: str) -> str:
    return fs._strip_protocol(path).rstrip("/")

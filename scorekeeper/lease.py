"""One writer per run folder: a lease that two concurrent runs under the same name cannot share.

The lease is a small file created exclusively (a hard link locally, a conditional PUT on object
storage) and renewed while the run lives. A second run under the same name is refused while the
lease is fresh; a lease left by a crashed job expires after LEASE_TTL_S, and a retry of the same
Prefect flow run (same owner) takes it over at once, as does any run on the lease's host once the
process that holds it is gone (killed with SIGKILL, say): the record names host, pid and the
process's start time, so a reused pid is not mistaken for the owner.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from scorekeeper.errors import InputError, OutputError, RunConflict, storage_failure
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import is_local

log = logging.getLogger(__name__)

LEASE_TTL_S = 60.0
RENEW_EVERY_S = 10.0


def _record(owner: str) -> bytes:
    return json.dumps(
        {"owner": owner, "host": socket.gethostname(), "pid": os.getpid(), "started": _started(os.getpid()), "renewed_at": time.time()}
    ).encode()


def _started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _owner_gone(held: dict) -> bool:
    """Whether the lease's holder is a process of this host that no longer runs."""
    if held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
        return False
    started = _started(held["pid"])
    if started is None:
        return True
    return held.get("started") is not None and abs(started - float(held["started"])) > 1.0


@contextmanager
def run_lease(run: RunFolder, run_id: str, owner: str, ttl_s: float = LEASE_TTL_S) -> Iterator[None]:
    """Hold the run folder's lease for the duration of the block, or raise RunConflict."""
    try:
        created = run.create_exclusive(_record(owner), RunFolder.LEASE)
    except (PermissionError, NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        raise InputError(f"cannot write into the run folder {run.uri}: {exc.strerror or exc}") from None
    except OSError as exc:  # the first write under output_uri: a missing bucket, a full disk
        reason = storage_failure(exc)
        if reason is None:
            raise
        raise OutputError(f"cannot write into the run folder {run.uri}: {reason}") from None
    if not created:
        try:
            held = json.loads(run.read_bytes(RunFolder.LEASE))
        except (FileNotFoundError, ValueError):
            held = {"owner": None, "renewed_at": 0.0}
        age = time.time() - float(held.get("renewed_at", 0.0))
        gone = _owner_gone(held)
        if held.get("owner") != owner and age < ttl_s and not gone:
            raise RunConflict(
                f"run '{run_id}' is being written by another job (host {held.get('host')}, pid {held.get('pid')}, "
                f"renewed {age:.0f} s ago); wait for it to finish, or choose another run_name"
            )
        why = (
            "same owner" if held.get("owner") == owner else f"its process {held.get('pid')} is gone" if gone else f"expired {age:.0f} s ago"
        )
        log.info("taking over the lease of run %s (%s)", run_id, why)
        run.publish_bytes(_record(owner), RunFolder.LEASE)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(RENEW_EVERY_S):
            try:
                run.publish_bytes(_record(owner), RunFolder.LEASE)
            except OSError as exc:  # a missed renewal is retried; the TTL covers several
                log.warning("could not renew the run lease: %s", exc)

    renewer = threading.Thread(target=renew, name="scorekeeper-lease", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join(timeout=5)
        try:
            if json.loads(run.read_bytes(RunFolder.LEASE)).get("owner") == owner:
                run.remove(RunFolder.LEASE)
        except (FileNotFoundError, ValueError):
            pass
        _prune_empty_folders(run)


def _prune_empty_folders(run: RunFolder) -> None:
    """A run refused before writing anything (bad input) leaves no empty folder behind."""
    if not is_local(run.fs):
        return  # object stores have no folders
    for folder in (run.join(RunFolder.WORK_DIR), run.path):
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty (or gone): a real run lives here

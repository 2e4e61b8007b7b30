"""One writer per run folder: a lease that two concurrent runs under the same name cannot share.

The lease is a small file created exclusively (a hard link locally, a conditional PUT on object
storage) and renewed while the run lives. A second run under the same name is refused while the
lease is fresh; a lease left by a crashed job expires after LEASE_TTL_S, and a retry of the same
Prefect flow run (same owner) takes it over at once.
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

from scorekeeper.errors import RunConflict
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import is_local

log = logging.getLogger(__name__)

LEASE_TTL_S = 60.0
RENEW_EVERY_S = 10.0


def _record(owner: str) -> bytes:
    return json.dumps({"owner": owner, "host": socket.gethostname(), "pid": os.getpid(), "renewed_at": time.time()}).encode()


@contextmanager
def run_lease(run: RunFolder, run_id: str, owner: str, ttl_s: float = LEASE_TTL_S) -> Iterator[None]:
    """Hold the run folder's lease for the duration of the block, or raise RunConflict."""
    if not run.create_exclusive(_record(owner), RunFolder.LEASE):
        try:
            held = json.loads(run.read_bytes(RunFolder.LEASE))
        except (FileNotFoundError, ValueError):
            held = {"owner": None, "renewed_at": 0.0}
        age = time.time() - float(held.get("renewed_at", 0.0))
        if held.get("owner") != owner and age < ttl_s:
            raise RunConflict(
                f"run '{run_id}' is being written by another job (host {held.get('host')}, pid {held.get('pid')}, "
                f"renewed {age:.0f} s ago); wait for it to finish, or choose another run_name"
            )
        log.info("taking over the lease of run %s (%s)", run_id, "same owner" if held.get("owner") == owner else f"expired {age:.0f} s ago")
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

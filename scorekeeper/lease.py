"""One writer per run folder: a lease that two concurrent runs under the same name cannot share.

The lease is a sequence of generations, `work/lease/{N}.json` (N zero-padded), and the one that
counts is the highest N. Every step that takes the lease creates a new generation exclusively (a
hard link locally, which fails on an existing name; a conditional PUT, `If-None-Match: *`, on
object storage, which the store answers with 412 when the key exists):

- no generation yet: create 0;
- the highest generation N is released, expired (not renewed for LEASE_TTL_S), held by the same
  owner (a retry of the same Prefect flow run), or held by a process of this host that is gone
  (killed with SIGKILL, say; the record names host, pid and the process's start time, so a reused
  pid is not mistaken for the owner): create N + 1;
- else the run is refused (RunConflict).

Taking over is therefore a compare-and-swap: of two processes that judge generation N stale at
once, exactly one creates N + 1; the other's create fails and it judges again, now seeing a fresh
lease. After its create succeeds a taker lists the generations once more and goes on only if its
own is still the highest (a taker that was slow between listing and creating, while the
generations moved on, backs out). The holder renews its own generation every RENEW_EVERY_S; it
releases it by writing it back marked `released` (the highest generation is never deleted, so a
number is never created twice) and removes the generations below it.

A store without conditional writes falls back to check-then-create (storage.create_exclusive logs
it): there two takers of one stale lease can both proceed, which is the documented limit.
"""

from __future__ import annotations

import errno
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
_TAKE_ATTEMPTS = 20  # rounds of judging and creating before giving up (each lost round means another taker won)


def _record(owner: str, generation: int, released: bool = False) -> bytes:
    record = {
        "owner": owner,
        "generation": generation,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _started(os.getpid()),
        "renewed_at": time.time(),
    }
    return json.dumps(record | ({"released": True} if released else {})).encode()


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


def generation_name(generation: int) -> str:
    return f"{RunFolder.LEASE_DIR}/{generation:012d}.json"


def generations(run: RunFolder) -> list[int]:
    """The lease generations in the run folder, in order."""
    found = []
    for name in run.list_names(RunFolder.LEASE_DIR):
        stem, _, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def lease_holder(run: RunFolder) -> dict | None:
    """The record of the lease that counts (the highest generation), or None when no generation
    exists or the highest is released: what a test or an operator asks ("is this name free?")."""
    held = _highest(run)
    return None if held is None or held[1].get("released") else held[1]


def _highest(run: RunFolder) -> tuple[int, dict] | None:
    found = generations(run)
    if not found:
        return None
    generation = found[-1]
    try:
        held = json.loads(run.read_bytes(generation_name(generation)))
    except FileNotFoundError:
        held = {"released": True}  # removed under us: only generations below the highest are removed
    except ValueError:
        held = {"owner": None, "renewed_at": 0.0}  # unreadable: expired
    return generation, held if isinstance(held, dict) else {"owner": None, "renewed_at": 0.0}


def _create(run: RunFolder, owner: str, generation: int) -> bool:
    try:
        return run.create_exclusive(_record(owner, generation), generation_name(generation))
    except (PermissionError, NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        raise InputError(f"cannot write into the run folder {run.uri}: {exc.strerror or exc}") from None
    except OSError as exc:  # the first write under output_uri: a missing bucket, a full disk
        reason = storage_failure(exc)
        if reason is None:
            raise
        raise OutputError(f"cannot write into the run folder {run.uri}: {reason}") from None


def take_lease(run: RunFolder, run_id: str, owner: str, ttl_s: float = LEASE_TTL_S) -> int:
    """Take the run folder's lease (a new generation, created exclusively); its number. Raises
    RunConflict while another owner's lease is fresh."""
    run.makedirs(RunFolder.LEASE_DIR)
    for _ in range(_TAKE_ATTEMPTS):
        current = _highest(run)
        if current is None:
            generation = 0
        else:
            generation, held = current
            age = time.time() - float(held.get("renewed_at", 0.0) or 0.0)
            gone = _owner_gone(held)
            released = bool(held.get("released"))
            if not released and held.get("owner") != owner and age < ttl_s and not gone:
                raise RunConflict(
                    f"run '{run_id}' is being written by another job (host {held.get('host')}, pid {held.get('pid')}, "
                    f"renewed {age:.0f} s ago); wait for it to finish, or choose another run_name"
                )
            if not released:
                why = (
                    "same owner"
                    if held.get("owner") == owner
                    else f"its process {held.get('pid')} is gone"
                    if gone
                    else f"expired {age:.0f} s ago"
                )
                log.info("taking over the lease of run %s (%s)", run_id, why)
            generation += 1
        if not _create(run, owner, generation):
            continue  # another taker created this generation first: judge its lease
        if generations(run)[-1] == generation:
            return generation
        _remove_quietly(run, generation_name(generation))  # the generations moved on while we created ours: judge again
    raise RunConflict(f"run '{run_id}': could not take the run's lease ({_TAKE_ATTEMPTS} other jobs took it first); try again")


def release_lease(run: RunFolder, owner: str, generation: int) -> None:
    """Mark our generation released (if it is still ours) and remove the generations below it."""
    try:
        held = json.loads(run.read_bytes(generation_name(generation)))
    except (FileNotFoundError, ValueError):
        return
    if held.get("owner") != owner or generations(run)[-1] != generation:
        return  # taken over since: the newer holder's
    run.publish_bytes(_record(owner, generation, released=True), generation_name(generation))
    for older in generations(run):
        if older < generation:
            _remove_quietly(run, generation_name(older))


@contextmanager
def run_lease(run: RunFolder, run_id: str, owner: str, ttl_s: float = LEASE_TTL_S) -> Iterator[None]:
    """Hold the run folder's lease for the duration of the block, or raise RunConflict."""
    generation = take_lease(run, run_id, owner, ttl_s)
    stop = threading.Event()

    def renew() -> None:
        warned = False
        while not stop.wait(RENEW_EVERY_S):
            try:
                if generations(run)[-1] != generation and not warned:
                    warned = True
                    log.error("the lease of run %s was taken over by another job (its renewals stopped for over %.0f s)", run_id, ttl_s)
                run.publish_bytes(_record(owner, generation), generation_name(generation))
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
            release_lease(run, owner, generation)
        except OSError as exc:
            # A full disk is the run's own error, said once; the lease it leaves is taken over as soon
            # as this process is gone (`_owner_gone`) or its TTL passes.
            (log.debug if exc.errno == errno.ENOSPC else log.warning)("could not release the run lease: %s", exc)
        _prune_empty_folders(run, generation)


def _remove_quietly(run: RunFolder, name: str) -> None:
    try:
        run.remove(name)
    except OSError:
        pass


def _prune_empty_folders(run: RunFolder, generation: int) -> None:
    """A run refused before writing anything (bad input) leaves no folder behind: its own released
    generation goes, then each folder that is empty (a folder another job wrote into stays)."""
    if not is_local(run.fs):
        return  # object stores have no folders
    work = run.join(RunFolder.WORK_DIR)
    if run.list_names(RunFolder.LEASE_DIR) != [generation_name(generation).rsplit("/", 1)[1]] or os.listdir(work) != ["lease"]:
        return
    if lease_holder(run) is not None or os.listdir(run.path) != [RunFolder.WORK_DIR]:
        return
    _remove_quietly(run, generation_name(generation))
    for folder in (run.join(RunFolder.LEASE_DIR), work, run.path):
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty (or gone): a real run lives here

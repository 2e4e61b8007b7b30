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

import _thread
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from scorekeeper.errors import InputError, LeaseLost, OutputError, RunConflict, is_storage_error, storage_failure
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
    """Hold the run folder's lease for the duration of the block, or raise RunConflict.

    Every storage error (`errors.storage_errors`: OSError, botocore's and aiohttp's connection
    errors, fsspec's timeouts) is one kind of failure to renew: the renewal is retried every
    RETRY_EVERY_S. A watchdog measures the time since the last renewal that was written; once it
    reaches STOP_AFTER of the TTL (40 s of 60) the job is stopped (the block is interrupted, the
    scoring processes stopped on the way out) and ends with LeaseLost, one line, exit 3: before
    another job may judge the lease expired and take the folder over. So is a job whose lease was
    taken over. The release never replaces the block's own error, and it is not tried against a
    store that did not answer the last renewal (the lease is then left for a rerun to take over:
    the same owner at once, any other once its process is gone or the TTL passes)."""
    generation = take_lease(run, run_id, owner, ttl_s)
    holder = _Holder(run, run_id, owner, generation, ttl_s)
    own_handler = _interruptible(holder)
    holder.start()
    try:
        yield
    except KeyboardInterrupt:
        holder.stop()
        if holder.lost is not None:
            raise LeaseLost(holder.lost) from None
        raise
    finally:
        holder.stop()
        if own_handler is not None:
            own_handler.restore()
        if holder.lost is None and holder.answering:
            try:
                release_lease(run, owner, generation)
            except Exception as exc:  # never hides the block's own error, nor replaces its end
                if not is_storage_error(exc):
                    log.exception("could not release the lease of run %s", run_id)
                else:
                    # A full disk is the run's own error, said once; the lease it leaves is taken over
                    # as soon as this process is gone (`_owner_gone`) or its TTL passes.
                    quiet = storage_failure(exc) is not None
                    (log.debug if quiet else log.warning)("could not release the lease of run %s: %s", run_id, _one_line(exc))
            try:
                _prune_empty_folders(run, generation)
            except Exception as exc:
                log.debug("could not prune the run folder %s: %s", run.uri, _one_line(exc))
    if holder.lost is not None:  # lost while the block was finishing: its outputs may have raced another job
        raise LeaseLost(holder.lost)


STOP_AFTER = 2 / 3  # of the TTL without a written renewal: the job stops (40 s of 60 s)
RETRY_EVERY_S = 2.0  # a failed renewal is tried again this soon


class _Holder:
    """The renewal thread and its watchdog for one held generation."""

    def __init__(self, run: RunFolder, run_id: str, owner: str, generation: int, ttl_s: float):
        self.run, self.run_id, self.owner, self.generation, self.ttl_s = run, run_id, owner, generation, ttl_s
        self.renewed = time.monotonic()  # when the last written record was made (take_lease just wrote one)
        self.answering = True  # whether the store answered the last renewal
        self.failure: str | None = None  # the last renewal's error
        self.lost: str | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._target = threading.current_thread()
        self._threads = [
            threading.Thread(target=self._renew, name="scorekeeper-lease", daemon=True),
            threading.Thread(target=self._watch, name="scorekeeper-lease-watch", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop renewing. A renewal in flight against a store that answers is waited for (the
        release must come after it); one hanging on a store that does not answer is left behind
        (a daemon thread: it writes at most this generation's record, never a newer one)."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        for thread in self._threads:
            thread.join(timeout=5 if thread.name == "scorekeeper-lease" and self.answering and self.lost is None else 0.1)

    def _renew(self) -> None:
        wait = min(RENEW_EVERY_S, self.ttl_s * STOP_AFTER / 4)
        while not self._stopped.wait(wait if self.answering else min(wait, RETRY_EVERY_S)):
            made = time.monotonic()
            try:
                if generations(self.run)[-1] != self.generation:
                    self._lose("it was taken over by another job")
                    return
                self.run.publish_bytes(_record(self.owner, self.generation), generation_name(self.generation))
            except Exception as exc:  # every storage error alike: retried until the watchdog gives up
                self.answering, self.failure = False, _one_line(exc)
                if is_storage_error(exc):
                    log.warning("could not renew the lease of run %s (%s); retrying", self.run_id, self.failure)
                else:
                    log.exception("could not renew the lease of run %s; retrying", self.run_id)
                continue
            self.renewed, self.answering, self.failure = made, True, None

    def _watch(self) -> None:
        limit = self.ttl_s * STOP_AFTER
        while not self._stopped.wait(min(1.0, limit / 20)):
            silent = time.monotonic() - self.renewed
            if silent >= limit:
                because = f": {self.failure}" if self.failure else ""
                self._lose(f"it could not be renewed for {silent:.0f} s{because}")
                return

    def _lose(self, why: str) -> None:
        with self._lock:
            if self._stopped.is_set() or self.lost is not None:
                return
            self.lost = (
                f"run '{self.run_id}' stopped: the lease on its folder {self.run.uri} was lost ({why}); the job stopped "
                f"before another job could take the folder over; committed ranges are kept: rerun with the same run name "
                f"to resume once storage answers"
            )
            log.error("%s", self.lost)
            _interrupt(self._target)


class _StopOnLoss:
    """SIGINT's handler while a lease is held in a main thread whose SIGINT Python does not handle
    (ignored, as in a job started in the background by a script, or left at the default): the
    lease's loss raises KeyboardInterrupt as it would anywhere else, and any other SIGINT does what
    it did before (nothing, or the default's end)."""

    def __init__(self, holder: _Holder, previous: int):  # SIG_IGN or SIG_DFL
        self.holder, self.previous = holder, previous

    def __call__(self, signum: int, frame: object) -> None:
        if self.holder.lost is not None:
            raise KeyboardInterrupt
        if self.previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def restore(self) -> None:
        previous = self.previous
        if signal.getsignal(signal.SIGINT) is self:  # (the block may have set one of its own)
            signal.signal(signal.SIGINT, previous)


def _interruptible(holder: _Holder) -> _StopOnLoss | None:
    """Make the holding main thread interruptible by the lease's loss: without a Python handler for
    SIGINT, `_thread.interrupt_main` does nothing and a blocking call would outlive the lease."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if callable(previous) or previous is None:  # None: set outside Python, left as it is
        return None
    handler = _StopOnLoss(holder, previous)
    signal.signal(signal.SIGINT, handler)
    return handler


def _interrupt(thread: threading.Thread) -> None:
    """Raise KeyboardInterrupt in the thread that holds the lease, where it is blocked too: the main
    thread gets SIGINT (its handler, the CLI's, Python's or the lease's own, raises it; a blocking call returns with
    EINTR); another thread gets it asynchronously, at its next bytecode."""
    if thread is threading.main_thread():
        if callable(signal.getsignal(signal.SIGINT)):
            signal.pthread_kill(thread.ident or 0, signal.SIGINT)
        else:
            _thread.interrupt_main()
        return
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(KeyboardInterrupt))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


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

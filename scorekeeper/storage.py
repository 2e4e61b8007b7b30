"""Reading and publishing files through fsspec, so local folders and object storage behave alike.

Publishing is the only way outputs appear: readers either see nothing or a complete file. Locally
that is a temporary name in the same folder and an atomic rename; on object storage a single PUT
or a multipart upload, and S3 makes either visible only once it is complete.

Object storage is reached with the standard AWS chain (environment variables, AWS_ENDPOINT_URL /
AWS_ENDPOINT_URL_S3, profiles, instance roles) unless a flow run opened a `StorageAccess` scope
(tasks/credentials.py builds one from a Prefect block): every filesystem made inside the scope
gets its options, and the scoring subprocesses get its environment. fsspec caches filesystems by
their options, so two scopes with different credentials never share a client. Prefect's task
threads inherit the scope; a thread a step starts itself does not, so make its Location first
(a Location keeps its filesystem) or run the thread in `contextvars.copy_context()`.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import posixpath
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Self

import fsspec
from fsspec.core import split_protocol, url_to_fs
from fsspec.implementations.local import LocalFileSystem

log = logging.getLogger(__name__)

S3_PROTOCOLS = frozenset({"s3", "s3a"})

# The scoring processes write commit records into folders the flow lists again later, so a
# cached listing would hide them: object-store listings are never cached.
OBJECT_STORE_DEFAULTS: dict[str, Any] = {"use_listings_cache": False}

# Retries against object storage are bounded explicitly, because two layers retry and their counts
# multiply. botocore retries 5xx replies, throttling (503 SlowDown) and dropped connections; its
# default here ("legacy" mode, 5 attempts) waits up to 1+2+4+8 s. s3fs then repeats the whole call
# for SlowDown, connection errors and truncated bodies (5 times, class attribute `retries`): one
# request under a persistent SlowDown made 25 attempts and took about 50 s, then a Prefect task
# retry (flows/score.py: 2 more) started it all over again. Here botocore uses "standard" mode
# (exponential backoff with jitter, capped at 20 s per wait, and a retry quota per client, so a
# store that keeps failing is not hammered) with S3_MAX_ATTEMPTS attempts per request, the first
# one included: expected waits of 0.5+1+2+4 s between them, at most 15 s in all. s3fs's own loop
# keeps S3FS_ATTEMPTS (> 1: it alone retries a body cut off mid-download). So one call makes at
# most S3_MAX_ATTEMPTS requests for a 500 reply (s3fs does not repeat those) and S3_MAX_ATTEMPTS *
# S3FS_ATTEMPTS for SlowDown or a closed connection, then raises (aiohttp also resends a request
# once when the connection is reset under it, which can double these); tests/test_s3_faults.py
# measures these bounds. The standard variables AWS_MAX_ATTEMPTS and AWS_RETRY_MODE still take
# precedence (an explicit botocore Config would otherwise silently override them), and so does a
# caller's own config_kwargs["retries"].
S3_RETRY_MODE = "standard"
S3_MAX_ATTEMPTS = 5
S3FS_ATTEMPTS = 3


def s3_retry_config() -> dict[str, Any]:
    """botocore's `retries` setting for object storage (see S3_MAX_ATTEMPTS)."""
    attempts = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    try:
        max_attempts = int(attempts) if attempts else S3_MAX_ATTEMPTS
    except ValueError:
        raise ValueError(f"AWS_MAX_ATTEMPTS must be a whole number, not {attempts!r}") from None
    # total_max_attempts counts the first request too, as AWS_MAX_ATTEMPTS does; botocore's
    # `max_attempts` key would count retries only (5 meant 6 requests).
    return {"mode": os.environ.get("AWS_RETRY_MODE", "").strip() or S3_RETRY_MODE, "total_max_attempts": max_attempts}


@dataclass(frozen=True, eq=False)
class StorageAccess:
    """How to reach object storage when the standard chain is not what the run should use.

    `s3_options` go to s3fs in this process; `environment` (AWS_* variables) goes to the scoring
    subprocesses only, never to this process's own environment. Both may hold secrets, so the
    object's repr names only where it came from.
    """

    source: str
    s3_options: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"StorageAccess(from {self.source})"

    __str__ = __repr__


_ACCESS: contextvars.ContextVar[StorageAccess | None] = contextvars.ContextVar("scorekeeper_storage_access", default=None)


@contextlib.contextmanager
def use_storage_access(access: StorageAccess | None) -> Iterator[None]:
    """Within this block (and the tasks it runs), object storage is reached with `access`."""
    token = _ACCESS.set(access)
    try:
        yield
    finally:
        _ACCESS.reset(token)


def current_storage_access() -> StorageAccess | None:
    return _ACCESS.get()


def child_environment() -> dict[str, str]:
    """Environment variables a subprocess needs to reach object storage as this scope does."""
    access = _ACCESS.get()
    return dict(access.environment) if access else {}


def fs_and_path(uri: str, **storage_options: Any) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for a URI and the path inside it (a local path becomes absolute)."""
    protocol, _ = split_protocol(uri)
    if protocol in S3_PROTOCOLS:
        access = _ACCESS.get()
        storage_options = {**OBJECT_STORE_DEFAULTS, **(access.s3_options if access else {}), **storage_options}
        config = dict(storage_options.get("config_kwargs") or {})
        config.setdefault("retries", s3_retry_config())
        storage_options["config_kwargs"] = config
    fs, path = url_to_fs(uri, **storage_options)
    if protocol in S3_PROTOCOLS:
        fs.retries = S3FS_ATTEMPTS  # an attribute, not an option, in s3fs (see S3_MAX_ATTEMPTS)
    return fs, path


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return isinstance(fs, LocalFileSystem)


def to_uri(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A URI that names `path` on `fs` again (local paths stay plain paths)."""
    if is_local(fs):
        return path
    return fs.unstrip_protocol(path)


@dataclass(frozen=True)
class Location:
    """A folder on some filesystem: the run directory, its shard folder, a model folder."""

    fs: fsspec.AbstractFileSystem
    path: str

    @classmethod
    def from_uri(cls, uri: str, **storage_options: Any) -> Self:  # a RunFolder's is a RunFolder
        fs, path = fs_and_path(uri, **storage_options)
        return cls(fs, path.rstrip("/") or "/")

    @property
    def uri(self) -> str:
        return to_uri(self.fs, self.path)

    def child(self, *parts: str) -> Location:
        return Location(self.fs, posixpath.join(self.path, *parts))

    def join(self, *parts: str) -> str:
        return posixpath.join(self.path, *parts)

    def exists(self, *parts: str) -> bool:
        return self.fs.exists(self.join(*parts))

    def read_bytes(self, *parts: str) -> bytes:
        return self.fs.cat_file(self.join(*parts))

    def read_json(self, *parts: str) -> Any:
        return json.loads(self.read_bytes(*parts))

    def list_names(self, *parts: str) -> list[str]:
        """Names of the files directly inside a sub-folder; empty when it does not exist."""
        folder = self.join(*parts)
        self.fs.invalidate_cache(folder)  # other processes add files here (commit records)
        try:
            entries = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries)

    def makedirs(self, *parts: str) -> None:
        if is_local(self.fs):
            os.makedirs(self.join(*parts), exist_ok=True)

    def publish_bytes(self, data: bytes, *parts: str) -> None:
        """Write a whole file so that no reader ever sees it half-written."""
        target = self.join(*parts)
        if is_local(self.fs):
            _replace_atomically(target, lambda f: f.write(data))
        else:
            # One PUT (a multipart upload past s3fs's threshold): the object appears whole or not at all.
            self.fs.pipe_file(target, data)

    def publish_json(self, obj: Any, *parts: str) -> None:
        self.publish_bytes(json.dumps(obj, indent=2, sort_keys=True, default=str).encode() + b"\n", *parts)

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        """Create a file only if it does not exist yet; False when another writer got there first.

        Locally this is a hard link of a complete temporary file (link fails on an existing
        name), so the record is atomic and exclusive at once. On S3 it is a conditional PUT
        (If-None-Match: *), which the store answers with 412 when the key exists.
        """
        target = self.join(*parts)
        if is_local(self.fs):
            tmp = _synced_temp_file(target, lambda f: f.write(data))
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            finally:
                _remove_quietly(tmp)
            return True
        return _create_exclusive_remote(self.fs, target, data)

    def publish_local_file(self, local_path: str, *parts: str) -> None:
        """Move a finished local file into place (upload for object storage), atomically."""
        target = self.join(*parts)
        if is_local(self.fs):
            # Copy-then-rename keeps the publish atomic even across devices.
            _replace_atomically(target, lambda dst: _copy_file(local_path, dst))
        else:
            # One PUT, or a multipart upload that S3 shows only once it is completed.
            self.fs.put_file(local_path, target)

    def remove(self, *parts: str) -> None:
        target = self.join(*parts)
        if self.fs.exists(target):
            self.fs.rm(target, recursive=True)


# A conditional PUT racing another one on the same key gets 409 ConditionalRequestConflict: ask again.
_CONFLICT_RETRIES = 5
_WARNED_NOT_EXCLUSIVE: set[str] = set()


def _create_exclusive_remote(fs: fsspec.AbstractFileSystem, target: str, data: bytes) -> bool:
    """Conditional create on object storage: True for exactly one writer of `target`.

    A 412 can also be the answer to our own PUT, retried after its response was lost; so an
    existing object that holds exactly our bytes counts as ours (commit records name their
    attempt and rank, so another writer's record never matches). A store without conditional
    writes (501) or a filesystem that is not S3 falls back to check-then-put, which is not
    exclusive between concurrent writers: that is logged.
    """
    if _protocol(fs) & S3_PROTOCOLS:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                fs.pipe_file(target, data, mode="create")
                return True
            except FileExistsError:  # s3fs's translation of 412 for If-None-Match
                return _holds(fs, target, data)
            except OSError as exc:
                code = _s3_error_code(exc)
                if code in ("PreconditionFailed", "412"):  # stores that omit the Condition field
                    return _holds(fs, target, data)
                if code in ("ConditionalRequestConflict", "409") and attempt + 1 < _CONFLICT_RETRIES:
                    time.sleep(0.1 * 2**attempt)
                    continue
                if code not in ("NotImplemented", "501"):
                    raise
                break
    if type(fs).__name__ not in _WARNED_NOT_EXCLUSIVE:
        _WARNED_NOT_EXCLUSIVE.add(type(fs).__name__)
        log.warning(
            "%s does not support conditional writes: creating %s with check-then-put, which is "
            "exclusive only while a single job writes this run",
            type(fs).__name__,
            target,
        )
    if fs.exists(target):
        return _holds(fs, target, data)
    fs.pipe_file(target, data)
    return True


def _protocol(fs: fsspec.AbstractFileSystem) -> set[str]:
    protocol = fs.protocol
    return {protocol} if isinstance(protocol, str) else set(protocol)


def _s3_error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an exception s3fs translated (its cause is botocore's error)."""
    for error in (exc, exc.__cause__):
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            return response.get("Error", {}).get("Code") or str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return None


def _holds(fs: fsspec.AbstractFileSystem, target: str, data: bytes) -> bool:
    """Whether the object at `target` is exactly `data` (it is ours)."""
    fs.invalidate_cache(target)
    try:
        return fs.cat_file(target) == data
    except FileNotFoundError:
        return False


def _synced_temp_file(target: str, write: Callable[[BinaryIO], object]) -> str:
    """A complete temporary file beside `target` (its folder created), written by `write` and
    fsynced; its path. A dot-name that does not end like the target, so that listings of the
    folder (and globs such as *.json) pass over one a killed writer left behind."""
    folder = posixpath.dirname(target)
    os.makedirs(folder, exist_ok=True)
    tmp = posixpath.join(folder, f".{posixpath.basename(target)}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        _remove_quietly(tmp)
        if exc.filename is None and exc.errno is not None:  # a write's error names no file: name the target
            raise OSError(exc.errno, exc.strerror, target) from exc
        raise
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _replace_atomically(target: str, write: Callable[[BinaryIO], object]) -> None:
    """Write `target` through a synced temporary file and a rename: readers see all or nothing."""
    tmp = _synced_temp_file(target, write)
    try:
        os.replace(tmp, target)
    except BaseException:
        _remove_quietly(tmp)
        raise


def _copy_file(source: str, dst: BinaryIO) -> None:
    with open(source, "rb") as src:
        while chunk := src.read(1 << 22):
            dst.write(chunk)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def sha256_file(fs: fsspec.AbstractFileSystem, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def file_fingerprint(fs: fsspec.AbstractFileSystem, path: str, info: dict | None = None) -> str:
    """A fingerprint of a file's content: its sha256 locally, its ETag and size on object storage."""
    if is_local(fs):
        return "sha256:" + sha256_file(fs, path)
    info = info or fs.info(path)
    etag = str(info.get("ETag") or info.get("etag") or info.get("md5") or "").strip('"')
    if not etag:
        return "sha256:" + sha256_file(fs, path)
    return f"etag:{etag}:{info.get('size')}"


def digest_of(obj: Any) -> str:
    """A stable short digest of a JSON-able object."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:32]

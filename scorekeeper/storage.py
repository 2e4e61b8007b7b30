"""Reading and publishing files through fsspec, so local folders and object storage behave alike.

Publishing is the only way outputs appear: readers either see nothing or a complete file. Locally
that is a temporary name in the same folder and an atomic rename; on object storage a single PUT
(or a multipart upload, which also becomes visible only once complete).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem


def fs_and_path(uri: str, **storage_options: Any) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for a URI and the path inside it (a local path becomes absolute)."""
    fs, path = url_to_fs(uri, **storage_options)
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
    def from_uri(cls, uri: str, **storage_options: Any) -> Location:
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
            folder = posixpath.dirname(target)
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix="-" + posixpath.basename(target))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                _remove_quietly(tmp)
                raise
        else:
            self.fs.pipe_file(target, data)

    def publish_json(self, obj: Any, *parts: str) -> None:
        self.publish_bytes(json.dumps(obj, indent=2, sort_keys=True, default=str).encode() + b"\n", *parts)

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        """Create a file only if it does not exist yet; False when another writer got there first.

        Locally this is a hard link of a complete temporary file (link fails on an existing
        name), so the record is atomic and exclusive at once. Object stores get a conditional
        PUT (If-None-Match) where the store supports it.
        """
        target = self.join(*parts)
        if is_local(self.fs):
            folder = posixpath.dirname(target)
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    return False
                return True
            finally:
                _remove_quietly(tmp)
        return _create_exclusive_remote(self.fs, target, data)

    def publish_local_file(self, local_path: str, *parts: str) -> None:
        """Move a finished local file into place (upload for object storage), atomically."""
        target = self.join(*parts)
        if is_local(self.fs):
            os.makedirs(posixpath.dirname(target), exist_ok=True)
            tmp = f"{target}.tmp-{uuid.uuid4().hex}"
            try:
                # Copy-then-rename keeps the publish atomic even across devices.
                with open(local_path, "rb") as src, open(tmp, "wb") as dst:
                    while chunk := src.read(1 << 22):
                        dst.write(chunk)
                    dst.flush()
                    os.fsync(dst.fileno())
                os.replace(tmp, target)
            except BaseException:
                _remove_quietly(tmp)
                raise
        else:
            self.fs.put_file(local_path, target)

    def remove(self, *parts: str) -> None:
        target = self.join(*parts)
        if self.fs.exists(target):
            self.fs.rm(target, recursive=True)


def _create_exclusive_remote(fs: fsspec.AbstractFileSystem, target: str, data: bytes) -> bool:
    """Conditional create on object storage; falls back to check-then-put where unsupported."""
    if hasattr(fs, "call_s3"):
        bucket, key, _ = fs.split_path(target)
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            fs.invalidate_cache(target)
            return True
        except Exception as exc:  # s3fs translates some codes; look at the original too
            text = f"{exc!r} {getattr(exc, '__cause__', '')!r}"
            if "PreconditionFailed" in text or "412" in text or "ConditionalRequestConflict" in text:
                return False
            if "NotImplemented" not in text and "501" not in text:
                raise
    if fs.exists(target):
        return False
    fs.pipe_file(target, data)
    return True


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

"""Model and adapter folders from object storage, fetched once into a local cache keyed by content.

The cache key is a digest of every object's relative name, ETag and size, so a changed object is
fetched again and an unchanged folder is not, whatever its URI. A fetch lands in a temporary
folder that is renamed into place whole, so a crash never leaves a half-fetched model that looks
complete, and two processes fetching the same folder at once both end up with one good copy.
The cache is never pruned: delete folders under it (SCOREKEEPER_CACHE) to reclaim space.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile

from scorekeeper.errors import ModelError
from scorekeeper.redact import redact_uri
from scorekeeper.storage import digest_of, fs_and_path
from scorekeeper.tasks.runlog import run_logger


def cache_root() -> str:
    return os.environ.get("SCOREKEEPER_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "scorekeeper"))


def list_folder(uri: str, what: str) -> list[tuple[str, str, int]]:
    """(relative name, ETag, size) of every object under a folder URI, sorted by name."""
    fs, root = fs_and_path(uri)
    root = root.rstrip("/")
    try:
        listing = fs.find(root, detail=True)
    except FileNotFoundError:
        listing = {}
    entries = []
    for path, info in listing.items():
        if path.endswith("/") or info.get("type") == "directory":
            continue  # "folder" marker objects that consoles create
        rel = posixpath.relpath(path, root)
        if rel == ".":
            raise ModelError(f"{what} {uri} is a file; {what}_uri must name a folder")
        if rel == ".." or rel.startswith("../") or posixpath.isabs(rel):
            raise ModelError(f"{what} folder {uri} holds an unusable object name: {path}")
        # The ETag changes with the content; a store that lists none gets the modification time.
        version = info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime") or ""
        entries.append((rel, str(version).strip('"'), int(info.get("size") or 0)))
    if not entries:
        raise ModelError(f"{what} folder not found or empty: {uri}")
    return sorted(entries)


def fetch_to_cache(uri: str, what: str) -> str:
    """A local copy of an object-storage folder, fetched only when the cache has no copy yet."""
    entries = list_folder(uri, what)
    key = digest_of(entries)
    target = os.path.join(cache_root(), what, key)
    if os.path.isdir(target):
        run_logger(__name__).info("%s %s: using the cached copy %s", what, redact_uri(uri), target)
        return target
    fs, root = fs_and_path(uri)
    root = root.rstrip("/")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{key}-", dir=os.path.dirname(target))
    try:
        locals_ = [os.path.join(staging, *rel.split("/")) for rel, _, _ in entries]
        for local in locals_:
            os.makedirs(os.path.dirname(local), exist_ok=True)
        fs.get([posixpath.join(root, rel) for rel, _, _ in entries], locals_)
        short = [rel for (rel, _, size), local in zip(entries, locals_) if os.path.getsize(local) != size]
        if short or list_folder(uri, what) != entries:
            # Raised as an I/O error: the task's retry fetches the folder's new content.
            raise OSError(f"{what} folder {uri} changed while it was being fetched")
        try:
            os.rename(staging, target)
        except OSError:
            if not os.path.isdir(target):
                raise
            # Another process renamed its complete copy into place first: use that one.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    run_logger(__name__).info(
        "%s %s: fetched %d files (%d bytes) into %s", what, redact_uri(uri), len(entries), sum(s for _, _, s in entries), target
    )
    return target

"""Model and adapter folders from object storage, fetched once into a local cache keyed by content.

The cache key is a digest of every object's name, ETag and size, so a changed object is fetched
again and an unchanged folder is not, whatever its URI. A fetch lands in a temporary folder that
is renamed into place whole, so a crash never leaves a half-fetched model that looks complete.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile

from scorekeeper.errors import ModelError
from scorekeeper.storage import digest_of, fs_and_path


def cache_root() -> str:
    return os.environ.get("SCOREKEEPER_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "scorekeeper"))


def fetch_to_cache(uri: str, what: str) -> str:
    fs, root = fs_and_path(uri)
    root = root.rstrip("/")
    try:
        listing = fs.find(root, detail=True)
    except FileNotFoundError:
        listing = {}
    if not listing:
        raise ModelError(f"{what} folder not found: {uri}")
    entries = sorted(
        (posixpath.relpath(p, root), str(info.get("ETag") or info.get("etag") or ""), int(info.get("size") or 0))
        for p, info in listing.items()
    )
    key = digest_of([what, entries])
    target = os.path.join(cache_root(), what, key)
    if os.path.isdir(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{key}-", dir=os.path.dirname(target))
    try:
        for rel, _, _ in entries:
            local = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            fs.get_file(posixpath.join(root, rel), local)
        try:
            os.rename(staging, target)
        except OSError:
            if not os.path.isdir(target):  # another process put it there first: use theirs
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target

"""Passwords in URIs (`https://user:secret@host/...`, `s3://key:secret@bucket/...`) never reach a
file, a log line, an artifact or a message: wherever a URI is shown or stored, its user-info part
is replaced by `***`. The URI itself, with its password, is used only to open files.

Comparisons of URIs (a resume's "same settings?") go through `normalise_uri`, so that `./data`,
its absolute path, `file://` and a trailing `/` all name one place.
"""

from __future__ import annotations

import os
import re
from typing import overload
from urllib.parse import urlsplit

REDACTED = "***"
# scheme://user@ or scheme://user:password@ -- a password may hold '/' (AWS secret keys do, and
# people paste them unencoded), so after a ':' anything up to the next '@' is userinfo.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#@'\"`:]*:[^\s'\"`@]*@|[^\s/?#@'\"`:]+@)")
_LOCAL = ("", "file", "local")


@overload
def redact_uri(uri: str) -> str: ...
@overload
def redact_uri(uri: None) -> None: ...
@overload
def redact_uri(uri: str | None) -> str | None: ...
def redact_uri(uri: str | None) -> str | None:
    """The URI with any user name and password replaced by ***."""
    if uri is None:
        return None
    return redact_text(uri)


def redact_text(text: str) -> str:
    """Every URI's user-info in a message, replaced by ***."""
    if "@" not in text:
        return text
    return _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)


def has_userinfo(uri: str) -> bool:
    return redact_text(uri) != uri


def normalise_uri(uri: str | None) -> str | None:
    """One spelling per place: local paths absolute and without `file://`, no trailing `/`, no
    `.` or `..` segments, no password (`s3a://` is `s3://`)."""
    if uri is None:
        return None
    uri = redact_text(uri.strip())
    scheme = urlsplit(uri).scheme.lower() if "://" in uri else ""
    if scheme in _LOCAL:
        path = uri.split("://", 1)[1] if "://" in uri else uri
        return os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    if scheme == "s3a":
        scheme = "s3"
    rest = uri.split("://", 1)[1]
    stripped = rest.rstrip("/")
    return f"{scheme}://{stripped or rest}"

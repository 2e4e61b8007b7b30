"""No secret from a URI reaches a file, a log line, an artifact, a message or Prefect: wherever a
URI is shown or stored, its user-info part (`https://user:secret@host/...`,
`s3://key:secret@bucket/...`) and the values of its credential-like query parameters (a presigned
URL's signature and token) are replaced by `***`. The URI itself, with its secrets, is used only to
open files. This module is the one place that knows what a secret in a URI looks like.

Credential-like query parameters (CREDENTIAL_PARAMETERS, compared case-insensitively): AWS
Signature V4 (`X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`) and V2
(`Signature`, `AWSAccessKeyId`), Google Cloud Storage (`X-Goog-Signature`, `X-Goog-Credential`),
Azure SAS (`sig`), and the generic OAuth / API names (`token`, `access_token`, `api_key`, ...).

Comparisons of URIs (a resume's "same settings?") go through `normalise_uri`, so that `./data`,
its absolute path, `file://` and a trailing `/` all name one place.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload
from urllib.parse import urlsplit

REDACTED = "***"
# scheme://user@ or scheme://user:password@ -- a password may hold '/' (AWS secret keys do, and
# people paste them unencoded), so after a ':' anything up to the next '@' is userinfo.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#@'\"`:]*:[^\s'\"`@]*@|[^\s/?#@'\"`:]+@)")
CREDENTIAL_PARAMETERS = (
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "x-goog-signature",
    "x-goog-credential",
    "signature",
    "awsaccesskeyid",
    "sig",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "session_token",
    "security_token",
    "api_key",
    "apikey",
    "password",
    "secret",
    "client_secret",
)
# ?name=value or &name=value (also ;name=value), the name compared without case; the value runs to
# the next separator, quote or blank (a value already *** stays ***).
_QUERY_SECRET = re.compile(
    r"(?P<lead>[?&;](?:" + "|".join(re.escape(n) for n in CREDENTIAL_PARAMETERS) + r")=)(?P<value>[^&#;\s'\"`<>]*)",
    re.IGNORECASE,
)
_LOCAL = ("", "file", "local")


@overload
def redact_uri(uri: str) -> str: ...
@overload
def redact_uri(uri: None) -> None: ...
@overload
def redact_uri(uri: str | None) -> str | None: ...
def redact_uri(uri: str | None) -> str | None:
    """The URI with any user name, password and credential-like query value replaced by ***."""
    if uri is None:
        return None
    return redact_text(uri)


def redact_text(text: str) -> str:
    """Every URI's user-info and every credential-like query value in a message, replaced by ***."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m["lead"] + REDACTED, text)
    return text


def has_userinfo(uri: str) -> bool:
    return "@" in uri and _USERINFO.sub("", uri) != uri


def has_secret(uri: str | None) -> bool:
    """Whether the URI carries a credential (user-info or a credential-like query value) that is not
    already redacted."""
    return uri is not None and redact_text(uri) != uri


def is_redacted(uri: str | None) -> bool:
    """Whether the URI shows *** where a credential was (what `redact_uri` makes of one)."""
    if uri is None:
        return False
    return f"://{REDACTED}@" in uri or any(m["value"] == REDACTED for m in _QUERY_SECRET.finditer(uri))


def redacted_exception(exc: BaseException) -> BaseException:
    """`exc` itself when its message holds no secret; otherwise an exception of the same type (or a
    RuntimeError, when that type cannot be rebuilt from a message) whose message is redacted: what
    Prefect turns into a state message and what the terminal shows carry no secret."""
    text = str(exc)
    clean = redact_text(text)
    if clean == text:
        return exc
    try:
        other = type(exc)(clean)
        if str(other) != clean:
            raise TypeError
    except Exception:
        other = RuntimeError(f"{type(exc).__name__}: {clean}")
    for name in ("exit_code",):
        if hasattr(exc, name):
            setattr(other, name, getattr(exc, name))
    return other


P = ParamSpec("P")
R = TypeVar("R")


def raises_redacted(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, raising `redacted_exception` of whatever it raises: every task of the flow is wrapped
    so (under its `@task`), because Prefect turns a failed task's exception into the task run's
    state message, and a library's error (aiohttp's, s3fs's) may quote the URI it was given, with
    its credentials. The original stays the cause (`__cause__`): a retry still sees what failed."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            clean = redacted_exception(exc)
            if clean is exc:
                raise
            raise clean from exc

    wrapper.raises_redacted = True  # type: ignore[attr-defined]
    return wrapper


class RedactingFilter(logging.Filter):
    """Redacts a record's message and its traceback text before any handler formats it: Prefect's
    API log handler stores what it is given, and a library's error may quote a signed URL."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None:
            trace = record.exc_text or logging.Formatter().formatException(record.exc_info)
            if redact_text(trace) != trace:
                # Some handlers (rich's) render exc_info themselves: hand them the redacted text only.
                record.msg, record.args = f"{record.msg}\n{redact_text(trace)}", ()
                record.exc_info, record.exc_text = None, None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


_FILTER = RedactingFilter()
_LOGGERS = ("", "prefect", "prefect.extra", "prefect.flow_runs", "prefect.task_runs", "prefect.engine", "prefect.workers", "scorekeeper")


def install_log_redaction() -> None:
    """Put the redacting filter on every handler of the root, Prefect's and scorekeeper's loggers
    (Prefect's API handler among them): one place for every log line, whoever logged it."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)


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

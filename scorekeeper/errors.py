"""Errors whose message is meant for the person who started the run.

A ScorekeeperError carries one clear sentence (the column, the file, the first offending rows);
the CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its
traceback.
"""

import errno

# What an OSError without an errno (pyarrow's, fsspec's) says of a storage failure no retry cures,
# and what S3 says of a missing bucket (storage_failure reads them; the CLI's log filter too).
UNCURED_TEXTS = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded", errno.EROFS: "Read-only file system"}
MISSING_BUCKET = "bucket does not exist"
# What the line of a failed gate or precision bound says (scorekeeper/gates.py, tasks/precision.py):
# the flow run's Failed state names it, and so does the CLI's last line.
GATES_FAILED = "quality gate(s) failed"
PRECISION_FAILED = "precision check against float32 failed"
# botocore's errors of storage that stopped answering once its retries are spent, as a log line names them
UNREACHABLE_NAMES = ("EndpointConnectionError", "ConnectionClosedError")


class ScorekeeperError(Exception):
    """A problem with the run's input, parameters or environment, explained in the message.

    A password in a URI the message names is replaced by *** (the message reaches the terminal,
    Prefect's logs and the flow run's state)."""

    exit_code = 2

    def __init__(self, *args: object) -> None:
        from scorekeeper.redact import redact_text

        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class InputError(ScorekeeperError):
    """The input rows, ground truth or parameters are unusable as given."""


class NoInput(InputError):
    """The input holds no data: a missing file, folder or prefix, one without data files, or files
    without rows (`if_empty` decides whether that fails the run or skips it)."""


class ModelError(ScorekeeperError):
    """The model or adapter folder cannot be used as given."""


class RunConflict(ScorekeeperError):
    """An existing run under the same name cannot be resumed with these parameters."""


class LeaseLost(ScorekeeperError):
    """The run folder's lease could not be renewed within its life (object storage unreachable, a
    full disk) or was taken over: the job stopped before another job could write into the folder."""

    exit_code = 3


class ScoringFailed(ScorekeeperError):
    """The scoring subprocess failed; the message holds its exit code and the tail of its stderr."""

    exit_code = 3


class Interrupted(ScorekeeperError):
    """The run was interrupted (Ctrl-C, SIGINT/SIGTERM); committed ranges are kept for a resume."""

    exit_code = 130


class GatherError(ScorekeeperError):
    """The committed shards do not tile the row space exactly once."""

    exit_code = 3


class GateFailed(ScorekeeperError):
    """A quality gate failed; the run's outputs are published. The message names each failed gate."""

    exit_code = 4


class OutputError(ScorekeeperError):
    """The output location cannot take the run's files (a full disk, a missing bucket); nothing
    that looks complete is left behind."""

    exit_code = 3


def storage_failure(exc: BaseException) -> str | None:
    """Why storage refused, for a failure no retry cures (a full disk, a quota, a read-only file
    system, a missing bucket), or None for any other error (transient I/O is retried, bugs keep
    their traceback). The one place that tells them apart: the report's publishing, the run's
    lease and the flow's last line all ask here."""
    reasons = {
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "the file system is read-only",
    }
    if not isinstance(exc, OSError):
        return None
    code = exc.errno
    if code is None:  # pyarrow's and fsspec's OSErrors carry the cause in their text only
        code = next((c for c, phrase in UNCURED_TEXTS.items() if phrase in str(exc)), None)
    if code in reasons:
        if not exc.filename:
            return reasons[code]
        folder, _, name = str(exc.filename).rstrip("/").rpartition("/")
        return reasons[code] + (f" holding {folder} (writing {name})" if folder else f" ({exc.filename})")
    if "NoSuchBucket" in str(exc) or MISSING_BUCKET in str(exc).lower():
        return "the bucket does not exist (create it, or fix output_uri)"
    return None


def storage_errors() -> tuple[type[BaseException], ...]:
    """Every kind of error storage raises: OSError (the local file system, and what s3fs translates
    S3's replies into) and the clients' own errors that are not OSErrors (botocore's connection and
    HTTP errors such as EndpointConnectionError once its retries are spent, aiohttp's, fsspec's
    timeouts). What the run's lease treats alike: one more failure to reach the run folder."""
    global _STORAGE_ERRORS
    if _STORAGE_ERRORS is None:
        import aiohttp
        import botocore.exceptions
        import fsspec.exceptions

        _STORAGE_ERRORS = (
            OSError,
            botocore.exceptions.BotoCoreError,
            botocore.exceptions.ClientError,
            aiohttp.ClientError,
            fsspec.exceptions.FSTimeoutError,
        )
    return _STORAGE_ERRORS


_STORAGE_ERRORS: tuple[type[BaseException], ...] | None = None


def is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, storage_errors())


def storage_unreachable(exc: BaseException) -> str | None:
    """Why storage did not answer once every retry was spent (a refused or dropped connection, a
    timeout), or None for any other error."""
    if isinstance(exc, unreachable_errors()) or (is_storage_error(exc) and type(exc).__module__.startswith(("aiohttp", "fsspec"))):
        return "storage did not answer (" + (" ".join(str(exc).split()) or type(exc).__name__) + ")"
    return None


def unreachable_errors() -> tuple[type[BaseException], ...]:
    """The errors of storage that stopped answering: refused or dropped connections, timeouts."""
    import botocore.exceptions

    return (ConnectionError, TimeoutError, botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)


def known_error_names() -> tuple[str, ...]:
    """What a log line of an error the run ends with in one line names: every class of
    ScorekeeperError's tree, a failed gate or precision bound, KeyboardInterrupt, the texts of
    storage failures no retry cures and the errors of storage that stopped answering (the CLI drops
    Prefect's tracebacks of them)."""

    def tree(cls: type[BaseException]) -> list[str]:
        subclasses: list[type[BaseException]] = cls.__subclasses__()
        return [cls.__name__, *(name for sub in subclasses for name in tree(sub))]

    return (
        *tree(ScorekeeperError),
        GATES_FAILED,
        PRECISION_FAILED,
        "KeyboardInterrupt",
        *UNCURED_TEXTS.values(),
        MISSING_BUCKET,
        *UNREACHABLE_NAMES,
    )


def storage_error(exc: BaseException) -> OutputError | None:
    """`storage_failure` (or storage that stopped answering) as the one-line error the run ends with."""
    reason = storage_failure(exc)
    if reason is not None:
        return OutputError(f"could not write the run's files: {reason}")
    reason = storage_unreachable(exc)
    if reason is not None:
        return OutputError(f"could not reach the run's files: {reason}; committed ranges are kept: rerun with the same run_name to resume")
    return None

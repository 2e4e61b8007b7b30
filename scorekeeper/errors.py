"""Errors whose message is meant for the person who started the run.

A ScorekeeperError carries one clear sentence (the column, the file, the first offending rows);
the CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its
traceback.
"""


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
    import errno

    reasons = {
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "the file system is read-only",
    }
    if not isinstance(exc, OSError):
        return None
    code = exc.errno
    if code is None:  # pyarrow's and fsspec's OSErrors carry the cause in their text only
        phrases = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded", errno.EROFS: "Read-only file system"}
        code = next((c for c, phrase in phrases.items() if phrase in str(exc)), None)
    if code in reasons:
        return reasons[code] + (f" ({exc.filename})" if exc.filename else "")
    if "NoSuchBucket" in str(exc) or "bucket does not exist" in str(exc).lower():
        return "the bucket does not exist (create it, or fix output_uri)"
    return None


def storage_error(exc: BaseException) -> OutputError | None:
    """`storage_failure` as the one-line error the run ends with."""
    reason = storage_failure(exc)
    return None if reason is None else OutputError(f"could not write the run's files: {reason}")

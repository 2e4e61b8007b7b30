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

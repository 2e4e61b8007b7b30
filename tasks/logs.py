"""The logger a step's helpers log to: the run's, so that the Prefect UI shows the line."""

from __future__ import annotations

import logging


def run_logger(fallback: logging.Logger) -> logging.Logger | logging.LoggerAdapter:
    """The flow or task run's logger inside a run, else `fallback` (a module's own logger, for
    the plain functions called outside Prefect)."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return fallback

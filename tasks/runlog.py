"""The logger a step's plain functions write to: the flow run's (terminal and UI) inside a run,
the module's own outside one (tests calling the functions directly)."""

from __future__ import annotations

import logging


def run_logger(fallback: str = "scorekeeper") -> logging.Logger | logging.LoggerAdapter:
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(fallback)

"""Scoring progress on the command line: rich's progress bar on a terminal (rows, rows/s, tokens/s,
time left), a plain line every few seconds when the output is a file or a pipe.

The CLI installs a display around the flow; the score task calls `report` on every progress event
(a no-op where nothing is installed, as in a deployment, whose progress is in Prefect's logs and
progress artifact). While the bar is shown, Prefect's console log lines print above it, and the
score task's own periodic progress lines (marked PROGRESS_RECORD) stay out of the console: they
would repeat the bar. They still reach Prefect's API.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:  # rich is imported where a bar is shown
    from rich.console import Console
    from rich.progress import TaskID

    class _ConsoleHandler(logging.StreamHandler):
        """What `_console_handlers` finds: a stream handler that prints through its `console`."""

        console: Console


PROGRESS_RECORD = "scoring_progress"  # a log record's attribute: a periodic progress line
_lock = threading.Lock()
_display: BarDisplay | LineDisplay | None = None


def report(rows_done: int, total_rows: int, tokens: int, elapsed_s: float) -> None:
    """Show the scoring progress on the installed display, if any."""
    display = _display
    if display is not None:
        with _lock:
            display.update(rows_done, total_rows, tokens, max(elapsed_s, 1e-9))


def _left(rows_done: int, total_rows: int, elapsed_s: float) -> str:
    if not rows_done:
        return "time left unknown"
    seconds = (total_rows - rows_done) * elapsed_s / rows_done
    return f"about {seconds:.0f} s left" if seconds < 120 else f"about {seconds / 60:.0f} min left"


class LineDisplay:
    """One plain line every `interval_s` seconds, and one when scoring is done."""

    def __init__(self, stream: TextIO, interval_s: float = 5.0):
        self.stream, self.interval_s, self.last = stream, interval_s, 0.0

    def update(self, rows_done: int, total_rows: int, tokens: int, elapsed_s: float) -> None:
        done = rows_done >= total_rows
        if not done and time.monotonic() - self.last < self.interval_s:
            return
        self.last = time.monotonic()
        tail = f"done in {elapsed_s:.1f} s" if done else _left(rows_done, total_rows, elapsed_s)
        print(
            f"scoring: {rows_done:,}/{total_rows:,} rows ({100 * rows_done / max(total_rows, 1):.0f}%), "
            f"{rows_done / elapsed_s:,.1f} rows/s, {tokens / elapsed_s:,.0f} tokens/s, {tail}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        pass


class BarDisplay:
    """rich's progress bar, started on the first event (so nothing shows while processes start)."""

    def __init__(self, stream: TextIO):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        # Fits 80 columns with 20,000/20,000 rows.
        self.progress = Progress(
            TextColumn("scoring"),
            BarColumn(bar_width=16),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rows_per_s]} rows/s {task.fields[tokens_per_s]} tok/s"),
            TimeRemainingColumn(),
            TextColumn("left"),
            console=Console(file=stream),
        )
        self.task: TaskID | None = None
        self.swapped: list[tuple[_ConsoleHandler, Console]] = []

    def update(self, rows_done: int, total_rows: int, tokens: int, elapsed_s: float) -> None:
        fields: dict[str, Any] = {"rows_per_s": f"{rows_done / elapsed_s:,.1f}", "tokens_per_s": f"{tokens / elapsed_s:,.0f}"}
        if self.task is None:
            self._print_logs_above_the_bar()
            self.progress.start()
            self.task = self.progress.add_task("scoring", total=total_rows, **fields)
        self.progress.update(self.task, completed=rows_done, total=total_rows, **fields)
        if rows_done >= total_rows:
            self.close()  # scoring is done: the later steps' log lines print as usual

    def _print_logs_above_the_bar(self) -> None:
        """Prefect's console handler prints through its own rich Console; pointed at the bar's
        console, its lines print above the bar instead of through it."""
        for handler in _console_handlers():
            self.swapped.append((handler, handler.console))
            handler.console = self.progress.console

    def close(self) -> None:
        self.progress.stop()  # idempotent
        for handler, console in self.swapped:
            handler.console = console
        self.swapped.clear()


def _console_handlers() -> list[_ConsoleHandler]:
    """Log handlers that print through a rich Console (Prefect's console handler)."""
    loggers = [logging.getLogger()] + [
        logger
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if name.startswith("prefect") and isinstance(logger, logging.Logger)
    ]
    handlers = {id(h): h for logger in loggers for h in logger.handlers if hasattr(h, "console") and isinstance(h, logging.StreamHandler)}
    return cast("list[_ConsoleHandler]", list(handlers.values()))  # each has a `console`, checked above


class _NoProgressLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, PROGRESS_RECORD, False)


@contextmanager
def progress_display(stream: TextIO | None = None, interval_s: float = 5.0) -> Iterator[BarDisplay | LineDisplay]:
    """Install a progress display for the scoring step: a bar on a terminal, else plain lines."""
    global _display
    stream = stream or sys.stderr
    display = BarDisplay(stream) if stream.isatty() else LineDisplay(stream, interval_s)
    quiet = _NoProgressLines()
    handlers = _console_handlers()
    for handler in handlers:
        handler.addFilter(quiet)
    _display = display
    try:
        yield display
    finally:
        with _lock:
            _display = None
            display.close()
        for handler in handlers:
            handler.removeFilter(quiet)

"""The CLI's progress display: rich's bar on a terminal, plain lines otherwise (fast, no processes)."""

from __future__ import annotations

import io
import logging

from scorekeeper import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ConsoleHandler(logging.StreamHandler):
    """Stands in for Prefect's console handler: it prints through a `console` attribute."""

    def __init__(self, stream):
        super().__init__(stream)
        self.console = "prefect's console"


def test_plain_lines_every_few_seconds_when_not_a_terminal():
    out = io.StringIO()
    with progress_bar.progress_display(out, interval_s=60):
        progress_bar.report(100, 1000, 5000, 2.0)
        progress_bar.report(200, 1000, 10000, 2.5)  # within the interval: no line
        progress_bar.report(1000, 1000, 50000, 10.0)  # the last one is always shown
    lines = out.getvalue().splitlines()
    assert lines == [
        "scoring: 100/1,000 rows (10%), 50.0 rows/s, 2,500 tokens/s, about 18 s left",
        "scoring: 1,000/1,000 rows (100%), 100.0 rows/s, 5,000 tokens/s, done in 10.0 s",
    ]
    progress_bar.report(5, 10, 5, 1.0)  # nothing installed any more: nothing shown
    assert out.getvalue().splitlines() == lines


def test_bar_on_a_terminal_and_log_lines_above_it():
    out = Terminal()
    logger = logging.getLogger("prefect.test_progress_bar")
    handler = ConsoleHandler(io.StringIO())
    logger.addHandler(handler)
    try:
        with progress_bar.progress_display(out) as display:
            assert isinstance(display, progress_bar.BarDisplay)
            progress_bar.report(50, 200, 4000, 1.0)
            assert handler.console is display.progress.console  # Prefect's log lines print above the bar
            marked = logger.makeRecord(
                logger.name, logging.INFO, __file__, 1, "scored 50/200", None, None, extra={progress_bar.PROGRESS_RECORD: True}
            )
            plain = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "reading input", None, None)
            assert not handler.filter(marked) and handler.filter(plain)  # the bar replaces the periodic progress lines
            progress_bar.report(200, 200, 16000, 2.0)
            assert handler.console == "prefect's console"  # scoring done: the bar is gone, the console put back
        assert handler.filter(marked)  # and the progress lines are back once the display is gone
    finally:
        logger.removeHandler(handler)
    shown = out.getvalue()
    assert "200/200" in shown and "100.0 rows/s" in shown and "8,000 tok/s" in shown and "left" in shown

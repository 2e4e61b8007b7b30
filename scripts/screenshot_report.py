"""Take the README's screenshot of a report (docs/report.png) with headless Chromium.

    .venv/bin/python scripts/screenshot_report.py                 # a report with every section (tests' metrics fixture)
    .venv/bin/python scripts/screenshot_report.py runs/demo-2      # the report of a run folder

Run from the repository root. Chromium is Debian's `chromium` package.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import find_chromium, screenshot  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a run folder (its report/report.html); default: the fixture with every section")
    parser.add_argument("--out", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2500)
    args = parser.parse_args()
    chromium = find_chromium()
    if not chromium:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.run:
            page = Path(args.run).resolve() / "report" / "report.html"
        else:
            from scorekeeper.report.report import render_html
            from tests.report_fixture import full_metrics

            page = Path(tmp) / "report.html"
            page.write_text(render_html(*full_metrics(failing_gate=False)))
        screenshot(chromium, page, Path(args.out), args.width, args.height)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

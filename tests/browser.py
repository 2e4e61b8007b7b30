"""Headless Chromium for the report's checks: find it, dump a page's DOM with the
errors it raised, take a screenshot, and read a PNG without Pillow."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--virtual-time-budget=15000"]

# Put first in a copy of the page: records script errors, console.error calls and failed loads
# (images, styles, fonts) into an element that --dump-dom then shows.
ERROR_HOOK = """<script>
window.__errors = [];
window.addEventListener("error", function (e) {
  window.__errors.push(e.message || ("failed to load " + ((e.target && (e.target.src || e.target.href)) || "?")));
}, true);
var __consoleError = console.error;
console.error = function () { window.__errors.push("console.error: " + Array.prototype.join.call(arguments, " ")); __consoleError.apply(console, arguments); };
window.addEventListener("load", function () {
  var out = document.createElement("pre"); out.id = "__errors"; out.textContent = JSON.stringify(window.__errors);
  document.body.appendChild(out);
});
</script>"""


def find_chromium() -> str | None:
    """The chromium binary, or None. Tests never install it: ./setup.sh does (Debian's `chromium`,
    when run as root with apt-get), and the browser tests skip, saying so, where it is missing."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(chromium: str, page: Path) -> tuple[str, list[str]]:
    """(the DOM after load, the errors it raised): the page is opened through a copy with
    ERROR_HOOK first in <head>, and Chromium's own console log lines count as errors too."""
    hooked = page.with_name(page.stem + ".hooked.html")
    hooked.write_text(page.read_text().replace("<head>", "<head>" + ERROR_HOOK, 1))
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, "--enable-logging=stderr", "--v=0", "--dump-dom", hooked.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="__errors">(.*?)</pre>', done.stdout, re.S)
    assert found, "the page never finished loading"
    import html

    errors = json.loads(html.unescape(found.group(1)))
    errors += [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, errors


def screenshot(chromium: str, page: Path, out: Path, width: int = 1400, height: int = 1400) -> Path:
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return out


def png_pixels(path: Path) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit RGB/RGBA PNG, unfiltered (no Pillow)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unsupported PNG: depth {depth}, colour type {colour}"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def distinct_colours(path: Path, step: int = 3) -> int:
    """How many colours a sample of the image's pixels holds (1 = a blank, single-colour image)."""
    width, height, bpp, rows = png_pixels(path)
    colours = set()
    for row in rows[::step]:
        for x in range(0, width * bpp, bpp * step):
            colours.add(row[x : x + 3])
    return len(colours)

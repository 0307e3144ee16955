"""Debian's Chromium driven by Playwright for Python, for the dashboard's browser tests and its screenshot.

Never ``playwright install``: the browser is the system's ``/usr/bin/chromium`` (``scripts/install`` puts it
there), started headless with everything that would reach beyond this machine switched off. Every
address but loopback goes to a dead proxy on 127.0.0.1:9, so a page that tried to load anything from the
internet would fail (and log a console error the tests catch) instead of leaving the machine.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, ConsoleMessage, Error, Page, Playwright, ViewportSize

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--proxy-server=http://127.0.0.1:9",  # loopback is never proxied: everything else goes nowhere
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


async def launch(pw: Playwright) -> Browser:
    return await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)


@dataclass
class Tab:
    """A page and everything it reported as an error: console ``error`` messages and uncaught exceptions."""

    page: Page
    errors: list[str] = field(default_factory=list)

    @classmethod
    async def open(cls, browser_or_context: Any) -> Tab:
        page = await browser_or_context.new_page()
        tab = cls(page)
        page.on("console", tab._console)
        page.on("pageerror", tab._page_error)
        return tab

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} ({message.location.get('url', '')})")

    def _page_error(self, error: Error) -> None:
        self.errors.append(f"page error: {error}")


# The screenshot is decoded by the browser itself (an <img> drawn on a canvas): no imaging library needed.
_PNG_STATS = """async (data) => {
  const img = new Image();
  img.src = "data:image/png;base64," + data;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const first = [px[0], px[1], px[2]];
  const colours = new Set();
  let differ = 0;
  let seen = 0;
  for (let i = 0; i < px.length; i += 16, seen++) {  // every 4th pixel is plenty to tell a page from a blank
    if (Math.abs(px[i] - first[0]) + Math.abs(px[i + 1] - first[1]) + Math.abs(px[i + 2] - first[2]) > 24) differ++;
    colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  }
  return {width: canvas.width, height: canvas.height, colours: colours.size, differ: differ / seen};
}"""


@dataclass(frozen=True)
class PngStats:
    width: int
    height: int
    colours: int  # distinct colours among every 4th pixel
    differ: float  # share of pixels visibly unlike the top-left one


async def png_stats(blank: Page, path: Path) -> PngStats:
    """What a PNG file holds, decoded in ``blank`` (a page of its own, e.g. about:blank); raises if it is not a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return PngStats(**await blank.evaluate(_PNG_STATS, base64.b64encode(data).decode()))

"""The console's working line (issue 45, "never a silent wait"): a person who typed a line sees
that the bot is on it, and for how long, until the reply's first words.

On a terminal ``Companion is thinking… 12 s`` shows at once and is redrawn in place every second;
piped output gets one line, ``(Companion is thinking…)``, once ``PIPED_AFTER_S`` passed without a
reply (a quick reply leaves a transcript as it was). A CPU model took 420 s for a reply, silently.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

PIPED_AFTER_S = 1.5  # under the 2 s a person waits before wondering whether anything happens
CLEAR = "\r\x1b[K"  # back to the line's start, and the line emptied


class Working:
    """``start()`` when the line is sent; ``stop()`` before the reply is printed gives what to write
    first (on a terminal: the working line cleared)."""

    def __init__(self, write: Callable[[str], None], name: str, *, tty: bool) -> None:
        self._write, self._tty = write, tty
        self._label = f"{name} is thinking…"
        self._task: asyncio.Task[None] | None = None
        self._shown = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> str:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        shown, self._shown = self._shown, False
        return CLEAR if shown and self._tty else ""

    async def _run(self) -> None:
        started = time.monotonic()
        if not self._tty:
            await asyncio.sleep(PIPED_AFTER_S)
            self._write(f"({self._label})\n")
            return
        self._shown = True
        self._write(self._label)
        while True:
            await asyncio.sleep(1.0)
            self._write(f"{CLEAR}{self._label} {time.monotonic() - started:.0f} s")

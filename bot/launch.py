"""Starting the chat platforms for ``companion run`` (OPS-5): a platform that cannot connect (no network yet,
an outage) is retried with backoff, one log line per failure, while the others serve. A refused token is
not a network problem: it ends the run at once, naming the platform (``LoginRejected``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .adapters.common import LoginRejected

log = logging.getLogger(__name__)
FIRST_RETRY_S = 2.0
LONGEST_WAIT_S = 120.0


def retry_delay(failures: int, first: float = FIRST_RETRY_S) -> float:
    """2, 4, 8, ... seconds, at most two minutes: a long outage costs one line every two minutes."""
    return min(first * 2 ** (failures - 1), LONGEST_WAIT_S)


async def keep_starting(
    adapter: Any,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    first: float = FIRST_RETRY_S,
) -> None:
    """``adapter.start()`` until it succeeds; ``LoginRejected`` goes up, anything else waits and tries again."""
    failures = 0
    while True:
        try:
            await adapter.start()
        except LoginRejected:
            raise
        except (
            Exception
        ) as exc:  # a network edge: the library's own error type varies (httpx, aiohttp, PTB)
            if _caused_by(exc, SETTINGS_NOT_OUTAGES):
                raise
            failures += 1
            delay = retry_delay(failures, first)
            log.warning(
                "%s: cannot connect (%s); try %d, next in %g s",
                adapter.platform,
                _one_line(exc),
                failures,
                delay,
            )
            await sleep(delay)
        else:
            if failures:
                log.info("%s: connected after %d failed tries", adapter.platform, failures)
            return


async def serve(adapters: Sequence[Any], stop: asyncio.Event, first: float = FIRST_RETRY_S) -> None:
    """Start every adapter (each retrying on its own) and wait for ``stop``; a refused token ends it early."""
    starting = {
        asyncio.create_task(keep_starting(a, first=first), name=f"start-{a.platform}")
        for a in adapters
    }
    stopped = asyncio.create_task(stop.wait())
    try:
        while not stopped.done():
            done, _ = await asyncio.wait({stopped, *starting}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopped}:
                starting.discard(task)
                task.result()  # LoginRejected: the operator must fix the token; the caller says which
    finally:
        for task in (*starting, stopped):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# Failures that waiting cannot fix: a switch in the platform's developer portal (by name: only adapters import discord).
SETTINGS_NOT_OUTAGES = ("PrivilegedIntentsRequired",)


def _caused_by(exc: BaseException | None, names: tuple[str, ...]) -> bool:
    while exc is not None:
        if type(exc).__name__ in names:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _one_line(exc: BaseException) -> str:
    """The error and its root cause on one line (PTB wraps httpx's ConnectError in a NetworkError)."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    root = exc.__cause__ or exc.__context__
    if root is not None and str(root) and str(root) not in text:
        text += f" ({type(root).__name__}: {str(root).splitlines()[0]})"
    return text[:300]

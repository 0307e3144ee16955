"""Replies first (issue 45): a person's reply never waits behind background work on the same model.

A local model answers one request at a time (llama.cpp's one slot): a reply asked while an
extraction held the slot waited ~300 s behind it, and the first reply after a restart 110-125 s
behind the extraction left from the last session. When the chat model and the background jobs share
a local server, they share one ``ModelGate``: a reply holds ``reply()`` for its whole turn; a
background call (``background``) waits while any reply is in work, and one already running when a
reply comes is cancelled (its request closed: llama.cpp drops it within a second and the slot is
the reply's) and asked again once the replies are done. The job does not see it: its claim is
renewed meanwhile (``bot.jobs``) and its answer is the one asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class ModelGate:
    """Replies before background calls on one model server."""

    def __init__(self) -> None:
        self._replies = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._running: set[asyncio.Future[Any]] = set()
        self.yielded = 0  # background calls cancelled for a reply (each asked again)

    @contextlib.asynccontextmanager
    async def reply(self) -> AsyncIterator[None]:
        """A reply's turn: background calls wait, and the ones running now are cancelled."""
        self._replies += 1
        self._quiet.clear()
        for call in self._running:
            if call.cancel():
                self.yielded += 1
        try:
            yield
        finally:
            self._replies -= 1
            if not self._replies:
                self._quiet.set()

    async def background(self, ask: Callable[[], Awaitable[T]]) -> T:
        """``ask()`` once no reply is in work; asked again whenever a reply cancels it."""
        while True:
            await self._quiet.wait()
            call: asyncio.Future[T] = asyncio.ensure_future(ask())
            self._running.add(call)
            try:
                return await call
            except asyncio.CancelledError:
                if not _yielded(call):
                    raise  # this job itself is cancelled (shutdown): so is its call
                log.info("a background call to the model gave way to a reply; asked again after it")
            finally:
                self._running.discard(call)


def _yielded(call: asyncio.Future[Any]) -> bool:
    """The call was cancelled by a reply, not by a cancellation of the task awaiting it."""
    current = asyncio.current_task()
    return call.cancelled() and (current is None or not current.cancelling())

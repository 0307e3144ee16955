"""Per-person message rate limit (OPS-5): a member flooding the bot cannot spend the model budget.

At most ``messages`` replies per ``window_s`` for each person (linked accounts share it), edits counted too: an
edit is extracted again, so 40 edits cost 55 model calls before (issue 31); one over the limit only withdraws
the old words (as a delete: no model call). The first message
over the limit gets one polite line, the rest of the flood gets nothing (a reply to each would be a flood
of its own). A message over the limit is not stored either: it never reached the bot, and the polite line
says so. Commands (/forget, /export, ...) are never limited: they cost no model call, and /forget must
always work. The windows live in the store, so the limit holds across every process of a sharded bot (SCALE-1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from memory import AsyncRunner, RateWindows

from .health import Metrics
from .types import Conversation, IncomingMessage, PassThrough, Reply, StreamSink

SLOW_DOWN = "You're sending messages faster than I can think; I've skipped this one. Give me a minute, then try again?"


@dataclass(frozen=True, slots=True)
class MessageLimit:
    messages: int  # 0: no limit
    window_s: float


class Window:
    """The accounts' sliding windows of reply times, in the store (``memory.storage.ratelimits``): every process of
    a sharded bot counts against the same window (SCALE-1). Read and written on the memory thread."""

    def __init__(
        self,
        limit: MessageLimit,
        windows: RateWindows,
        runner: AsyncRunner,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.limit, self._windows, self._runner, self._now = limit, windows, runner, now

    async def admit(self, platform: str, user_id: str) -> bool | None:
        """True: answer; False: over the limit, say so once; None: over the limit and already told."""
        limit, window_s = self.limit.messages, self.limit.window_s
        return await self._runner.run(
            self._windows.admit_person, platform, user_id, limit, window_s, self._now()
        )


class Limited(PassThrough):
    """A ``Conversation`` whose replies are rate limited per account; everything else passes through."""

    def __init__(self, inner: Conversation, window: Window, metrics: Metrics | None = None) -> None:
        super().__init__(inner)
        self._window, self._metrics = window, metrics

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        verdict = await self._window.admit(message.platform, message.author_id)
        if verdict:
            return await self._inner.reply(message, stream)
        if self._metrics is not None:
            self._metrics.rate_limited += 1
        return Reply(SLOW_DOWN if verdict is False else "", skipped=verdict is None)

    async def message_edited(self, message: IncomingMessage) -> None:
        """An edit costs an extraction, so it counts; over the limit the old words are withdrawn, nothing is asked."""
        if await self._window.admit(message.platform, message.author_id):
            return await self._inner.message_edited(message)
        if self._metrics is not None:
            self._metrics.rate_limited += 1
        if message.message_id:
            await self._inner.message_deleted(
                message.platform, message.channel_id, (message.message_id,)
            )


def front_door(inner: Conversation, window: Window, metrics: Metrics | None) -> Conversation:
    """What the chat adapters talk to: the orchestrator, counted for /metrics, behind the rate limit."""
    from .health import Counted

    counted: Conversation = Counted(inner, metrics) if metrics is not None else inner
    return Limited(counted, window, metrics) if window.limit.messages > 0 else counted

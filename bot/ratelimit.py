"""Per-person message rate limit (OPS-5): a member flooding the bot cannot spend the model budget.

At most ``messages`` replies per ``window_s`` for each account (``platform:user id``). The first message
over the limit gets one polite line, the rest of the flood gets nothing (a reply to each would be a flood
of its own). A message over the limit is not stored either: it never reached the bot, and the polite line
says so. Commands (/forget, /export, ...) are never limited: they cost no model call, and /forget must
always work.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .health import Metrics
from .types import Conversation, IncomingMessage, PassThrough, Reply, StreamSink

SLOW_DOWN = "You're sending messages faster than I can think; I've skipped this one. Give me a minute, then try again?"


@dataclass(frozen=True, slots=True)
class MessageLimit:
    messages: int  # 0: no limit
    window_s: float


class Window:
    """Sliding windows of reply times per account, and whether the account was already told to slow down."""

    def __init__(self, limit: MessageLimit, now: Callable[[], float] = time.monotonic) -> None:
        self.limit, self._now = limit, now
        self._seen: dict[str, deque[float]] = {}
        self._told: set[str] = set()

    def admit(self, account: str) -> bool | None:
        """True: answer; False: over the limit, say so once; None: over the limit and already told."""
        now = self._now()
        seen = self._seen.setdefault(account, deque())
        while seen and seen[0] <= now - self.limit.window_s:
            seen.popleft()
        if len(seen) < self.limit.messages:
            seen.append(now)
            self._told.discard(account)
            return True
        if account in self._told:
            return None
        self._told.add(account)
        return False


class Limited(PassThrough):
    """A ``Conversation`` whose replies are rate limited per account; everything else passes through."""

    def __init__(self, inner: Conversation, window: Window, metrics: Metrics | None = None) -> None:
        super().__init__(inner)
        self._window, self._metrics = window, metrics

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        verdict = self._window.admit(f"{message.platform}:{message.author_id}")
        if verdict:
            return await self._inner.reply(message, stream)
        if self._metrics is not None:
            self._metrics.rate_limited += 1
        return Reply(SLOW_DOWN if verdict is False else "", skipped=verdict is None)


def front_door(inner: Conversation, limit: MessageLimit, metrics: Metrics | None, now: Callable[[], float] = time.monotonic) -> Any:
    """What the chat adapters talk to: the orchestrator, counted for /metrics, behind the rate limit."""
    from .health import Counted

    counted: Conversation = Counted(inner, metrics) if metrics is not None else inner
    return Limited(counted, Window(limit, now), metrics) if limit.messages > 0 else counted

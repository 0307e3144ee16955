"""What a turn hands the model's tool loop: its memory tools, each call on the memory thread and
leak-checked in a shared place (``AsyncTools``), and the stream sink that passes at most what history
keeps (``CappedSink``)."""

from __future__ import annotations

from typing import Any

from memory import AsyncRunner, MemoryEngine, MemoryTools, RateLimiter
from memory.models import CUT_MARK, MAX_MESSAGE_CHARS, Provenance
from voice.caches import HistoryCache

from ..assembly import Turn
from ..reminders.commands import reminder_place_of
from ..spoken.sessions import VoiceConversation, cached_search
from ..types import StreamSink
from .leak_guard import TOOL_REFUSED, WouldLeak, tool_text


class CappedSink:
    """A stream sink that passes at most what history keeps of a reply, the cut marked once (as ``bounded``)."""

    def __init__(self, sink: StreamSink) -> None:
        self.sink, self.room = sink, MAX_MESSAGE_CHARS - len(CUT_MARK)

    async def __call__(self, text: str) -> None:
        if self.room < 0:
            return  # already cut
        if len(text) <= self.room:
            self.room -= len(text)
            await self.sink(text)
            return
        head, self.room = text[: self.room], -1
        await self.sink(head + CUT_MARK)


class AsyncTools:
    """MemoryTools for the LLM loop: every call runs on the memory thread. In voice, ``history`` caches
    conversation searches (VOICE-3)."""

    def __init__(
        self, tools: MemoryTools, runner: AsyncRunner, history: HistoryCache[str] | None = None
    ) -> None:
        self.tools, self.runner, self.history = tools, runner, history
        self.guard: WouldLeak | None = (
            None  # the leak check of the place, set once the turn's prompt is made
        )

    def schemas(self) -> list[dict[str, Any]]:
        return self.tools.schemas()

    @property
    def remembering(self) -> bool:
        """The turn's words go to extraction (not /privacy off): "I'll remember that" is kept without a tool."""
        return self.tools.remembering

    @property
    def forgot(self) -> bool:
        """Something was forgotten this turn before the model was asked: "I've forgotten it" holds."""
        return bool(self.tools.deleted)

    async def call(self, name: str, arguments: str) -> str:
        if self.guard is not None and await self.guard(tool_text(arguments)):
            # SEC-6 for tool arguments: a memory_store in a group of Alice's DM-private code word would file it
            # where the group sees it (and then the reply repeating it would pass); a search would carry it too.
            return TOOL_REFUSED
        if self.history is not None and name == "conversation_search":
            return await self.runner.run(cached_search, self.history, self.tools, arguments)
        return await self.runner.run(self.tools.call, name, arguments)


class TurnTools:
    """Builds each turn's tools. TOOLS-2: a voice session's memory writes are limited per person (5 a
    minute, one limiter a person for the process); text is not."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner
        self._limits: dict[str, RateLimiter] = {}

    def __call__(self, turn: Turn, session: VoiceConversation | None) -> AsyncTools:
        voice = turn.message.modality == "voice"
        limiter = (
            self._limits.setdefault(turn.person_id, RateLimiter(self.engine.clock))
            if voice
            else None
        )
        tools = MemoryTools(
            self.engine,
            turn.ctx,
            provenance=_provenance(turn),
            rate_limit=limiter,
            remembering=turn.remembered,
            # ORCH-13: a reminder fires where it was asked (text only)
            place=None if voice else reminder_place_of(turn),
        )
        return AsyncTools(tools, self.runner, session.history if session else None)


def _provenance(turn: Turn) -> Provenance:
    message = turn.message
    return Provenance(
        platform=message.platform,
        guild_id=turn.ctx.guild_id,
        channel_id=message.channel_id,
        message_ids=(message.message_id,) if message.message_id else (),
        sources=(turn.stored_id,) if turn.stored_id else (),
    )

"""One pipeline for every channel (ORCH-1):

    message -> scope resolution -> recall -> prompt assembly -> LLM tool loop -> reply -> history + extraction buffer

Blocking store work runs on the memory thread (``AsyncRunner``); the event loop only awaits it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.messages import NewMessage
from memory.models import Provenance
from memory.people import People
from memory.privacy import forget_sources
from memory.scopes import RecallContext
from memory.sessions import ChannelState, ExtractionBuffer, SessionSummaries
from memory.tools import MemoryTools, RateLimiter

from .assembly import Assembler, Turn
from .commands import Commands
from .llm import ChatClient, LLMError
from .types import IncomingMessage, Reply, StreamSink

log = logging.getLogger(__name__)
APOLOGY = "Sorry — I couldn't think straight just now. Your message is saved; please try again in a moment."


@dataclass(frozen=True, slots=True)
class OwnerPolicy:
    """Platform-qualified owner ids ("discord:123", "telegram:55", "console:local-user")."""

    owners: frozenset[str] = frozenset()

    def is_owner(self, platform: str, user_id: str) -> bool:
        return f"{platform}:{user_id}" in self.owners


class AsyncTools:
    """MemoryTools for the LLM loop: every call runs on the memory thread."""

    def __init__(self, tools: MemoryTools, runner: AsyncRunner) -> None:
        self.tools, self.runner = tools, runner

    def schemas(self) -> list[dict[str, Any]]:
        return self.tools.schemas()

    async def call(self, name: str, arguments: str) -> str:
        return await self.runner.run(self.tools.call, name, arguments)


class Orchestrator:
    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, llm: ChatClient, *, owners: OwnerPolicy = OwnerPolicy(),
                 buffer: ExtractionBuffer, summaries: SessionSummaries, assembler_options: dict | None = None,
                 voice: bool = False) -> None:
        self.engine, self.runner, self.llm, self.owners, self.buffer, self.voice = engine, runner, llm, owners, buffer, voice
        self.people = People(engine)
        self.channels = ChannelState(engine)
        self.assembler = Assembler(engine, self.people, summaries, self.channels, **(assembler_options or {}))
        self.commands = Commands(engine, self.people, self.resolve)
        self._limits: dict[str, RateLimiter] = {}

    # -- the Conversation protocol -------------------------------------------------------------------
    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        turn = await self.runner.run(self.resolve, message)
        snap = await self.runner.run(self.assembler.snapshot, turn)
        system = self.assembler.system_prompt(turn, snap, self.engine.clock.now())
        tools = self._tools(turn)
        convo = [{"role": "system", "content": system}, *snap.history, {"role": "user", "content": self._user_text(turn)}]
        try:
            text = await self.llm.run(convo, tools, stream) or "…"
        except LLMError:
            log.exception("no reply for %s/%s", message.platform, message.channel_id)
            await self.runner.run(self._record, turn, None)
            return Reply(APOLOGY, failed=True)
        deleted = tools.tools.deleted
        await self.runner.run(self._record, turn, text, deleted)
        return Reply(text, tuple(d["content"] for d in deleted))

    async def observe(self, message: IncomingMessage) -> None:
        turn = await self.runner.run(self.resolve, message)
        await self.runner.run(self._record, turn, None)

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        return await self.runner.run(self.commands.run, name, argument, message)

    # -- steps ---------------------------------------------------------------------------------------
    def resolve(self, message: IncomingMessage) -> Turn:
        """Scope resolution: platform ids to people, and the context every read of this turn is made for."""
        person = self.people.resolve(message.platform, message.author_id, message.author_name)
        names = {person: message.author_name or self.people.name(person)}
        for user_id, name in message.participants:
            names.setdefault(self.people.resolve(message.platform, user_id, name), name or user_id)
        owner = self.owners.is_owner(message.platform, message.author_id) and message.is_dm
        ctx = RecallContext(platform=message.platform, speaker_id=person, channel_id=message.channel_id,
                            guild_id=_guild_key(message), participants=tuple(names)[1:], is_dm=message.is_dm,
                            owner_private=owner, owner_id=person if owner else None)
        return Turn(message, person, ctx, f"{message.platform}:{message.channel_id}", names)

    def _tools(self, turn: Turn) -> AsyncTools:
        limiter = self._limits.setdefault(turn.person_id, RateLimiter(self.engine.clock)) if self.voice else None
        provenance = Provenance(platform=turn.message.platform, guild_id=turn.ctx.guild_id, channel_id=turn.message.channel_id,
                                message_ids=(turn.message.message_id,) if turn.message.message_id else ())
        return AsyncTools(MemoryTools(self.engine, turn.ctx, provenance=provenance, rate_limit=limiter), self.runner)

    def _user_text(self, turn: Turn) -> str:
        return turn.message.text if turn.ctx.is_dm else f"{turn.message.author_name}: {turn.message.text}"

    def _record(self, turn: Turn, reply: str | None, deleted: list[dict[str, Any]] | None = None) -> None:
        """History and extraction buffer. A turn that forgot something keeps no copy of it anywhere (ORCH-3)."""
        self.channels.touch(turn.channel_key, turn.ctx)
        self.engine.memories.flush_access()
        if deleted:
            forget_sources(self.engine, [d.get("provenance") or {} for d in deleted], asked_in=(turn.message.platform, turn.message.channel_id))
            return
        m = turn.message
        base = dict(platform=m.platform, channel_id=m.channel_id, guild_id=turn.ctx.guild_id,
                    dm_person_id=turn.person_id if turn.ctx.is_dm else None)
        self.engine.messages.add(NewMessage(author_id=turn.person_id, author_name=m.author_name, content=m.text,
                                            platform_message_id=m.message_id, **base))
        self.buffer.push(turn.channel_key, turn.ctx, m.text, author_name=m.author_name, message_id=m.message_id)
        if reply:
            self.engine.messages.add(NewMessage(author_id="bot", author_name=self.assembler.bot_name, content=reply,
                                                role="assistant", **base))


def _guild_key(message: IncomingMessage) -> str | None:
    """Guild ids are namespaced by platform so a Discord guild and a Telegram group never share memory."""
    return f"{message.platform}:{message.guild_id}" if message.guild_id else None


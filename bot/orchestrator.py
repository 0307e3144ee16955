"""One pipeline for every channel (ORCH-1): the ``Conversation`` every adapter talks to.

    message -> scope resolution -> recall -> prompt assembly -> LLM tool loop -> reply -> history + extraction buffer

A reply is the stages of ``bot.turn`` (arrive, prepare, answer, keep, finish); here are the other
events a place sends (a message observed, a reaction, a command, an edit or a delete, a voice
session's end) and the group manners' decision. A spoken turn (``modality="voice"``) takes the same
path with its voice session's caches for the recall and history (``voice_mode``), short spoken
replies and a rate limit on memory writes; in a group, a turn not spoken to the bot may be answered
with silence (``turn_mode``).

Blocking store work runs on the memory thread (``AsyncRunner``); the event loop only awaits it.
"""

from __future__ import annotations

import logging

from memory import AsyncMemory, AsyncRunner, MemoryEngine, Mode

from .assembly import Assembler, Snapshot, Turn
from .commands import CommandDesk
from .images.vision import Sight, VisionOptions, with_notes
from .manners import GroupManners, PlaceReads
from .model.client import ChatClient
from .resolution import Resolver
from .spoken.sessions import VoiceSessions
from .turn.asked import AskedInWords
from .turn.guard import CheckedAnswer
from .turn.stages import Replying, ReplyParts, said_of
from .turn.tools import TurnTools
from .types import IncomingMessage, Reaction, Reply, StreamSink, Verdict

log = logging.getLogger(__name__)


class Orchestrator:
    """The events of every place over collaborators the composition root built
    (``bot.composition.build_orchestrator``); a reply is ``bot.turn.stages.Replying``."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        llm: ChatClient,
        *,
        resolver: Resolver,
        memory: AsyncMemory,
        assembler: Assembler,
        commands: CommandDesk,
        voice: VoiceSessions,
        manners: GroupManners,
        sight: Sight | None = None,
    ) -> None:
        self.engine, self.runner, self.resolver, self.memory = engine, runner, resolver, memory
        self.turns = memory.turns
        self.assembler, self.commands, self.voice = assembler, commands, voice
        self.people, self.owners, self.zones, self.channels = (
            resolver.people,
            resolver.owners,
            resolver.zones,
            resolver.channels,
        )
        self.persona, self.manners_of = assembler.persona, manners
        # ORCH-11: what a shared image leaves
        self.sight = sight or Sight(llm, runner, None, VisionOptions("off"))
        self.places = PlaceReads(engine, resolver, runner)  # ORCH-10
        self.replying = Replying(
            ReplyParts(
                clock=engine.clock,
                runner=runner,
                resolver=resolver,
                turns=memory.turns,
                assembler=assembler,
                voice=voice,
                manners=manners,
                sight=self.sight,
                tools=TurnTools(engine, runner),
                answer=CheckedAnswer(llm, memory.turns, lambda: assembler.bot_name),
                asked=AskedInWords(commands),
            ),
            memory.reminding,
        )

    @property
    def llm(self) -> ChatClient:
        """The chat client the replies ask (``modelcheck`` watches it through this)."""
        return self.replying.parts.answer.llm

    @llm.setter
    def llm(self, client: ChatClient) -> None:
        self.replying.parts.answer.llm = client

    # -- the Conversation protocol -------------------------------------------------------------------
    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        answered = await self.without_model(message)
        if answered is not None:
            return answered
        return await self.replying.reply(message, stream)

    async def without_model(self, message: IncomingMessage) -> Reply | None:
        """A "yes" to "/forget everything?" (or "no"): done without the model, and not stored; None for any other message."""
        answered = await self.commands.answer_to_question(message)
        if answered is None:
            return None
        await self._forgot()
        return Reply(answered)

    async def observe(self, message: IncomingMessage) -> None:
        # group talk's photos are remembered as their captions too
        message, _ = await self.sight.look(message)
        await self.turns.observe(said_of(await self.replying.resolve(message)))

    async def manners(self, message: IncomingMessage, listening: bool) -> Verdict:
        """ORCH-10: the CPU decision; the place's memory words are read on the memory thread when stale."""
        key = f"{message.platform}:{message.channel_id}"
        mode = await self.places.mode(key, listening)
        if mode is Mode.CHIME_IN and self.manners_of.stale(key):
            self.manners_of.learn_memories(key, await self.places.memory_texts(message))
        return await self.manners_of.decide(mode, message, key)

    async def posted(self, message: IncomingMessage, post_ids: tuple[str, ...]) -> None:
        if message.message_id and post_ids:
            await self.turns.posted(
                message.platform, message.channel_id, message.message_id, post_ids
            )

    async def reacted(self, reaction: Reaction) -> None:
        await self.memory.reactions.receive(reaction)  # ORCH-12

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        answer = await self.commands.run(name, argument, message)
        if name.lower().lstrip("/") in ("forget", "about", "privacy"):
            # a forget or a veto, or /privacy off: no voice transcript may keep the words
            await self._forgot()
        return answer

    async def voice_ended(self, platform: str, guild_id: str, channel_id: str) -> None:
        summary = await self.voice.end(f"{platform}:{channel_id}")
        log.info(
            "voice session in %s:%s ended%s",
            platform,
            channel_id,
            " (summary kept)" if summary else "",
        )

    async def message_deleted(
        self, platform: str, channel_id: str, message_ids: tuple[str, ...]
    ) -> None:
        done = await self.turns.deleted(platform, channel_id, message_ids)
        if done.messages:
            await self._forgot()
            log.info(
                "%d messages deleted at the source in %s:%s; %d memories withdrawn",
                done.messages,
                platform,
                channel_id,
                len(done.memories),
            )

    async def message_edited(self, message: IncomingMessage) -> None:
        if not await self.turns.known(message.platform, message.channel_id, message.message_id):
            return  # never stored (said before the bot was there, or a forgetting turn): nobody to resolve
        # ORCH-11: the photos' captions stay
        message = await self.runner.run(with_notes, self.engine, message)
        # the edit with its author's context now (the new text is extracted as theirs)
        done = await self.turns.edited(said_of(await self.replying.resolve(message)))
        if done is not None:
            await self._forgot()
            log.info(
                "a message edited in %s:%s; %d memories withdrawn",
                message.platform,
                message.channel_id,
                len(done.memories),
            )

    async def _forgot(self) -> None:
        """Something may have been forgotten: no in-process cache may keep a copy of it (SEC-3)."""
        await self.voice.forgot()

    def resolve(self, message: IncomingMessage) -> Turn:
        return self.resolver.resolve(message)

    def peek(self, message: IncomingMessage) -> Turn:
        return self.resolver.peek(message)

    def preview(self, message: IncomingMessage) -> tuple[Turn, Snapshot]:
        """The runtime snapshot (ORCH-5): the memory slice a reply to ``message`` would get, computed the way a
        reply computes it, without the model and without writing (no identity, no access count)."""
        turn = self.peek(message)
        return turn, self.assembler.snapshot(turn, reinforce=False)

    def dm_channel(self, platform: str, user_id: str) -> str:
        return self.resolver.dm_channel(platform, user_id)

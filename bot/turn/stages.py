"""A reply, as named stages over the turn's one value, which grows by stage:

    arrive    images looked at, the message resolved to a turn and stored before anything is asked
              (write-ahead, ORCH-6)                                               -> Turn, Seen
    prepare   the voice session, the manner of speaking, the tools, a forget asked in words done,
              then the memory snapshot (ORCH-5; shorter as a budget nears) and the prompt -> Asking
    answer    the model's tool loop, leak-checked before anything is seen (SEC-6) -> Replied
    keep      a reminder asked in words set; no promise the store does not hold (ORCH-13)
    finish    the reply into history and extraction, the manners' state, the memories it used
              (ORCH-10/12), caches emptied after a forget                         -> Reply

Each stage is one method of ``Replying``; the values are frozen, each stage returns a new one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any

from memory import AsyncRunner, Clock, Reminding, Said, Turns, only_asks
from memory.models import Arrival

from ..assembly import Assembler, Snapshot, Turn, clock_note
from ..images.vision import Seen, Sight, without_notes
from ..manners import GroupManners
from ..model.client import LLMError
from ..model.honesty import only_refuses
from ..model.language import ANSWER_IN, written_in
from ..reminders.claims import held_to_its_word
from ..resolution import Resolver
from ..spending.budgets import fitted
from ..spoken.sessions import VoiceConversation, VoiceSessions
from ..types import APOLOGY, NO_ANSWER, IncomingMessage, Reply, StreamSink
from .asked import AskedInWords
from .guard import CheckedAnswer
from .mode import TurnMode, is_skip
from .tools import AsyncTools, CappedSink, TurnTools

log = logging.getLogger("bot.orchestrator")  # the name operators filter a failed reply by
FORGET_DONE = "Done: I've forgotten that."  # the reply to a message that only asked to forget


@dataclass(frozen=True, slots=True)
class Asking:
    """A turn ready for the model; ``only_forgets``: nothing but an ask to forget, already done,
    so it is answered without the model."""

    turn: Turn
    seen: Seen
    session: VoiceConversation | None
    mode: TurnMode
    snap: Snapshot
    tools: AsyncTools
    convo: tuple[dict[str, Any], ...]
    only_forgets: bool


@dataclass(frozen=True, slots=True)
class Replied:
    """``text`` None: the model failed (``failure``), and the person gets the apology (ORCH-6)."""

    asking: Asking
    text: str | None
    failure: LLMError | None = None

    @property
    def forgotten(self) -> tuple[str, ...]:
        return tuple(self.asking.tools.tools.deleted)

    @property
    def skipped(self) -> bool:
        return self.text is not None and is_skip(self.text)


@dataclass(frozen=True, slots=True)
class ReplyParts:
    """What the stages are made of (built once by ``bot.composition.build_orchestrator``)."""

    clock: Clock
    runner: AsyncRunner
    resolver: Resolver
    turns: Turns
    assembler: Assembler
    voice: VoiceSessions
    manners: GroupManners
    sight: Sight
    tools: TurnTools
    answer: CheckedAnswer
    asked: AskedInWords


class Replying:
    def __init__(self, parts: ReplyParts, reminding: Reminding) -> None:
        self.parts, self.reminding = parts, reminding

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        arrived = await self.arrive(message)
        if arrived is None:
            # nothing readable (a lone zero-width space), or a re-delivery already answered
            return Reply("")
        stream = CappedSink(stream) if stream else None
        asking = await self.prepare(*arrived)
        replied = await self.keep(await self.answer(asking, stream), stream)
        await self.finish(replied)
        return await self.told(replied, stream)

    # -- the stages ----------------------------------------------------------------------------------
    async def arrive(self, message: IncomingMessage) -> tuple[Turn, Seen] | None:
        """ORCH-11: each image becomes a note in the text (a caption); the turn is stored and held
        before the model is asked anything (ORCH-6, ``memory.turns``). None: nothing to answer."""
        message, seen = await self.parts.sight.look(message)
        turn = await self.resolve(message)
        turn = arrived(turn, await self.parts.turns.arrive(said_of(turn)))
        return None if not turn.text or turn.answered else (turn, seen)

    async def prepare(self, turn: Turn, seen: Seen) -> Asking:
        """A forget asked in words goes first: the snapshot the model is shown is recalled after it,
        so what was just forgotten is not in the prompt, and a message that only asks to forget
        recalls nothing at all (it is answered without the model)."""
        p = self.parts
        session = p.voice.open(turn) if turn.message.modality == "voice" else None
        follow_up = bool(session and session.follows_up(turn))
        mode = TurnMode.of(turn, p.assembler.bot_name, follow_up=follow_up)
        tools = p.tools(turn, session)
        note, forgot = await p.asked.forget(turn, tools)
        if forgot:
            await p.voice.forgot()
        only_forgets = forgot and only_asks(without_notes(turn.text))
        # a voice turn is answered from its session's caches (VOICE-2/3/4); a text turn recalls afresh
        snap = (
            Snapshot([], [], [])
            if only_forgets
            else await p.runner.run(self._snapshot, turn, session)
        )
        snap = fitted(snap)  # ORCH-14: shorter as a budget nears
        system = p.assembler.system_prompt(turn, snap, p.clock.now(), style=mode.style)
        user = {"role": "user", "content": seen.content(self._user_text(turn, note))}
        convo: tuple[dict[str, Any], ...] = (
            {"role": "system", "content": system},
            *snap.history,
            user,
        )
        return Asking(turn, seen, session, mode, snap, tools, convo, only_forgets)

    async def answer(self, asking: Asking, stream: StreamSink | None) -> Replied:
        if asking.only_forgets:
            if stream is not None:
                await stream(FORGET_DONE)
            return Replied(asking, FORGET_DONE)
        try:
            text = await self.parts.answer(
                asking.turn, list(asking.convo), asking.tools, stream, asking.mode.may_skip
            )
        except LLMError as exc:  # the turn is kept and answered with the apology (ORCH-6)
            message = asking.turn.message
            log.exception("no reply for %s/%s", message.platform, message.channel_id)
            return Replied(asking, None, exc)
        return Replied(asking, text)

    async def keep(self, replied: Replied, stream: StreamSink | None) -> Replied:
        """Issue 45: a reminder asked in words is set, whatever the model did; ORCH-13: no promise
        the store does not hold."""
        asking, text = replied.asking, replied.text
        note = await self.parts.asked.remind(asking.turn, asking.tools, stream if text else None)
        if note:
            kept = "" if stream is None and only_refuses(text or "") else text
            return replace(replied, text=f"{kept}\n\n({note})" if kept else note)
        tools = asking.tools.tools
        return replace(replied, text=await held_to_its_word(text, tools, self.reminding, stream))

    async def finish(self, replied: Replied) -> None:
        """The reply joins the history, the message becomes due for extraction; a turn that forgot
        something keeps none of its own words (ORCH-3, ``memory.turns``)."""
        p, asking, text = self.parts, replied.asking, replied.text
        turn, forgotten, skipped = asking.turn, replied.forgotten, replied.skipped
        # "no answer" is not the bot's words: a small model shown it in history says it again
        kept = None if skipped or text == NO_ANSWER else text
        await p.turns.finish(
            said_of(turn),
            arrival_of(turn),
            kept,
            replier=p.assembler.bot_name,
            forgot=bool(forgotten),
        )
        if text is not None and not skipped and not forgotten:
            await self._spoke(turn, text, asking.snap.memory_ids)
        if forgotten:
            await p.voice.forgot()
        elif asking.session is not None and turn.remembered:
            asking.session.record(turn, None if skipped else text, p.assembler.bot_name)
            p.voice.compact_soon(turn.channel_key)

    async def told(self, replied: Replied, stream: StreamSink | None) -> Reply:
        """What the person gets: the reply and what follows it, the apology, or nothing (skipped)."""
        text, forgotten = replied.text, replied.forgotten
        if text is None:
            return Reply(APOLOGY, forgotten, failed=True, failure=replied.failure)
        if replied.skipped:
            return Reply("", forgotten, skipped=True)
        return Reply(text + await self._afterword(replied.asking, stream), forgotten)

    # -- helpers -------------------------------------------------------------------------------------
    async def resolve(self, message: IncomingMessage) -> Turn:
        return await self.parts.runner.run(self.parts.resolver.resolve, message)

    def _snapshot(self, turn: Turn, session: VoiceConversation | None) -> Snapshot:
        preloaded = self.parts.voice.preload(session, turn) if session else None
        return self.parts.assembler.snapshot(turn, preloaded=preloaded)

    async def _spoke(self, turn: Turn, text: str, memory_ids: list[str]) -> None:
        """The bot replied: its words feed the next manners decision here, and the reply keeps the
        ids of the memories it used, so a reaction on it can move them (ORCH-10/12). Nothing is kept
        when the turn is not."""
        p = self.parts
        p.manners.spoke(turn.channel_key, turn.message.author_id, text)
        if turn.remembered and turn.stored_id and memory_ids:
            await p.turns.used(turn.stored_id, memory_ids)

    async def _afterword(self, asking: Asking, stream: StreamSink | None) -> str:
        """What follows the reply: why an image was not looked at (ORCH-11: a clear line), and a
        zone offer."""
        refused = asking.seen.told()
        if refused and stream is not None:
            await stream(refused)
        return refused + await self._zone_offer(asking.turn, stream)

    async def _zone_offer(self, turn: Turn, stream: StreamSink | None) -> str:
        """ORCH-8: someone who says where they live ("I live in Lisbon") is offered that zone, never
        given it silently: a wrong guess would move their day. In DMs only (it is their own setting);
        not kept in history. After /privacy off it is offered, never recorded (SEC-5: "I live in
        Reykjavik" leaves nothing behind)."""
        zones = self.parts.resolver.zones
        offered = zones.offer if turn.remembered else zones.unrecorded_offer
        zone = (
            await self.parts.runner.run(offered, turn.person_id, turn.text)
            if turn.ctx.is_dm
            else None
        )
        if zone is None:
            return ""
        offer = f"\n\n(Shall I use {zone} for you? /timezone {zone})"
        if stream is not None:
            await stream(offer)
        return offer

    def _user_text(self, turn: Turn, note: str = "") -> str:
        said = (
            turn.text
            if turn.ctx.is_dm
            else f"{json.dumps(turn.names[turn.person_id], ensure_ascii=False)}: {turn.text}"
        )
        said += f"\n\n{note}" if note else ""
        # the minute comes last (ORCH-9)
        language = written_in(turn.text)
        note = clock_note(self.parts.clock.now(), turn.ctx.tz, ANSWER_IN.get(language or ""))
        return f"{said}\n\n{note}"


def said_of(turn: Turn) -> Said:
    """The turn as the store keeps it."""
    m = turn.message
    return Said(
        turn.ctx, turn.channel_key, turn.names[turn.person_id], turn.text, m.message_id, m.modality
    )


def arrival_of(turn: Turn) -> Arrival:
    return Arrival(turn.stored_id, turn.buffer_id, turn.remembered, turn.answered)


def arrived(turn: Turn, arrival: Arrival) -> Turn:
    return replace(
        turn,
        stored_id=arrival.stored_id,
        buffer_id=arrival.buffer_id,
        remembered=arrival.remembered,
        answered=arrival.answered,
    )

"""One pipeline for every channel (ORCH-1):

    message -> scope resolution -> recall -> prompt assembly -> LLM tool loop -> reply -> history + extraction buffer

A spoken turn (``modality="voice"``) takes the same path with its voice session's caches for the recall and
history (``voice_mode``), short spoken replies and a rate limit on memory writes; in a group, a turn not
spoken to the bot may be answered with silence (``turn_mode``).

Blocking store work runs on the memory thread (``AsyncRunner``); the event loop only awaits it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import prompts
from memory import (
    AsyncMemory,
    AsyncRunner,
    MemoryEngine,
    MemoryTools,
    Mode,
    RateLimiter,
    Said,
    asked_reminder,
    forgets_in,
    only_asks,
)
from memory.models import CUT_MARK, MAX_MESSAGE_CHARS, Arrival, Provenance, bounded
from voice.caches import HistoryCache

from .assembly import Assembler, Snapshot, Turn, clock_note
from .budgets import fitted
from .commands import Commands
from .leak_guard import TOOL_REFUSED, WITHHELD, LeakGate, WouldLeak, tool_text
from .llm import ChatClient, LLMError
from .manners import GroupManners, place_memory_texts, place_mode
from .reactions import receive
from .reminder_claims import held_to_its_word
from .reminder_commands import SET, reminder_place_of
from .resolution import Resolver
from .turn_mode import SkipGate, TurnMode, is_skip
from .types import APOLOGY, NO_ANSWER, IncomingMessage, Reaction, Reply, StreamSink, Verdict
from .vision import Seen, Sight, VisionOptions, with_notes, without_notes
from .voice_mode import VoiceConversation, VoiceSessions, cached_search

log = logging.getLogger(__name__)
# A forget asked in words is a recall and a scan of the person's messages each: a message of a thousand
# "forget x." is not a thousand of them; what a person names fits in a few hundred characters.
MAX_ASKS, MAX_ASK_CHARS = 3, 300


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


class Orchestrator:
    """One reply pipeline over collaborators the composition root built (``bot.composition.build_orchestrator``)."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        llm: ChatClient,
        *,
        resolver: Resolver,
        memory: AsyncMemory,
        assembler: Assembler,
        commands: Commands,
        voice: VoiceSessions,
        manners: GroupManners,
        sight: Sight | None = None,
    ) -> None:
        self.engine, self.runner, self.llm, self.resolver, self.memory = (
            engine,
            runner,
            llm,
            resolver,
            memory,
        )
        self.turns = memory.turns
        self.assembler, self.commands, self.voice = assembler, commands, voice
        self.people, self.owners, self.zones, self.channels = (
            resolver.people,
            resolver.owners,
            resolver.zones,
            resolver.channels,
        )
        self.persona, self.manners_of = assembler.persona, manners
        self._limits: dict[str, RateLimiter] = {}
        # ORCH-11: what a shared image leaves
        self.sight = sight or Sight(llm, runner, None, VisionOptions("off"))

    # -- the Conversation protocol -------------------------------------------------------------------
    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        answered = await self.without_model(message)
        if answered is not None:
            return answered
        # ORCH-11: each image becomes a note in the text (a caption)
        message, seen = await self.sight.look(message)
        turn = await self._arrive(await self._resolve(message))
        if not turn.text or turn.answered:
            # nothing readable (a lone zero-width space), or a re-delivery already answered
            return Reply("")
        session = self.voice.open(turn) if message.modality == "voice" else None
        mode = TurnMode.of(
            turn, self.assembler.bot_name, follow_up=bool(session and session.follows_up(turn))
        )
        snap = fitted(await self._context(turn, session))  # ORCH-14: shorter as a budget nears
        system = self.assembler.system_prompt(turn, snap, self.engine.clock.now(), style=mode.style)
        tools = self._tools(turn, session)
        done, forgot = await self._forget_asked(turn, tools)
        user = {"role": "user", "content": seen.content(self._user_text(turn, done))}
        convo: list[dict[str, Any]] = [{"role": "system", "content": system}, *snap.history, user]
        stream = CappedSink(stream) if stream else None
        failure: LLMError | None = None
        try:
            text: str | None = (
                await _said_done(stream)
                if forgot and only_asks(without_notes(turn.text))
                else await self._answer(turn, convo, tools, stream, mode.may_skip)
            )
        except LLMError as exc:  # the turn is kept and answered with the apology (ORCH-6)
            log.exception("no reply for %s/%s", message.platform, message.channel_id)
            text, failure = None, exc
        # issue 45: a reminder asked in words is set, whatever the model did; ORCH-13: no unstored
        # promise
        note = await self._remind_asked(turn, tools, stream if text else None)
        text = (
            (f"{text}\n\n({note})" if text else note)
            if note
            else await held_to_its_word(text, tools.tools, self.memory.reminding, stream)
        )
        forgotten, skipped = tuple(tools.tools.deleted), text is not None and is_skip(text)
        # "no answer" is not the bot's words: a small model shown it in history says it again
        await self._finish(turn, None if skipped or text == NO_ANSWER else text, forgotten)
        if text is not None and not skipped and not forgotten:
            # ORCH-10/12: manners' state, the memories it used
            await self._spoke(turn, text, snap.memory_ids)
        if forgotten:
            await self._forgot()
        elif session is not None and turn.remembered:
            session.record(turn, None if skipped else text, self.assembler.bot_name)
            self.voice.compact_soon(turn.channel_key)
        if text is None:
            return Reply(APOLOGY, forgotten, failed=True, failure=failure)
        return (
            Reply("", forgotten, skipped=True)
            if skipped
            else Reply(text + await self._afterword(turn, seen, stream), forgotten)
        )

    async def without_model(self, message: IncomingMessage) -> Reply | None:
        """A "yes" to "/forget everything?" (or "no"): done without the model, and not stored; None for any other message."""
        answered = await self.runner.run(self.commands.answer_to_question, message)
        if answered is None:
            return None
        await self._forgot()
        return Reply(answered)

    async def observe(self, message: IncomingMessage) -> None:
        # group talk's photos are remembered as their captions too
        message, _ = await self.sight.look(message)
        await self.turns.observe(_said(await self._resolve(message)))

    async def manners(self, message: IncomingMessage, listening: bool) -> Verdict:
        """ORCH-10: the CPU decision; the place's memory words are read on the memory thread when stale."""
        key = f"{message.platform}:{message.channel_id}"
        mode = await self.runner.run(place_mode, self.engine.place_modes, key, listening)
        if mode is Mode.CHIME_IN and self.manners_of.stale(key):
            self.manners_of.learn_memories(
                key, await self.runner.run(place_memory_texts, self.engine, self.resolver, message)
            )
        return await self.manners_of.decide(mode, message, key)

    async def posted(self, message: IncomingMessage, post_ids: tuple[str, ...]) -> None:
        if message.message_id and post_ids:
            feedback = self.engine.feedback
            await self.runner.run(
                feedback.record_posts,
                message.platform,
                message.channel_id,
                message.message_id,
                list(post_ids),
            )

    async def reacted(self, reaction: Reaction) -> None:
        await self.runner.run(receive, self.engine, self.people, reaction)

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        answer = await self.runner.run(self.commands.run, name, argument, message)
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
        done = await self.turns.edited(_said(await self._resolve(message)))
        if done is not None:
            await self._forgot()
            log.info(
                "a message edited in %s:%s; %d memories withdrawn",
                message.platform,
                message.channel_id,
                len(done.memories),
            )

    # -- steps ---------------------------------------------------------------------------------------
    async def _spoke(self, turn: Turn, text: str, memory_ids: list[str]) -> None:
        """The bot answered: its words feed the next manners decision here, and the reply keeps the ids of the
        memories it used, so a reaction on it can move them (ORCH-12). Nothing is kept when the turn is not."""
        self.manners_of.spoke(turn.channel_key, turn.message.author_id, text)
        if turn.remembered and turn.stored_id and memory_ids:
            await self.runner.run(self.engine.feedback.record_used, turn.stored_id, memory_ids)

    async def _resolve(self, message: IncomingMessage) -> Turn:
        return await self.runner.run(self.resolve, message)

    async def _arrive(self, turn: Turn) -> Turn:
        """Write-ahead (ORCH-6): stored and held before the model is asked anything (``memory.turns``)."""
        return _arrived(turn, await self.turns.arrive(_said(turn)))

    async def _context(self, turn: Turn, session: VoiceConversation | None) -> Snapshot:
        """A voice turn is answered from its session's caches (VOICE-2/3/4); a text turn recalls afresh."""
        return await self.runner.run(self._snapshot, turn, session)

    async def _finish(self, turn: Turn, reply: str | None, forgotten: tuple[str, ...]) -> None:
        """The reply joins the history, the message becomes due for extraction; a turn that forgot something
        keeps none of its own words (ORCH-3, ``memory.turns``)."""
        await self.turns.finish(
            _said(turn),
            _arrival(turn),
            reply,
            replier=self.assembler.bot_name,
            forgot=bool(forgotten),
        )

    async def _ask(
        self,
        convo: list[dict[str, Any]],
        tools: AsyncTools,
        stream: StreamSink | None,
    ) -> str:
        """The LLM tool loop (``LLMError`` when the model failed). An answer is cut to what history
        keeps (a 400,000-character answer went out as 98 Telegram messages; history kept 8,000)."""
        return bounded((await self.llm.run(convo, tools, stream)).text or NO_ANSWER)

    async def _answer(
        self,
        turn: Turn,
        convo: list[dict[str, Any]],
        tools: AsyncTools,
        stream: StreamSink | None,
        may_skip: bool,
    ) -> str | None:
        """The model's reply; nothing of it is streamed, sent or spoken before the leak check (a DM too: another
        person's DM is a shared place for what someone else said, issue 31). The operator's own DM and console
        are the one place exempt: the operator holds the store (the dashboard and the CLI show every memory), so
        a check there would protect nothing and cost the console its word-by-word stream."""
        checked = not turn.ctx.owner_private
        if checked:
            tools.guard = lambda arguments: self._leaks(turn, arguments, "the tool call refused")
        gate = (
            LeakGate(stream, lambda said: self._leaks(turn, said)) if stream and checked else None
        )
        sink = gate or stream
        drafted = await self._ask(convo, tools, SkipGate(sink) if sink and may_skip else sink)
        text = await self._guarded(turn, convo, tools, drafted)
        if gate is not None:
            await gate.finish(text, drafted)
        return text

    async def _guarded(
        self, turn: Turn, convo: list[dict[str, Any]], tools: AsyncTools, text: str | None
    ) -> str | None:
        """SEC-6: a reply that would reveal what the place may not see is asked for once more, with a general
        instruction (the words stay out of the prompt), and withheld if it still would. Only what the person
        of a DM may see passes there: their own memories, never another person's (issue 31)."""
        if (
            text is None
            or turn.ctx.owner_private
            or not await self._leaks(turn, text, "asking the model again")
        ):
            return text
        try:
            again = await self._ask(
                [*convo, {"role": "system", "content": prompts.render("leak_retry")}], tools, None
            )
        except LLMError:
            log.exception("no second answer for %s", turn.channel_key)
            return WITHHELD
        return WITHHELD if await self._leaks(turn, again, "withheld") else again

    async def _leaks(self, turn: Turn, text: str, outcome: str = "") -> bool:
        """Would ``text`` reveal memories this place may not see? Logged with ids and kinds, never
        the words. The conversation shown is not "seen" as a whole: who said a word matters (a
        caption of Bob's holding Alice's DM fact is his guess or leak, not her word), which the
        check reads from the stored messages; only the names and the asker's words of this turn are
        passed."""
        seen = "\n".join([*turn.names.values(), self.assembler.bot_name])
        leaks = await self.turns.leaks(turn.ctx, text, seen, turn.text)
        if leaks and outcome:
            found = ", ".join(f"{leak.memory_id} ({leak.kind})" for leak in leaks)
            log.warning(
                "a reply (or tool call) in %s would reveal what this place may not see: %s; %s",
                turn.channel_key,
                found,
                outcome,
            )
        return bool(leaks)

    def _snapshot(self, turn: Turn, session: VoiceConversation | None) -> Snapshot:
        return self.assembler.snapshot(
            turn, preloaded=self.voice.preload(session, turn) if session else None
        )

    async def _afterword(self, turn: Turn, seen: Seen, stream: StreamSink | None) -> str:
        """What follows the reply: a zone offer, and why an image was not looked at (ORCH-11: a clear line)."""
        refused = seen.told()
        if refused and stream is not None:
            await stream(refused)
        return refused + await self._zone_offer(turn, stream)

    async def _zone_offer(self, turn: Turn, stream: StreamSink | None) -> str:
        """ORCH-8: someone who says where they live ("I live in Lisbon") is offered that zone, never given it
        silently: a wrong guess would move their day. In DMs only (it is their own setting); not kept in history.
        After /privacy off it is offered, never recorded (SEC-5: "I live in Reykjavik" leaves nothing behind)."""
        offered = self.zones.offer if turn.remembered else self.zones.unrecorded_offer
        zone = await self.runner.run(offered, turn.person_id, turn.text) if turn.ctx.is_dm else None
        if zone is None:
            return ""
        offer = f"\n\n(Shall I use {zone} for you? /timezone {zone})"
        if stream is not None:
            await stream(offer)
        return offer

    async def _forgot(self) -> None:
        """Something may have been forgotten: no in-process cache may keep a copy of it (SEC-3)."""
        await self.runner.run(self.voice.invalidate_all)

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

    def _tools(self, turn: Turn, session: VoiceConversation | None) -> AsyncTools:
        # TOOLS-2: a voice session's memory writes are limited per person (5 a minute); text is not.
        voice = turn.message.modality == "voice"
        limiter = (
            self._limits.setdefault(turn.person_id, RateLimiter(self.engine.clock))
            if voice
            else None
        )
        provenance = Provenance(
            platform=turn.message.platform,
            guild_id=turn.ctx.guild_id,
            channel_id=turn.message.channel_id,
            message_ids=(turn.message.message_id,) if turn.message.message_id else (),
            sources=(turn.stored_id,) if turn.stored_id else (),
        )
        return AsyncTools(
            MemoryTools(
                self.engine,
                turn.ctx,
                provenance=provenance,
                rate_limit=limiter,
                remembering=turn.remembered,
                place=None
                if voice
                else reminder_place_of(
                    turn
                ),  # ORCH-13: a reminder fires where it was asked (text only)
            ),
            self.runner,
            session.history if session else None,
        )

    async def _forget_asked(self, turn: Turn, tools: AsyncTools) -> tuple[str, bool]:
        """A forget asked in words ("forget my race bib number") is done before the model answers,
        as /forget would (SEC-3): real small models rarely call memory_delete for it (a 1.5B never
        did in 8 runs) and say "done" anyway. Only a plain ask (``memory.write.forget_asked``:
        "forget my bib number", "forget that I live in Leeds"), or "forget the half marathon." when
        they said "half marathon"; "don't keep my birthday a secret" is none, "forget the cheese,
        let's have pasta" and "forget that" are the model's to read, "forget everything" asks first
        (the command's question). What was done is told to the model, without the forgotten
        words; and whether anything was forgotten (a message that is nothing but the ask is then
        answered without the model: a real 1.5B, told it was done, answered "I'm sorry, but I can't
        forget things ...")."""
        read = [
            a
            for a in forgets_in([turn.person_id], [without_notes(turn.text)])
            if a.what and (a.plain or a.whole)  # "don't keep my birthday a secret": none (issue 44)
        ][:MAX_ASKS]
        asks = [a.what[:MAX_ASK_CHARS] for a in read if a.plain or await self._said(turn, a.what)]
        if not asks:
            return "", False
        done = [
            await self.runner.run(
                self.commands.forget_words, what, turn, skip=(turn.stored_id or "",)
            )
            for what in asks
        ]
        tools.tools.deleted.extend(word for d in done for word in d.contents)
        forgot = any(d.anything for d in done)
        return prompts.render("forget_done" if forgot else "forget_not_found"), forgot

    async def _remind_asked(
        self, turn: Turn, tools: AsyncTools, stream: StreamSink | None
    ) -> str | None:
        """ "remind me tomorrow at 9am to call the vet" with no reminder_set call (a 1.5B said "I've
        set a reminder" and set none): set as /remind would, and its answer told."""
        asked = asked_reminder(without_notes(turn.text))
        if asked is None or tools.tools.reminders_set:
            return None
        note = await self.runner.run(self.commands.run, "remind", " ".join(asked), turn.message)
        if not note.startswith(SET):
            return None  # a time it cannot read: the model's question stands, and no promise
        if stream is not None:
            await stream(f"\n\n({note})")
        return note

    async def _said(self, turn: Turn, words: str) -> bool:
        """ "Forget the half marathon" is an ask when the person said "half marathon" themselves."""
        own = self.commands.own
        skip = (turn.stored_id or "",)
        return await self.runner.run(own.said_it, turn.ctx, turn.person_id, words, skip=skip)

    def _user_text(self, turn: Turn, note: str = "") -> str:
        said = (
            turn.text
            if turn.ctx.is_dm
            else f"{json.dumps(turn.names[turn.person_id], ensure_ascii=False)}: {turn.text}"
        )
        said += f"\n\n{note}" if note else ""
        return f"{said}\n\n{clock_note(self.engine.clock.now(), turn.ctx.tz)}"  # the minute comes last (ORCH-9)


def _said(turn: Turn) -> Said:
    """The turn as the store keeps it."""
    m = turn.message
    return Said(
        turn.ctx, turn.channel_key, turn.names[turn.person_id], turn.text, m.message_id, m.modality
    )


def _arrival(turn: Turn) -> Arrival:
    return Arrival(turn.stored_id, turn.buffer_id, turn.remembered, turn.answered)


def _arrived(turn: Turn, arrival: Arrival) -> Turn:
    return replace(
        turn,
        stored_id=arrival.stored_id,
        buffer_id=arrival.buffer_id,
        remembered=arrival.remembered,
        answered=arrival.answered,
    )


FORGET_DONE = "Done: I've forgotten that."  # the reply to a message that only asked to forget


async def _said_done(stream: StreamSink | None) -> str:
    if stream is not None:
        await stream(FORGET_DONE)
    return FORGET_DONE

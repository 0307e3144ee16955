"""Voice sessions on the orchestrator's side (VOICE-2..5, CROSS-1): the memory a spoken turn is answered from.

    first voice turn in a channel --> VoiceConversation (one per voice channel, in process)
      recall     WarmMemory.turn: reuse | lexical refresh | full recall        (VOICE-2)
      behaviour  BehaviouralPool, per guild + participant set, re-ranked per turn (VOICE-3)
      tools      conversation_search through the HistoryCache (45 s, token Jaccard) (VOICE-3)
      history    the session's VoiceTranscript: 50 turns verbatim + rolling summary (VOICE-4),
                 compacted in a worker thread after the reply, each batch flushed to extraction (WRITE-4)
    session end (leave, empty channel, idle, shutdown)
      --> final summary persisted for the guild with modality "voice" (CROSS-1)
      --> the speech turns, already in the extraction buffer by write-ahead, due now (VOICE-5)
    any forget --> invalidate_all(): no cache or transcript keeps a copy of forgotten words
    a forget or edit by another process (the store's forget signal moved) --> invalidate_all() at the next turn

Threads: ``open``, ``record``, compaction and the final summary run on the event loop (compaction is a task
started after the reply, awaiting the model and extraction); ``preload``/``invalidate_all`` on the memory thread
(``AsyncRunner``), like every store read. No worker thread waits on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from memory import (
    AsyncCompleter,
    AsyncRunner,
    Charge,
    EndedSession,
    MemoryEngine,
    MemoryTools,
    SpokenSessions,
)
from voice.caches import BehaviouralPool, CacheSettings, HistoryCache
from voice.compaction import CompactionSettings, FlushCallback, VoiceTranscript, VoiceTurn
from voice.warm import WarmMemory, WarmSettings, memory_retrieval

from ..assembly import Preloaded, Turn
from ..model.client import ChatClient
from ..spending.attribution import charging, in_place

log = logging.getLogger(__name__)
Extract = Callable[[str], Awaitable[int]]  # a channel key -> facts stored from its buffered turns


@dataclass(frozen=True, slots=True)
class VoiceOptions:
    warm: WarmSettings = WarmSettings()
    caches: CacheSettings = CacheSettings()
    compaction: CompactionSettings = CompactionSettings()
    # "A reply to it" in speech: the person the bot just answered speaks again within this many seconds.
    follow_up_s: float = 20.0


class VoiceConversation:
    """One voice channel's session: its caches, its transcript and who took part."""

    def __init__(
        self,
        turn: Turn,
        engine: MemoryEngine,
        options: VoiceOptions,
        completer: AsyncCompleter,
        flush: FlushCallback,
    ) -> None:
        ctx, self.clock = turn.ctx, engine.clock
        self.key, self.platform, self.guild_id, self.channel_id = (
            turn.channel_key,
            ctx.platform,
            ctx.guild_id,
            ctx.channel_id,
        )
        self.started_at = engine.clock.now()
        self.people: dict[str, None] = {}  # person ids in order of first appearance
        self.warm: WarmMemory = WarmMemory(
            engine.embeddings.embed_queries, engine.clock, options.warm
        )
        self.history: HistoryCache[str] = HistoryCache(engine.clock, options.caches)
        self.transcript = VoiceTranscript(completer, flush, options.compaction)
        self.follow_up_s = options.follow_up_s
        self._answered: tuple[str, float] | None = None  # whom the bot answered last, and when
        self.compacting: asyncio.Future | None = None

    def follows_up(self, turn: Turn) -> bool:
        last = self._answered
        return (
            last is not None
            and last[0] == turn.person_id
            and self.clock.now() - last[1] <= self.follow_up_s
        )

    def history_messages(self) -> tuple[dict[str, str], ...]:
        """The verbatim turns as chat messages, names quoted as data (SEC-2) like the text path's history."""
        return tuple(
            {
                "role": t.role,
                "content": t.text
                if t.role == "assistant"
                else f"{json.dumps(t.speaker_name, ensure_ascii=False)}: {t.text}",
            }
            for t in self.transcript.turns
        )

    def record(self, turn: Turn, reply: str | None, bot_name: str) -> None:
        now = self.clock.now()
        self.transcript.append(
            VoiceTurn(turn.person_id, turn.names[turn.person_id], turn.text, now)
        )
        if reply:
            self.transcript.append(VoiceTurn("bot", bot_name, reply, now, role="assistant"))
            self._answered = (turn.person_id, now)

    def invalidate(self) -> None:
        self.warm.invalidate()
        self.history.invalidate()
        self.transcript.clear()


class VoiceSessions:
    """Every live voice session of the bot, by channel key ("discord:<voice channel id>")."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        llm: ChatClient,
        options: VoiceOptions = VoiceOptions(),
        *,
        extract: Extract | None = None,
    ) -> None:
        self.engine, self.runner, self.llm, self.options = engine, runner, llm, options
        self.spoken = SpokenSessions(engine, runner)  # what the store keeps of a session
        self.sessions: dict[str, VoiceConversation] = {}
        # keyed by guild + participants inside
        self.pool = BehaviouralPool(engine.memory_rows, options.caches)
        self._signal: int | None = (
            None  # the store's forget signal when the caches were last known current
        )
        # Extraction of a channel's buffered turns (``Background.extract``); without it (the bench) a flush only
        # makes the turns due for the next background tick.
        self.extract = extract

    # -- on the event loop ---------------------------------------------------------------------------------
    def open(self, turn: Turn) -> VoiceConversation:
        """The turn's session, started on its first turn; the turn's people join it."""
        session = self.sessions.get(turn.channel_key)
        if session is None:
            session = self.sessions[turn.channel_key] = VoiceConversation(
                turn,
                self.engine,
                self.options,
                functools.partial(
                    self._complete, in_place("compaction", turn.ctx)
                ),  # ORCH-14: the place's, no one's
                functools.partial(self._flush, turn.channel_key),
            )
        session.people.update(dict.fromkeys(turn.names))
        return session

    def compact_soon(self, key: str) -> None:
        """Fold due turns into the rolling summary after the reply, never while someone waits for one."""
        session = self.sessions.get(key)
        if (
            session
            and session.transcript.due
            and (session.compacting is None or session.compacting.done())
        ):
            session.compacting = asyncio.ensure_future(session.transcript.compact())

    async def end(self, key: str) -> int | None:
        """Persist the session's summary and make its speech turns due for extraction; the summary's id, if any."""
        session = self.sessions.pop(key, None)
        if session is None:
            return None
        if session.compacting is not None:
            await asyncio.gather(session.compacting, return_exceptions=True)
        text = await session.transcript.final_summary()
        return await self.spoken.ended(
            EndedSession(
                session.key,
                session.platform,
                session.guild_id,
                session.channel_id,
                tuple(session.people),
                text,
                session.started_at,
            )
        )

    async def end_all(self) -> None:
        for key in list(self.sessions):
            await self.end(key)

    # -- on the memory thread --------------------------------------------------------------------------------
    def preload(self, session: VoiceConversation, turn: Turn) -> Preloaded:
        self._follow_other_processes()
        warm = session.warm.turn(turn.text, memory_retrieval(self.engine.recall, turn.ctx))
        rules = tuple(self.pool.facts(turn.ctx, turn.text))
        return Preloaded(
            warm.snapshot, rules, session.history_messages(), session.transcript.summary
        )

    def _follow_other_processes(self) -> None:
        """Another process of this bot (SCALE-1), or a CLI command, forgot or edited words: what these caches hold may
        be among them, so all goes as after a forget here. A counter read (PostgreSQL) or a PRAGMA (SQLite) per turn."""
        signal = self.engine.forget_signal()
        if self._signal is not None and signal != self._signal:
            log.info(
                "voice: the store changed in another process; warm snapshots and caches dropped"
            )
            self.invalidate_all()
        self._signal = signal

    def invalidate_all(self) -> None:
        """After any forget: every warm snapshot, pool, cached search and transcript goes."""
        self.pool.invalidate()
        for session in list(self.sessions.values()):
            session.invalidate()

    async def forgot(self) -> None:
        """``invalidate_all`` from the event loop, on the memory thread (SEC-3: after a forget, no
        in-process cache may keep a copy of it)."""
        await self.runner.run(self.invalidate_all)

    # -- on the event loop, for compaction ---------------------------------------------------------------------
    async def _complete(
        self, charge: Charge, system: str, user: str, *, temperature: float = 0.0
    ) -> str:
        with charging(charge):
            return await self.llm.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=temperature,
            )

    async def _flush(self, key: str, turns: tuple[VoiceTurn, ...]) -> None:
        """WRITE-4: the turns about to be folded are in the extraction buffer (write-ahead); extract them now."""
        await self.spoken.flushed(key)
        if self.extract is not None:
            await self.extract(key)


def cached_search(history: HistoryCache[str], tools: MemoryTools, arguments: str) -> str:
    """conversation_search in voice (VOICE-3): a similar question within 45 s is answered from the cache."""
    try:
        args = json.loads(arguments or "{}")
        query, top_k = str(args["query"]), args.get("topK")
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
        # the tool explains what is wrong with the call
        return tools.call("conversation_search", arguments)
    # never an answer read for other eyes
    scope = (
        tools.ctx.message_partitions(),
        tools.ctx.channels(),
        top_k,
    )
    found = history.get(query, scope=scope)
    if found is None:
        found = tools.call("conversation_search", arguments)
        if not found.startswith("Error:"):  # a refusal is not an answer worth keeping
            history.put(query, found, scope=scope)
    return found

"""Background memory work for conversations, scheduled: debounced extraction (WRITE-1), session-end
micro-reflection (WRITE-3), pre-compaction flush and text compaction (WRITE-4, ORCH-4).

What a model answer means (prompts, parsing, attribution) is ``memory.extraction``'s business; this
module only decides when to ask, asks, and stores. Everything is driven by ``tick()``, which compares
persisted due times with the injected clock, so a restart resumes where the process stopped and tests
advance a fake clock instead of sleeping.

A job that fails (the model is down, answers garbage, or anything unexpected) is postponed with
backoff for that chat only; every other chat's jobs in the same tick still run. An extraction batch
that keeps failing is parked in ``dead_letters`` (``companion stats`` shows it), never dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

import prompts
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.errors import MemoryStoreError
from memory.extraction import (
    BadAnswer,
    Line,
    Transcript,
    extraction_prompt,
    memories_from,
    parse_list,
    parse_reflection,
    reflection_prompt,
    with_speaker,
)
from memory.maintenance import audit_finish, audit_start
from memory.models import NewMemory, Source, StoredMessage
from memory.scopes import RecallContext
from memory.sessions import ChannelRecord, ChannelState, ExtractionBuffer, SessionSummaries
from memory.tombstones import unforgotten

from .llm import ChatClient, LLMError

log = logging.getLogger(__name__)
EXCERPT_TURNS, EXCERPT_CHARS = 80, 9_000
COMPACT_AFTER, KEEP_VERBATIM, SUMMARY_CHARS = 60, 20, 1_200
GIVE_UP_REFLECTION_AFTER = 3  # failed tries; the session's turns stay in history either way
JOB_FAILED = (LLMError, BadAnswer)
ZoneName = Callable[[str], str]  # a person id -> their IANA time zone (``memory.timezones.Timezones.name_of``)


class Background:
    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        llm: ChatClient,
        buffer: ExtractionBuffer,
        channels: ChannelState,
        summaries: SessionSummaries,
        *,
        silence_s: float = 600.0,
        zone_of: ZoneName | None = None,
    ) -> None:
        self.engine, self.runner, self.llm, self.buffer = engine, runner, llm, buffer
        self.channels, self.summaries, self.silence_s = channels, summaries, silence_s
        self.zone_of = zone_of

    async def tick(self) -> dict[str, int]:
        """Run whatever is due now: extraction of quiet channels, reflection on ended sessions, compaction."""
        done = {"extracted": 0, "reflected": 0, "compacted": 0}
        for channel in await self.runner.run(self.buffer.due_channels):
            done["extracted"] += await self._guarded(channel, self.extract(channel))
        for state in await self.runner.run(self.channels.silent, self.silence_s):
            done["reflected"] += await self._guarded(state.channel_key, self.reflect(state))
        for state in await self.runner.run(self._crowded):
            done["compacted"] += await self._guarded(state.channel_key, self.compact(state))
        await self.runner.run(self.summaries.expire)
        return done

    async def _guarded(self, channel_key: str, job: Awaitable[int]) -> int:
        """A background-job edge: one chat's unexpected failure is logged and backed off, never the tick's end."""
        try:
            return await job
        except Exception:
            log.exception("background job for %s failed; it will be retried later", channel_key)
            await self.runner.run(self.channels.failed, channel_key)
            return 0

    async def flush(self) -> None:
        """Graceful shutdown: extract every buffered message now, due or not."""
        for channel in await self.runner.run(self.buffer.channels):
            await self._guarded(channel, self.extract(channel))

    # -- WRITE-1 ---------------------------------------------------------------------------------------
    async def extract(self, channel: str) -> int:
        items = await self.runner.run(self.buffer.take, channel)
        if not items:
            return 0
        ids = [i.id for i in items]
        said = [Line(i.ctx, i.author_name, i.text, i.message_id, i.created_at) for i in items]
        replies = await self.runner.run(self._replies_to, [i.message_id for i in items if i.message_id])
        transcript = Transcript(tuple(sorted(said + replies, key=lambda line: line.at or 0.0)))
        try:
            candidates = parse_list(await self._ask(extraction_prompt(transcript, items[-1].ctx)))
            stored = await self._store(memories_from(candidates, transcript, Source.AUTO_EXTRACTION))
        except JOB_FAILED as exc:
            parked = await self.runner.run(self.buffer.fail, ids, f"{type(exc).__name__}: {exc}")
            log.warning("extraction for %s %s: %s", channel, "parked in dead_letters" if parked else "postponed", exc)
            return 0
        await self.runner.run(self.buffer.done, ids)
        return stored

    def _replies_to(self, message_ids: list[str]) -> list[Line]:
        """The bot's replies to the buffered turns, as [bot] lines: what it said about itself becomes its self
        facts there (ORCH-7). Only replies are read, never the rest of the channel: that is other people's."""
        messages = self.engine.messages
        rows = messages.get_rids(messages.replies_to(messages.rids_by_id(message_ids))) if message_ids else []
        return [Line(None, r.author_name, r.content, r.id, r.created_at) for r in rows if r.role == "assistant"]

    async def _ask(self, prompt: str, system: str = "You extract memories. Answer with JSON only.") -> str:
        return await self.llm.complete([{"role": "system", "content": system}, {"role": "user", "content": prompt}], temperature=0.0)

    async def ask(self, prompt: str, system: str) -> str:
        """The extraction model, for other jobs that read conversations (MAINT-4's daily reflection)."""
        return await self._ask(prompt, system)

    async def store_facts(self, memories: list[NewMemory]) -> int:
        """The one write path of extracted facts (judge, dedup, supersession), for other jobs (MAINT-4)."""
        return await self._store(memories)

    async def _store(self, memories: list[NewMemory]) -> int:
        stored = 0
        # SEC-5: a forgotten fact read again in what remains (a day's turns, a batch) is not learned back
        for new in await self.runner.run(unforgotten, self.engine, memories):
            try:
                contradicted = await self._judge(new)
                result = await self.runner.run(self.engine.memories.add, new, contradicts=contradicted)
                stored += result.status == "stored"
            except MemoryStoreError as exc:
                log.info("extracted fact not stored: %s", exc)
        return stored

    async def _judge(self, new: NewMemory) -> frozenset[str]:
        """WRITE-5: the extraction model judges whether a new fact contradicts a related one on the same subject."""
        found = set()
        for old in await self.runner.run(self.engine.memories.to_judge, new):
            pair = json.dumps({"old": old.content, "new": new.content}, ensure_ascii=False)
            try:
                answer = await self.llm.complete([{"role": "user", "content": prompts.render("contradiction", pair=pair)}], temperature=0.0)
            except LLMError:
                continue  # no verdict: the facts are only linked as related
            if answer.strip().lower().startswith("yes"):
                found.add(old.id)
        return frozenset(found)

    # -- WRITE-3 and CROSS-1 -------------------------------------------------------------------------------
    async def reflect(self, state: ChannelRecord) -> int:
        ctx, key = state.ctx, state.channel_key
        rows = await self.runner.run(self._excerpt_rows, ctx, state.session_started_at)
        if not rows:
            await self.runner.run(self.channels.mark_reflected, key)
            return 0
        transcript = _transcript(ctx, rows, self.zone_of)
        people = tuple(c.speaker_id for c in transcript.speakers().values())
        audit = await self.runner.run(audit_start, self.engine, "micro", key, transcript.render()[-2000:], channel_key=key, people=people)
        try:
            answer = await self._ask(reflection_prompt(transcript, ctx), "You reflect on conversations. Answer with JSON only.")
            candidates, summary = parse_reflection(answer)
        except JOB_FAILED as exc:
            await self.runner.run(self._reflection_failed, state, audit, str(exc))
            return 0
        memories = memories_from(candidates, transcript, Source.REFLECTION)
        stored = await self._store(memories)
        await self.runner.run(self._finish_session, state, ctx, people, summary, audit, [m.content for m in memories])
        return stored

    def _excerpt_rows(self, ctx: RecallContext, since: float) -> list[StoredMessage]:
        rows = [r for r in self.engine.messages.recent(ctx, ctx.channel_id, EXCERPT_TURNS, learnable=True) if r.created_at >= since]
        while rows and sum(len(r.content) for r in rows) > EXCERPT_CHARS:
            rows.pop(0)
        return rows

    def _finish_session(
        self, state: ChannelRecord, ctx: RecallContext, people: tuple[str, ...], summary: str, audit: int, facts: list[str]
    ) -> None:
        if summary.strip():
            self.summaries.add(
                platform=ctx.platform,
                guild_id=ctx.guild_id,
                channel_id=ctx.channel_id,
                participants=sorted(people),
                text=summary.strip()[:1200],
                started_at=state.session_started_at,
            )
        audit_finish(self.engine, audit, facts=facts)
        self.channels.mark_reflected(state.channel_key)
        self.channels.succeeded(state.channel_key)

    def _reflection_failed(self, state: ChannelRecord, audit: int, error: str) -> None:
        """Audited, then retried with backoff; after a few tries given up (the turns stay searchable in history)."""
        audit_finish(self.engine, audit, error=error)
        if state.failures + 1 >= GIVE_UP_REFLECTION_AFTER:
            self.channels.mark_reflected(state.channel_key)
        self.channels.failed(state.channel_key)

    # -- WRITE-4 and ORCH-4 -------------------------------------------------------------------------------
    def _crowded(self) -> list[ChannelRecord]:
        """Channels with more uncompacted turns than fit comfortably: context pressure."""
        out = []
        active = self.engine.clock.now() - self.silence_s  # only channels that spoke lately can have grown
        for state in self.channels.active(active):
            ctx = state.ctx
            if self.engine.messages.count_in_channel_after(ctx.platform, ctx.channel_id, state.compacted_until) > COMPACT_AFTER:
                out.append(state)
        return out

    async def compact(self, state: ChannelRecord) -> int:
        ctx, key = state.ctx, state.channel_key
        rows = await self.runner.run(self._to_compact, ctx, state.compacted_until)
        if not rows:
            return 0
        transcript = _transcript(ctx, rows, self.zone_of)
        try:
            await self._flush_before_compaction(transcript, ctx)
            prompt = prompts.render(
                "compaction", previous=state.rolling_summary or "(none)", turns=transcript.render(), max_chars=SUMMARY_CHARS
            )
            summary = await self.llm.complete([{"role": "user", "content": prompt}], temperature=0.0)
        except LLMError:
            log.warning("compaction of %s postponed: the model is unavailable", key)
            await self.runner.run(self.channels.failed, key)
            return 0
        await self.runner.run(self.channels.set_summary, key, summary.strip()[:SUMMARY_CHARS], rows[-1].created_at)
        await self.runner.run(self.channels.succeeded, key)
        return 1

    async def _flush_before_compaction(self, transcript: Transcript, ctx: RecallContext) -> None:
        """WRITE-4: the turns about to leave the context get an extraction pass first. A garbled answer
        costs only this pass: the turns stay stored, and were buffered for ordinary extraction too."""
        try:
            candidates = parse_list(await self._ask(extraction_prompt(transcript, ctx)))
        except BadAnswer as exc:
            log.warning("pre-compaction extraction answer unusable: %s", exc)
            return
        await self._store(memories_from(candidates, transcript, Source.AUTO_EXTRACTION))

    def _to_compact(self, ctx: RecallContext, since: float) -> list[StoredMessage]:
        rows = self.engine.messages.in_channel_after(ctx.platform, ctx.channel_id, since)
        return rows[:-KEEP_VERBATIM] if len(rows) > KEEP_VERBATIM else []


def transcript_of(ctx: RecallContext, rows: list[StoredMessage], zone_of: ZoneName | None = None) -> Transcript:
    """Stored turns as a transcript (public for the daily reflection, which reads a day of a chat the same way)."""
    return _transcript(ctx, rows, zone_of)


def _transcript(ctx: RecallContext, rows: list[StoredMessage], zone_of: ZoneName | None = None) -> Transcript:
    """Stored turns as a transcript: each human turn with its author's own context (and time zone), the bot's as [bot]."""

    def speaker(author_id: str) -> RecallContext:
        return with_speaker(ctx, author_id, zone_of(author_id) if zone_of else "")

    return Transcript(
        tuple(Line(speaker(r.author_id) if r.role == "user" else None, r.author_name, r.content, r.id, r.created_at) for r in rows)
    )

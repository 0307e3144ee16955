"""The model-calling jobs on a live conversation, in ``memory.jobs.base``'s shape (gather -> ask -> apply -> report):

    Extraction      a quiet channel's buffered turns (and the bot's replies to them) -> facts     (WRITE-1)
    Reflection      an ended session's excerpt -> facts and a session summary                   (WRITE-3, CROSS-1)
    Compaction      turns beyond the context -> an extraction pass, then the rolling summary      (WRITE-4, ORCH-4)

Each learns ``Facts`` that ``WriteFacts`` stores with the job's bookkeeping in one transaction. When to run them
(debounce, silence, backoff) is the bot's business (``bot.background``); what an answer means is
``memory.write.extraction``'s.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import prompts

from ..engine import MemoryEngine
from ..models import NewMemory, Source, StoredMessage
from ..protocols import AsyncCompleter
from ..scopes import RecallContext
from ..storage.sessions import (
    Buffered,
    ChannelRecord,
    ChannelState,
    ExtractionBuffer,
    SessionSummaries,
)
from ..write.answers import FACTS_SCHEMA
from ..write.extraction import (
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
from ..write.tombstones import learnable, sources_stored
from .base import NONE_LEARNED, Facts, ask_for_json

log = logging.getLogger(__name__)
EXTRACT_SYSTEM = "You extract memories. Answer with JSON only."
REFLECT_SYSTEM = "You reflect on conversations. Answer with JSON only."
EXCERPT_TURNS, EXCERPT_CHARS = 80, 9_000
COMPACT_AFTER, KEEP_VERBATIM, SUMMARY_CHARS = 60, 20, 1_200
GIVE_UP_REFLECTION_AFTER = 3  # failed tries; the session's turns stay in history either way
# a person id -> their IANA time zone (``memory.storage.timezones.Timezones.name_of``)
ZoneName = Callable[[str], str]


def transcript_of(
    ctx: RecallContext, rows: list[StoredMessage], zone_of: ZoneName | None = None
) -> Transcript:
    """Stored turns as a transcript: each human turn with its author's own context (and time zone), the bot's as [bot]."""

    def speaker(author_id: str) -> RecallContext:
        return with_speaker(ctx, author_id, zone_of(author_id) if zone_of else "")

    return Transcript(
        tuple(
            Line(
                speaker(r.author_id) if r.role == "user" else None,
                r.author_name,
                r.content,
                r.id,
                r.created_at,
            )
            for r in rows
        )
    )


async def extracted(
    model: AsyncCompleter, transcript: Transcript, ctx: RecallContext, source: Source
) -> tuple[NewMemory, ...]:
    """One extraction pass over a transcript; ``BadAnswer`` when the answer is not a list of candidates."""
    answer = await ask_for_json(
        model, EXTRACT_SYSTEM, extraction_prompt(transcript, ctx), FACTS_SCHEMA
    )
    candidates = parse_list(answer)
    memories = tuple(memories_from(candidates, transcript, source))
    if len(memories) < len(candidates):
        why = "the others named no speaker, had unusable fields or were past the limit"
        log.info("extraction: %d of %d candidates filed; %s", len(memories), len(candidates), why)
    return memories


# -- WRITE-1 ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Batch:
    ids: tuple[int, ...]
    transcript: Transcript
    ctx: RecallContext


@dataclass(frozen=True, slots=True)
class Extraction:
    """A channel's buffered turns become facts; a failing batch is retried with backoff, then parked."""

    engine: MemoryEngine
    buffer: ExtractionBuffer
    channel: str

    def gather(self) -> Batch | None:
        items = self.buffer.take(self.channel)
        if not items:
            return None
        said = [Line(i.ctx, i.author_name, i.text, i.message_id, i.created_at) for i in items]
        transcript = Transcript(
            tuple(sorted(said + self._replies_to(items), key=lambda line: line.at or 0.0))
        )
        return Batch(tuple(i.id for i in items), transcript, items[-1].ctx)

    def _replies_to(self, items: list[Buffered]) -> list[Line]:
        """The bot's replies to the buffered turns, as [bot] lines: what it said about itself becomes its self
        facts there (ORCH-7). Only replies are read, never the rest of the channel: that is other people's."""
        message_ids = [i.message_id for i in items if i.message_id]
        messages = self.engine.messages
        rows = (
            messages.get_rids(messages.replies_to(messages.rids_by_id(message_ids)))
            if message_ids
            else []
        )
        return [
            Line(None, r.author_name, r.content, r.id, r.created_at)
            for r in rows
            if r.role == "assistant"
        ]

    async def ask(self, plan: Batch, model: AsyncCompleter) -> tuple[NewMemory, ...]:
        return await extracted(model, plan.transcript, plan.ctx, Source.AUTO_EXTRACTION)

    def apply(self, plan: Batch, answer: tuple[NewMemory, ...]) -> Facts:
        return Facts(answer, functools.partial(_done, self.buffer, list(plan.ids)))

    def failed(self, plan: Batch, error: Exception) -> Facts:
        parked = self.buffer.fail(list(plan.ids), f"{type(error).__name__}: {error}")
        log.warning(
            "extraction for %s %s: %s",
            self.channel,
            "parked in dead_letters" if parked else "postponed",
            error,
        )
        return NONE_LEARNED


def _done(buffer: ExtractionBuffer, ids: list[int], stored: int) -> None:
    buffer.done(ids)


# -- WRITE-3 and CROSS-1 -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Session:
    transcript: Transcript
    people: tuple[str, ...]
    audit: int | None  # None: nothing was said since the session started
    doubted: tuple[
        tuple[str, str], ...
    ] = ()  # (id, content) of memories here a 👎 marked for recheck (ORCH-12)


@dataclass(frozen=True, slots=True)
class Reflected:
    memories: tuple[NewMemory, ...] = ()
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Reflection:
    """An ended session: facts, and a summary the next session in the place starts from; audited."""

    engine: MemoryEngine
    channels: ChannelState
    summaries: SessionSummaries
    state: ChannelRecord
    zone_of: ZoneName | None = None

    def gather(self) -> Session | None:
        ctx, key = self.state.ctx, self.state.channel_key
        if not self._still_unreflected():
            return None
        rows = excerpt_rows(self.engine, ctx, self.state.session_started_at)
        transcript = transcript_of(ctx, rows, self.zone_of)
        people = tuple(c.speaker_id for c in transcript.speakers().values())
        if not rows:
            return Session(transcript, people, None)
        audit = self.engine.reflections.start(
            "micro", key, transcript.render()[-2000:], channel_key=key, people=people
        )
        return Session(transcript, people, audit, self._doubted())

    def _doubted(self) -> tuple[tuple[str, str], ...]:
        """Memories this place may see that a 👎 marked for recheck (a DM's own private ones only in that DM)."""
        return tuple(
            self.engine.feedback.to_recheck(list(self.state.ctx.memory_partitions()), limit=10)
        )

    def _still_unreflected(self) -> bool:
        """The state was read before this process claimed the job: another process may have reflected the session
        meanwhile (SCALE-1), or a new one began."""
        now = self.channels.get(self.state.channel_key)
        return (
            now is not None
            and now.reflected_at is None
            and now.session_started_at == self.state.session_started_at
        )

    async def ask(self, plan: Session, model: AsyncCompleter) -> Reflected:
        if plan.audit is None:
            return Reflected()
        doubted = tuple(content for _, content in plan.doubted)
        prompt = reflection_prompt(plan.transcript, self.state.ctx, doubted=doubted)
        candidates, summary = parse_reflection(await model(REFLECT_SYSTEM, prompt))
        return Reflected(
            tuple(memories_from(candidates, plan.transcript, Source.REFLECTION)), summary
        )

    def apply(self, plan: Session, answer: Reflected) -> Facts:
        if plan.audit is None:
            return Facts(
                finish=functools.partial(_reflected, self.channels, self.state.channel_key)
            )
        return Facts(answer.memories, functools.partial(self._finish, plan, answer))

    def _finish(self, plan: Session, answer: Reflected, stored: int) -> None:
        ctx, key = self.state.ctx, self.state.channel_key
        # issue 33: a summary paraphrases the whole excerpt; if any of its turns was forgotten while the model
        # wrote, it would carry the forgotten words, so it is not written (the remaining turns stay in history)
        if answer.summary.strip() and still_stored(self.engine, plan.transcript):
            self.summaries.add(
                platform=ctx.platform,
                guild_id=ctx.guild_id,
                channel_id=ctx.channel_id,
                participants=sorted(plan.people),
                text=answer.summary.strip()[:1200],
                started_at=self.state.session_started_at,
            )
        self.engine.reflections.finish(
            plan.audit or 0, facts=kept_contents(self.engine, answer.memories)
        )
        self.engine.feedback.rechecked([memory_id for memory_id, _ in plan.doubted])
        self.channels.mark_reflected(key)
        self.channels.succeeded(key)

    def failed(self, plan: Session, error: Exception) -> Facts:
        """Audited, then retried with backoff; after a few tries given up (the turns stay searchable in history)."""
        self.engine.reflections.finish(plan.audit or 0, error=str(error))
        if self.state.failures + 1 >= GIVE_UP_REFLECTION_AFTER:
            self.channels.mark_reflected(self.state.channel_key)
        self.channels.failed(self.state.channel_key)
        return NONE_LEARNED


def _reflected(channels: ChannelState, key: str, stored: int) -> None:
    channels.mark_reflected(key)


def still_stored(engine: MemoryEngine, transcript: Transcript) -> bool:
    """Every turn of the transcript is still stored: nothing read by the model was forgotten since."""
    return sources_stored(engine, [line.message_id for line in transcript.lines if line.message_id])


def kept_contents(engine: MemoryEngine, memories: tuple[NewMemory, ...]) -> list[str]:
    """What an audit row records as found: only the facts that may still be learned (a fact forgotten while the
    model wrote must not be kept in the audit's words either)."""
    return [m.content for m in learnable(engine, list(memories))]


def excerpt_rows(engine: MemoryEngine, ctx: RecallContext, since: float) -> list[StoredMessage]:
    rows = [
        r
        for r in engine.messages.recent(ctx, ctx.channel_id, EXCERPT_TURNS, learnable=True)
        if r.created_at >= since
    ]
    while rows and sum(len(r.content) for r in rows) > EXCERPT_CHARS:
        rows.pop(0)
    return rows


# -- WRITE-4 and ORCH-4 ------------------------------------------------------------------------------------------
def crowded(engine: MemoryEngine, channels: ChannelState, silence_s: float) -> list[ChannelRecord]:
    """Channels with more uncompacted turns than fit comfortably: context pressure."""
    out = []
    active = engine.clock.now() - silence_s  # only channels that spoke lately can have grown
    for state in channels.active(active):
        ctx = state.ctx
        if (
            engine.messages.count_in_channel_after(
                ctx.platform, ctx.channel_id, state.compacted_until
            )
            > COMPACT_AFTER
        ):
            out.append(state)
    return out


@dataclass(frozen=True, slots=True)
class Folding:
    transcript: Transcript
    until: float  # the newest folded turn's time


@dataclass(frozen=True, slots=True)
class Folded:
    memories: tuple[NewMemory, ...]
    summary: str


@dataclass(frozen=True, slots=True)
class Compaction:
    """The turns about to leave a crowded channel's context: an extraction pass first (WRITE-4), then folded into
    its rolling summary."""

    engine: MemoryEngine
    channels: ChannelState
    state: ChannelRecord
    zone_of: ZoneName | None = None

    def gather(self) -> Folding | None:
        ctx, now = self.state.ctx, self.channels.get(self.state.channel_key)
        if now is None or now.compacted_until != self.state.compacted_until:
            return None  # compacted meanwhile by another process (SCALE-1): the next look starts from its summary
        rows = self.engine.messages.in_channel_after(
            ctx.platform, ctx.channel_id, self.state.compacted_until
        )
        rows = rows[:-KEEP_VERBATIM] if len(rows) > KEEP_VERBATIM else []
        return (
            Folding(transcript_of(ctx, rows, self.zone_of), rows[-1].created_at) if rows else None
        )

    async def ask(self, plan: Folding, model: AsyncCompleter) -> Folded:
        try:
            memories = await extracted(
                model, plan.transcript, self.state.ctx, Source.AUTO_EXTRACTION
            )
        except BadAnswer as exc:  # costs only this pass: the turns stay stored, and were buffered for extraction too
            log.warning("pre-compaction extraction answer unusable: %s", exc)
            memories = ()
        previous = self.state.rolling_summary or "(none)"
        prompt = prompts.render(
            "compaction", previous=previous, turns=plan.transcript.render(), max_chars=SUMMARY_CHARS
        )
        return Folded(memories, await model("", prompt, temperature=0.0))

    def apply(self, plan: Folding, answer: Folded) -> Facts:
        return Facts(answer.memories, functools.partial(self._finish, plan, answer.summary))

    def _finish(self, plan: Folding, summary: str, stored: int) -> None:
        key = self.state.channel_key
        if still_stored(
            self.engine, plan.transcript
        ):  # else folded again from what remains (issue 33)
            self.channels.set_summary(key, summary.strip()[:SUMMARY_CHARS], plan.until)
        self.channels.succeeded(key)

    def failed(self, plan: Folding, error: Exception) -> Facts:
        log.warning("compaction of %s postponed: the model is unavailable", self.state.channel_key)
        self.channels.failed(self.state.channel_key)
        return NONE_LEARNED

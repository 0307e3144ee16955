"""The daily model-calling jobs, in ``memory.jobs.base``'s shape (gather -> ask -> apply -> report):

    DayReflection   one chat's day in its zone -> up to 20 durable facts, audited, the day marked done  (MAINT-4)
    BulletinWrite   one scope whose briefing is due -> a new bulletin                                  (MAINT-5)

Which days and scopes are due is ``memory.upkeep.daily``'s and ``memory.upkeep.bulletin``'s business; when to look is the
bot's schedule's (``bot.schedule``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import prompts

from ..engine import MemoryEngine
from ..models import NewMemory, Source
from ..protocols import AsyncCompleter
from ..upkeep.bulletin import SYSTEM as BULLETIN_SYSTEM
from ..upkeep.bulletin import BulletinPlan, Bulletins, EmptyBulletin, StaleBulletin
from ..upkeep.daily import ChatDay, DailyReflections
from ..write.answers import FACTS_SCHEMA
from ..write.extraction import MAX_FACTS, Transcript, memories_from, parse_list, place
from .base import NONE_LEARNED, Facts, ask_for_json
from .conversation import ZoneName, kept_contents, transcript_of

log = logging.getLogger(__name__)
SYSTEM = "You reflect on a day of conversation. Answer with JSON only."


@dataclass(frozen=True, slots=True)
class Day:
    transcript: Transcript
    speakers: tuple[str, ...]  # names, in order of first turn
    # None: only the bot's turns are left (the people's were deleted or forgotten)
    audit: int | None


@dataclass(frozen=True, slots=True)
class DayReflection:
    engine: MemoryEngine
    days: DailyReflections
    chat: ChatDay
    zone_of: ZoneName | None = None

    def read(self) -> Transcript:
        """The chat's day as the model reads it (no audit row: a dry run reads this alone)."""
        return transcript_of(self.chat.ctx, self.days.turns(self.chat), self.zone_of)

    def gather(self) -> Day | None:
        chat = self.chat
        if self.days.is_done(chat):
            return None  # reflected meanwhile by another process (SCALE-1): ``due`` was read before the claim
        transcript = self.read()
        speakers = transcript.speakers()
        if not speakers:
            return Day(transcript, (), None)
        people = tuple(c.speaker_id for c in speakers.values())
        hint, excerpt = f"{chat.channel_key} {chat.day}", transcript.render()[-2000:]
        audit = self.engine.reflections.start(
            "daily", hint, excerpt, channel_key=chat.channel_key, people=people
        )
        return Day(transcript, tuple(speakers), audit)

    async def ask(self, plan: Day, model: AsyncCompleter) -> tuple[NewMemory, ...]:
        if plan.audit is None:
            return ()  # nothing to learn
        return await self.learned(plan.transcript, plan.speakers, model)

    async def learned(
        self, transcript: Transcript, speakers: tuple[str, ...], model: AsyncCompleter
    ) -> tuple[NewMemory, ...]:
        """The facts the model reads in the day (the prompt and its parsing; nothing is written)."""
        prompt = prompts.render(
            "daily_reflection",
            place=place(self.chat.ctx),
            written=transcript.written(),
            participants=", ".join(speakers),
            excerpt=transcript.render(),
            max_facts=MAX_FACTS,
        )
        # ORCH-9: structured where the server can
        answer = await ask_for_json(model, SYSTEM, prompt, FACTS_SCHEMA)
        return tuple(memories_from(parse_list(answer), transcript, Source.REFLECTION))

    def apply(self, plan: Day, answer: tuple[NewMemory, ...]) -> Facts:
        if plan.audit is None:
            return Facts(finish=functools.partial(_marked, self.days, self.chat))
        memories = self._still_said(answer)
        return Facts(memories, functools.partial(self._finish, plan.audit, memories))

    def _still_said(self, memories: tuple[NewMemory, ...]) -> tuple[NewMemory, ...]:
        """The model takes seconds: a fact whose messages were deleted or forgotten meanwhile is not stored."""
        sources = {m.provenance.sources for m in memories}
        there = {s: len(self.engine.messages.rids_by_id(list(s))) == len(s) for s in sources}
        return tuple(m for m in memories if there[m.provenance.sources])

    def _finish(self, audit: int, facts: tuple[NewMemory, ...], stored: int) -> None:
        """Audit closed and the day marked with the facts: a crash leaves all undone, and the redo dedups. The
        facts recorded are read again here: one forgotten while the judge wrote is not kept in the audit."""
        self.engine.reflections.finish(audit, facts=kept_contents(self.engine, facts))
        self.days.mark_done(self.chat, stored=stored, audit_id=audit)

    def failed(self, plan: Day, error: Exception) -> Facts:
        log.warning(
            "daily reflection of %s on %s postponed: %s",
            self.chat.channel_key,
            self.chat.day,
            error,
        )
        self.engine.reflections.finish(plan.audit or 0, error=f"{type(error).__name__}: {error}")
        return NONE_LEARNED


def _marked(days: DailyReflections, chat: ChatDay, stored: int) -> None:
    days.mark_done(chat)


@dataclass(frozen=True, slots=True)
class BulletinWrite:
    """MAINT-5: one due scope's briefing, rewritten from its memories; 1 when written, else 0."""

    bulletins: Bulletins
    plan: BulletinPlan

    def gather(self) -> BulletinPlan | None:
        """The refresh's plan (one store call per scope), unless another process wrote the bulletin since (SCALE-1)."""
        return (
            self.plan
            if self.bulletins.is_due(self.plan.where, self.bulletins.engine.clock.now())
            else None
        )

    async def ask(self, plan: BulletinPlan, model: AsyncCompleter) -> str:
        return await model(BULLETIN_SYSTEM, plan.prompt, temperature=0.2)

    def apply(self, plan: BulletinPlan, answer: str) -> int:
        try:
            self.bulletins.save(plan, answer)
        except (EmptyBulletin, StaleBulletin) as exc:
            return self.failed(plan, exc)
        return 1

    def failed(self, plan: BulletinPlan, error: Exception) -> int:
        log.warning(
            "bulletin of %s %s not written: %s", plan.where.scope, plan.where.scope_id, error
        )
        return 0

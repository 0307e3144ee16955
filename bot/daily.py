"""The daily jobs the scheduler runs: reflection on each chat's day (MAINT-4) and bulletin refresh (MAINT-5).

Daily reflection, per chat and day in its zone (``memory.daily`` says which are due): the day's turns as a tagged
transcript, the extraction model asked for up to 20 durable facts, the facts filed where their speaker said
them and stored through the background's write path (judge, dedup, supersession), an audit row, and the day
marked done. A chat whose model call fails or answers garbage is audited as failed and left not done: the next
run asks again. One chat's failure never stops the others.

Bulletin refresh: the scopes ``memory.bulletin`` finds due get a new briefing from the same model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import prompts
from memory.bulletin import PER_RUN, Bulletins, EmptyBulletin, Plan, StaleBulletin
from memory.bulletin import SYSTEM as BULLETIN_SYSTEM
from memory.daily import ChatDay, DailyReflections
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.extraction import MAX_FACTS, BadAnswer, memories_from, parse_list, place
from memory.maintenance import audit_finish, audit_start, reap_stale_audits
from memory.models import NewMemory, Source

from .background import Background, transcript_of
from .llm import LLMError

log = logging.getLogger(__name__)
SYSTEM = "You reflect on a day of conversation. Answer with JSON only."


@dataclass(frozen=True, slots=True)
class DailyReport:
    chats: int = 0  # chat-days reflected (marked done) in this run
    stored: int = 0  # facts stored
    failed: int = 0  # chat-days left for the next run


class DailyReflection:
    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, background: Background, days: DailyReflections | None = None) -> None:
        self.engine, self.runner, self.background = engine, runner, background
        self.days = days or DailyReflections(engine)

    async def run(self) -> DailyReport:
        """Reflect every due chat-day, oldest first; running it again the same day finds nothing due. Audit rows
        that a killed run left "running" are closed first (``reap_stale_audits``)."""
        reaped = await self.runner.run(reap_stale_audits, self.engine)
        if reaped:
            log.warning("%d reflection audit rows were left running by a stopped run; marked failed", reaped)
        due = await self.runner.run(self.days.due, self.engine.clock.now())
        done = stored = failed = 0
        for chat in due:
            try:
                count = await self.reflect(chat)
            except Exception:  # a background-job edge: this chat's day stays not done and is retried next run
                log.exception("daily reflection of %s on %s failed; it will be retried", chat.channel_key, chat.day)
                count = None
            if count is None:
                failed += 1
            else:
                done, stored = done + 1, stored + count
        if due:
            log.info("daily reflection: %d chat-days reflected, %d facts stored, %d left for the next run", done, stored, failed)
        return DailyReport(done, stored, failed)

    async def reflect(self, chat: ChatDay) -> int | None:
        """One chat's day: the number of facts stored, or None when the model failed (the day stays due)."""
        rows = await self.runner.run(self.days.turns, chat)
        transcript = transcript_of(chat.ctx, rows, self.background.zone_of)
        speakers = transcript.speakers()
        if not speakers:  # only the bot's turns are left (the people's were deleted or forgotten): nothing to learn
            await self.runner.run(self.days.mark_done, chat)
            return 0
        people = tuple(c.speaker_id for c in speakers.values())
        hint = f"{chat.channel_key} {chat.day}"
        audit = await self.runner.run(
            audit_start, self.engine, "daily", hint, transcript.render()[-2000:], channel_key=chat.channel_key, people=people
        )
        try:
            prompt = prompts.render(
                "daily_reflection",
                place=place(chat.ctx),
                written=transcript.written(),
                participants=", ".join(speakers),
                excerpt=transcript.render(),
                max_facts=MAX_FACTS,
            )
            candidates = parse_list(await self.background.ask(prompt, SYSTEM))
        except (LLMError, BadAnswer) as exc:
            log.warning("daily reflection of %s on %s postponed: %s", chat.channel_key, chat.day, exc)
            await self.runner.run(audit_finish, self.engine, audit, error=f"{type(exc).__name__}: {exc}")
            return None
        memories = await self.runner.run(self._still_said, memories_from(candidates, transcript, Source.REFLECTION))
        stored = await self.background.store_facts(memories)
        await self.runner.run(self._finish, chat, audit, [m.content for m in memories], stored)
        return stored

    def _still_said(self, memories: list[NewMemory]) -> list[NewMemory]:
        """The model takes seconds: a fact whose messages were deleted or forgotten meanwhile is not stored."""
        sources = {m.provenance.sources for m in memories}
        there = {s: len(self.engine.messages.rids_by_id(list(s))) == len(s) for s in sources}
        return [m for m in memories if there[m.provenance.sources]]

    def _finish(self, chat: ChatDay, audit: int, facts: list[str], stored: int) -> None:
        """Audit closed and the day marked in one transaction: a crash leaves both undone, and the redo dedups."""
        with self.engine.transaction():
            audit_finish(self.engine, audit, facts=facts)
            self.days.mark_done(chat, stored=stored, audit_id=audit)


class BulletinRefresh:
    """MAINT-5: rewrites the bulletins that are due with the extraction model, a few scopes per run."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, background: Background, bulletins: Bulletins) -> None:
        self.engine, self.runner, self.background, self.bulletins = engine, runner, background, bulletins

    async def run(self) -> int:
        """One store call per scope, so replies waiting for the memory thread get their turn between scopes
        (a guild's check reads one indexed range per person: ~0.15 s for 1,300 people at 100k memories)."""
        now = self.engine.clock.now()
        candidates = await self.runner.run(self.bulletins.candidates, now)
        known = await self.runner.run(self.bulletins.known, candidates)
        planned = written = 0
        for scope, scope_id in candidates:
            plan = await self.runner.run(self.bulletins.plan_if_due, scope, scope_id, now, known)
            if plan is not None:
                planned += 1
                written += await self.write(plan)
            if planned >= PER_RUN:
                break  # the model's time per run is bounded; the rest are still due next run
        return written

    async def write(self, plan: Plan) -> int:
        where = plan.where
        try:
            answer = await self.background.llm.complete(
                [{"role": "system", "content": BULLETIN_SYSTEM}, {"role": "user", "content": plan.prompt}], temperature=0.2
            )
            await self.runner.run(self.bulletins.save, plan, answer)
        except (LLMError, EmptyBulletin, StaleBulletin) as exc:
            log.warning("bulletin of %s %s not written: %s", where.scope, where.scope_id, exc)
            return 0
        return 1

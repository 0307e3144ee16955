"""The daily jobs the scheduler runs: reflection on each chat's day (MAINT-4) and bulletin refresh (MAINT-5).

Daily reflection, per chat and day in its zone (``memory.upkeep.daily`` says which are due), is
``memory.jobs.day.DayReflection``: the day's turns as a tagged transcript, the extraction model asked for up
to 20 durable facts, the facts filed where their speaker said them and stored through the one write path
(judge, dedup, supersession) with the audit row and the day's mark. A chat whose model call fails or answers
garbage is audited as failed and left not done: the next run asks again. One chat's failure never stops the others.

Bulletin refresh: the scopes ``memory.upkeep.bulletin`` finds due get a new briefing from the same model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memory import (
    BULLETINS_PER_RUN,
    Bulletins,
    BulletinWrite,
    ChatDay,
    DailyReflections,
    DayReflection,
    Housekeeping,
    ZoneName,
)

from .jobs import JobRunner
from .schedule import BULLETINS, DAILY_REFLECTION

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DailyReport:
    chats: int = 0  # chat-days reflected (marked done) in this run
    stored: int = 0  # facts stored
    failed: int = 0  # chat-days left for the next run


class DailyReflection:
    def __init__(
        self, jobs: JobRunner, days: DailyReflections, zone_of: ZoneName | None = None
    ) -> None:
        self.jobs, self.engine, self.runner, self.days, self.zone_of = (
            jobs,
            jobs.engine,
            jobs.runner,
            days,
            zone_of,
        )

    async def run(self) -> DailyReport:
        """Reflect every due chat-day, oldest first; running it again the same day finds nothing due. Audit rows
        that a killed run left "running" are closed first (``reap_stale_audits``)."""
        reaped = await Housekeeping(self.engine, self.runner).reap_stale_audits()
        if reaped:
            log.warning(
                "%d reflection audit rows were left running by a stopped run; marked failed", reaped
            )
        due = await self.runner.run(self.days.due, self.engine.clock.now())
        done = stored = failed = 0
        for chat in due:
            try:
                count = await self.reflect(chat)
            except (
                Exception
            ):  # a background-job edge: this chat's day stays not done and is retried next run
                log.exception(
                    "daily reflection of %s on %s failed; it will be retried",
                    chat.channel_key,
                    chat.day,
                )
                count = None
            if count is None:
                failed += 1
            else:
                done, stored = done + 1, stored + count
        if due:
            log.info(
                "daily reflection: %d chat-days reflected, %d facts stored, %d left for the next run",
                done,
                stored,
                failed,
            )
        return DailyReport(done, stored, failed)

    async def reflect(self, chat: ChatDay) -> int | None:
        """One chat's day: the number of facts stored, or None when the model failed (the day stays due)."""
        job = DayReflection(self.engine, self.days, chat, self.zone_of)
        return await self.jobs.learn(
            job, claim=DAILY_REFLECTION.key(chat=chat.channel_key, day=chat.day)
        )


class BulletinRefresh:
    """MAINT-5: rewrites the bulletins that are due with the extraction model, a few scopes per run."""

    def __init__(self, jobs: JobRunner, bulletins: Bulletins) -> None:
        self.jobs, self.engine, self.runner, self.bulletins = (
            jobs,
            jobs.engine,
            jobs.runner,
            bulletins,
        )

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
                job = BulletinWrite(self.bulletins, plan)
                written += (
                    await self.jobs.run(job, claim=BULLETINS.key(scope=scope, scope_id=scope_id))
                    or 0
                )
            if planned >= BULLETINS_PER_RUN:
                break  # the model's time per run is bounded; the rest are still due next run
        return written

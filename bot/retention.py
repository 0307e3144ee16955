"""Retention as the bot runs it (SEC-7): the periodic job, and what the adapters say about places.

RetentionJob   on the scheduler (``COMPANION_RETENTION_CRON``): messages past ``COMPANION_MESSAGE_RETENTION_DAYS``
               expire (``memory.Housekeeping.expire``), and places left more than
               ``COMPANION_LEAVE_GRACE_DAYS`` ago are purged. One process runs it at a time (a claim on
               ``bot.schedule.RETENTION``, released when the run ends); a process whose run comes later finds nothing left
PlaceWatch     the adapters' ``Places``: a server or group that removed the bot is marked for the purge, one that
               added it back is unmarked
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memory import Expired, Housekeeping, Leaving

from .jobs import LEASE_S, JobRunner
from .schedule import RETENTION

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionReport:
    expired: Expired
    purged: int  # places whose grace period passed
    rows: int = (
        0  # rows deleted for them, all tables (0 with places purged: nothing of them was found)
    )


class RetentionJob:
    """``days``: the message window (None keeps messages for ever); ``leaving`` knows the grace
    period; ``jobs`` holds the run in one process at a time."""

    def __init__(
        self, jobs: JobRunner, upkeep: Housekeeping, leaving: Leaving, days: float | None
    ) -> None:
        self.jobs, self.upkeep, self.leaving, self.days = jobs, upkeep, leaving, days

    async def run(self) -> RetentionReport | None:
        """One run; None when another process is running it now. Messages expire a batch at a
        time, each its own call on the memory thread: replies are not kept waiting for the run."""
        async with self.jobs.held(RETENTION.key(), LEASE_S * 12) as mine:
            if not mine:
                log.debug("retention is being run by another process; skipped")
                return None
            expired = await self.upkeep.expire(self.days) if self.days else Expired()
            purged = await self.leaving.purge_due()
        return RetentionReport(expired, len(purged), sum(c.get("rows", 0) for c in purged))


class PlaceWatch:
    """What the adapters tell of the bot's places, written on the memory thread (``bot.types.Places``)."""

    def __init__(self, leaving: Leaving) -> None:
        self.leaving = leaving

    async def left(self, platform: str, guild_id: str) -> None:
        departure = await self.leaving.left(platform, guild_id)
        grace = self.leaving.grace_days
        log.info(
            "%s: removed from place %s; all of it is purged in %g days unless the bot is added back",
            platform,
            guild_id,
            grace,
        )
        log.debug("purge of %s due at %s", departure.guild_id, departure.purge_at)

    async def joined(self, platform: str, guild_id: str) -> None:
        if await self.leaving.returned(platform, guild_id):
            log.info("%s: added back to place %s; its purge is cancelled", platform, guild_id)

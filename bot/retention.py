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

from memory import AsyncRunner, Departures, Expired, Housekeeping, MemoryEngine

from .jobs import LEASE_S
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
    """``days``: the message window (None keeps messages for ever); the departures know the grace period."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        departures: Departures,
        days: float | None,
        holder: str,
    ) -> None:
        self.engine, self.runner, self.departures, self.days, self.holder = (
            engine,
            runner,
            departures,
            days,
            holder,
        )

    async def run(self) -> RetentionReport | None:
        """One run; None when another process is running it now."""
        claims = self.engine.claims
        if not await self.runner.run(claims.claim, RETENTION.key(), self.holder, LEASE_S * 12):
            log.debug("retention is being run by another process; skipped")
            return None
        try:
            expired = await self._expire(self.days) if self.days else Expired()
            purged = await self.runner.run(self.departures.purge_due)
        finally:
            await self.runner.run(claims.release, RETENTION.key(), self.holder)
        return RetentionReport(expired, len(purged), sum(c.get("rows", 0) for c in purged))

    async def _expire(self, days: float) -> Expired:
        """A batch at a time, each its own call on the memory thread: replies are not kept waiting for the run."""
        return await Housekeeping(self.engine, self.runner).expire(days)


class PlaceWatch:
    """What the adapters tell of the bot's places, written on the memory thread (``bot.types.Places``)."""

    def __init__(self, runner: AsyncRunner, departures: Departures) -> None:
        self.runner, self.departures = runner, departures

    async def left(self, platform: str, guild_id: str) -> None:
        departure = await self.runner.run(self.departures.left, platform, guild_id)
        grace = self.departures.grace_days
        log.info(
            "%s: removed from place %s; all of it is purged in %g days unless the bot is added back",
            platform,
            guild_id,
            grace,
        )
        log.debug("purge of %s due at %s", departure.guild_id, departure.purge_at)

    async def joined(self, platform: str, guild_id: str) -> None:
        if await self.runner.run(self.departures.returned, platform, guild_id):
            log.info("%s: added back to place %s; its purge is cancelled", platform, guild_id)

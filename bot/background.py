"""Background memory work for conversations, scheduled: debounced extraction (WRITE-1), session-end
micro-reflection (WRITE-3), pre-compaction flush and text compaction (WRITE-4, ORCH-4).

What each job asks and stores is ``memory.jobs.conversation``' business (gather -> ask -> apply); how often they run
and their claim keys are ``bot.schedule``'s (every tick); this module finds the chats that are due, runs their jobs
through the one ``JobRunner``, and backs a failing chat off. Everything is driven by ``tick()``, which compares
persisted due times with the injected clock, so a restart resumes where the process stopped and tests advance a
fake clock instead of sleeping.

A job that fails (the model is down, answers garbage, or anything unexpected) is postponed with
backoff for that chat only; every other chat's jobs in the same tick still run. An extraction batch
that keeps failing is parked in ``dead_letters`` (``companion stats`` shows it), never dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from memory import (
    ChannelRecord,
    ChannelState,
    Compaction,
    Extraction,
    ExtractionBuffer,
    Reflection,
    SessionSummaries,
    TombstoneReadings,
    ZoneName,
    crowded,
)

from .jobs import JobRunner
from .schedule import COMPACTION, EXTRACTION, REFLECTION

log = logging.getLogger(__name__)


class Background:
    def __init__(
        self,
        jobs: JobRunner,
        buffer: ExtractionBuffer,
        channels: ChannelState,
        summaries: SessionSummaries,
        *,
        silence_s: float = 600.0,
        zone_of: ZoneName | None = None,
    ) -> None:
        self.jobs, self.engine, self.runner = jobs, jobs.engine, jobs.runner
        self.buffer, self.channels, self.summaries, self.silence_s = (
            buffer,
            channels,
            summaries,
            silence_s,
        )
        self.zone_of = zone_of

    async def tick(self) -> dict[str, int]:
        """Run whatever is due now: extraction of quiet channels, reflection on ended sessions, compaction."""
        done = {"extracted": 0, "reflected": 0, "compacted": 0}
        # LANG-4: a fact just forgotten in another language is read in English before anything
        # learns from the turns around it
        await self.jobs.run(TombstoneReadings(self.engine))
        for channel in await self.runner.run(self.buffer.due_channels):
            done["extracted"] += await self._guarded(channel, self.extract(channel))
        for state in await self.runner.run(self.channels.silent, self.silence_s):
            done["reflected"] += await self._guarded(state.channel_key, self.reflect(state))
        for state in await self.runner.run(crowded, self.engine, self.channels, self.silence_s):
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

    async def extract(self, channel: str) -> int:
        """WRITE-1: the channel's buffered turns; the facts stored."""
        return (
            await self.jobs.learn(
                Extraction(self.engine, self.buffer, channel), claim=EXTRACTION.key(chat=channel)
            )
            or 0
        )

    async def reflect(self, state: ChannelRecord) -> int:
        """WRITE-3 and CROSS-1: an ended session's facts and summary; the facts stored."""
        job = Reflection(self.engine, self.channels, self.summaries, state, self.zone_of)
        return (
            await self.jobs.learn(
                job, claim=REFLECTION.key(chat=state.channel_key, session=state.session_started_at)
            )
            or 0
        )

    async def compact(self, state: ChannelRecord) -> int:
        """WRITE-4 and ORCH-4: 1 when the channel's oldest turns were folded into its rolling summary."""
        job = Compaction(self.engine, self.channels, state, self.zone_of)
        stored = await self.jobs.learn(job, claim=COMPACTION.key(chat=state.channel_key))
        return 0 if stored is None else 1

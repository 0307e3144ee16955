"""The running bot: starts and stops the parts ``bot.composition`` built (background loop, scheduler, store)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from memory import maintenance
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.protocols import Completer

from .background import Background
from .orchestrator import Orchestrator

log = logging.getLogger(__name__)
TICK_S = 1.0


@dataclass(frozen=True, slots=True)
class Schedule:
    """When the nightly upkeep runs (MAINT-1..3, cron in UTC, validated by Settings)."""

    enabled: bool
    consolidation_cron: str
    maintenance_cron: str


@dataclass
class Runtime:
    """The running bot's parts, built by ``bot.composition.build_runtime``: it starts and stops them."""

    engine: MemoryEngine
    runner: AsyncRunner
    orchestrator: Orchestrator
    background: Background
    completer: Completer  # the extraction model, for consolidation
    schedule: Schedule
    scheduler: AsyncIOScheduler | None = None
    _loop_task: asyncio.Task | None = None

    async def start(self, *, background_loop: bool = True) -> None:
        # No reply survives a restart: turns held for one are due now, and so are batches that waited out a
        # model outage (the first tick retries them instead of waiting for the next message).
        released = await self.runner.run(self.background.buffer.release_all)
        if released:
            log.info("%d buffered messages from before the restart are due for extraction", released)
        if self.schedule.enabled:
            self.scheduler = self._scheduler()
            self.scheduler.start()
        if background_loop:
            self._loop_task = asyncio.create_task(self._loop(), name="memory-background")

    async def stop(self) -> None:
        """Graceful: end voice sessions (their summaries are kept), stop the loop and the scheduler, extract what
        is still buffered, close the store."""
        try:
            await self.orchestrator.voice.end_all()
        except Exception:  # shutdown edge: a failing summary must not keep the store from closing
            log.exception("could not end the voice sessions cleanly")
        if self._loop_task:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self.scheduler and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        try:
            await self.background.flush()
        except Exception:  # shutdown edge: never lose the close below to a failing model
            log.exception("could not flush the extraction buffer; it stays in the database for next start")
        await self.runner.run(self.engine.close)
        self.runner.shutdown()

    async def _loop(self) -> None:
        while True:
            try:
                await self.background.tick()
            except Exception:  # a background-job edge: log and keep ticking
                log.exception("background tick failed")
            await asyncio.sleep(TICK_S)

    def _scheduler(self) -> AsyncIOScheduler:
        """MAINT-1..3 on their cron schedules (UTC), inside the bot's own event loop."""
        scheduler = AsyncIOScheduler(timezone="UTC")
        cron = lambda expression: CronTrigger.from_crontab(expression, timezone="UTC")  # noqa: E731 (validated by Settings)
        scheduler.add_job(self._consolidate, cron(self.schedule.consolidation_cron), id="consolidation")
        scheduler.add_job(self._maintain, cron(self.schedule.maintenance_cron), id="decay-prune")
        return scheduler

    async def _consolidate(self) -> None:
        report = await self.runner.run(maintenance.consolidate, self.engine, self.completer)
        log.info("consolidation: %d clusters, %d merged, %d failed", report.clusters, report.merged_rows, report.failures)

    async def _maintain(self) -> None:
        counts = await self.runner.run(
            lambda: (maintenance.decay(self.engine), maintenance.prune(self.engine), maintenance.prune_entities(self.engine))
        )
        log.info("maintenance: decayed %d, pruned %d, entities pruned %d", *counts)

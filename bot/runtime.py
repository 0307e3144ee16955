"""The running bot: starts and stops the parts ``bot.composition`` built (background loop, scheduler, store).
When each periodic job runs is ``bot.schedule``'s table; this module only puts it on the loop and the scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from memory import AsyncRunner, Consolidation, Housekeeping, MemoryEngine

from .background import Background
from .checkins import CheckinJob
from .daily import BulletinRefresh, DailyReflection
from .orchestrator import Orchestrator
from .reminders.sending import ReminderJob
from .schedule import (
    BULLETINS,
    CHECKINS,
    CONSOLIDATION,
    CRONS,
    DAILY_REFLECTION,
    DECAY_PRUNE,
    REMINDERS,
    RETENTION,
    TICK_S,
    Periodic,
    Schedule,
)

if TYPE_CHECKING:
    from .dashboard.app import DashboardServer
    from .health import Metrics
    from .ingest_watch import IngestWatch
    from .model.client import ChatClient
    from .retention import PlaceWatch, RetentionJob
    from .spending.budgets import Budgets

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Running:
    """What a started runtime holds: the only state that changes after ``build_runtime``."""

    scheduler: AsyncIOScheduler | None = None
    loop_task: asyncio.Task | None = None
    ingest_task: asyncio.Task | None = None


@dataclass(frozen=True)
class Runtime:
    """The running bot's parts, built together by ``bot.composition.build_runtime``: it starts and stops them."""

    engine: MemoryEngine
    runner: AsyncRunner
    orchestrator: Orchestrator
    background: Background
    schedule: Schedule
    daily: DailyReflection | None = None  # MAINT-4
    bulletins: BulletinRefresh | None = None  # MAINT-5
    checkins: CheckinJob | None = None  # ORCH-8
    reminders: ReminderJob | None = None  # ORCH-13
    dashboard: DashboardServer | None = (
        None  # started with the bot when COMPANION_DASHBOARD_ENABLED (bot.composition)
    )
    ingest: IngestWatch | None = (
        None  # WRITE-7: the ingest folder, watched while the bot runs (COMPANION_INGEST_DIR)
    )
    metrics: Metrics | None = (
        None  # OPS-5: counted by the model client and the adapters' front door (bot.health)
    )
    budgets: Budgets | None = (
        None  # ORCH-14: the usage ledger and the daily budgets (bot.spending.budgets)
    )
    retention: RetentionJob | None = None  # SEC-7 (bot.retention)
    places: PlaceWatch | None = (
        None  # SEC-7: what the adapters tell of the places that remove or add the bot
    )
    flush_s: float | None = (
        None  # how long ``stop`` extracts what is buffered (None: until done); the rest waits
    )
    models: tuple[ChatClient, ...] = ()  # the model clients, whose connection pools ``stop`` closes
    _running: _Running = field(default_factory=_Running, init=False, repr=False, compare=False)

    @property
    def scheduler(self) -> AsyncIOScheduler | None:
        return self._running.scheduler

    async def start(self, *, background_loop: bool = True) -> None:
        # No reply survives a restart: turns held for one are due now, and so are batches that waited out a
        # model outage (the first tick retries them instead of waiting for the next message).
        released = await self.runner.run(self.background.buffer.release_all)
        if released:
            log.info(
                "%d buffered messages from before the restart are due for extraction", released
            )
        await self.runner.run(self.engine.embeddings.warm)  # the model loaded before any job claims
        # A run killed before this start left its audit row "running", quoting the chat: closed now (MAINT-4).
        await Housekeeping(self.engine, self.runner).reap_stale_audits()
        if self.schedule.enabled:
            self._running.scheduler = self._scheduler()
            self._running.scheduler.start()
        if background_loop:
            self._running.loop_task = asyncio.create_task(self._loop(), name="memory-background")
        if self.ingest is not None:
            self._running.ingest_task = asyncio.create_task(self.ingest.run(), name="ingest-folder")
        if self.dashboard is not None:
            await self.dashboard.start()

    async def stop(self, *, flush_s: float | None = None) -> int:
        """Graceful: end voice sessions (their summaries are kept), stop the loop and the scheduler,
        extract what is still buffered for up to ``flush_s`` (default: the runtime's own), close the
        model clients and the store. The buffered messages left for the next start."""
        budget = self.flush_s if flush_s is None else flush_s
        if (
            self.dashboard is not None
        ):  # first: no dashboard request may reach a store that is closing
            await self.dashboard.stop()
        try:
            await self.orchestrator.voice.end_all()
        except Exception:  # shutdown edge: a failing summary must not keep the store from closing
            log.exception("could not end the voice sessions cleanly")
        for task in (self._running.loop_task, self._running.ingest_task):
            if task:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.scheduler and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        try:
            async with asyncio.timeout(budget):
                await self.background.flush()
        except TimeoutError:
            # A slow local model made /quit wait 27-41 s. The model's request is closed (it frees the server's slot)
            # and the turns stay in the persisted buffer, extracted after the next start (WRITE-1).
            log.warning("stopped extracting after %g s (COMPANION_SHUTDOWN_FLUSH_S)", budget)
        except Exception:  # shutdown edge: never lose the close below to a failing model
            log.exception(
                "could not flush the extraction buffer; it stays in the database for next start"
            )
        left = await self.runner.run(self.background.buffer.pending)
        if left:
            log.warning("%d buffered messages wait for extraction at the next start", left)
        await self._close_models()
        await self.runner.run(self.engine.close)
        self.runner.shutdown()
        return left

    async def _close_models(self) -> None:
        for model in self.models:
            try:
                await model.aclose()
            except Exception:  # shutdown edge: a failing close must not keep the store open
                log.exception("could not close a model client's connections")

    async def _loop(self) -> None:
        while True:
            try:
                await self.background.tick()
                if (
                    self.engine.journals is not None
                ):  # MAINT-6: snapshots of scopes that changed since the last tick
                    await self.runner.run(self.engine.journals.flush)
            except Exception:  # a background-job edge: log and keep ticking
                log.exception("background tick failed")
            await asyncio.sleep(TICK_S)

    def _scheduler(self) -> AsyncIOScheduler:
        """The cron jobs of ``bot.schedule`` this runtime has the parts for, on their crons (UTC), inside the bot's own
        event loop; one marked ``at_start`` also runs now (what fell due while the bot was down)."""
        scheduler = AsyncIOScheduler(timezone="UTC")
        runs = self._cron_jobs()
        for job in CRONS:
            run = runs[job]
            if run is None:
                continue
            # None would add it paused
            at_start = {"next_run_time": datetime.now(UTC)} if job.at_start else {}
            # validated by Settings
            trigger = CronTrigger.from_crontab(job.cron(self.schedule), timezone="UTC")
            scheduler.add_job(run, trigger, id=job.name, **at_start)
        return scheduler

    def _cron_jobs(self) -> dict[Periodic, Callable[[], Awaitable[Any]] | None]:
        """What each cron job of ``bot.schedule`` runs here (None: this runtime was built without it)."""
        return {
            CONSOLIDATION: self._consolidate,
            DECAY_PRUNE: self._maintain,
            DAILY_REFLECTION: self.daily.run if self.daily is not None else None,
            BULLETINS: self.bulletins.run if self.bulletins is not None else None,
            CHECKINS: self.checkins.run if self.checkins is not None else None,
            REMINDERS: self.reminders.run if self.reminders is not None else None,
            RETENTION: self.retention.run if self.retention is not None else None,
        }

    async def _consolidate(self) -> None:
        """MAINT-1 as a job: the memory thread is free while the model writes the merges."""
        report = await self.background.jobs.run(
            Consolidation(self.engine), claim=CONSOLIDATION.key()
        )
        if report is None:
            return
        log.info(
            "consolidation: %d clusters, %d merged, %d failed",
            report.clusters,
            report.merged_rows,
            report.failures,
        )

    async def _maintain(self) -> None:
        done = await Housekeeping(self.engine, self.runner).maintain()
        log.info(
            "maintenance: decayed %d, pruned %d, entities pruned %d",
            done.decayed,
            done.pruned,
            done.entities_pruned,
        )

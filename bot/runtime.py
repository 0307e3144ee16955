"""The bot's composition root: Settings in, a running orchestrator, background work and scheduler out."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from memory import maintenance
from memory.clock import Clock
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.protocols import Embedder
from memory.sessions import ExtractionBuffer, SessionSummaries

from .app import _secret, build_completer, build_embedder
from .background import Background
from .config import Settings
from .llm import ChatClient
from .orchestrator import Orchestrator, OwnerPolicy
from .voice_providers import voice_options

log = logging.getLogger(__name__)
TICK_S = 1.0
_UNSET = object()


@dataclass
class Runtime:
    settings: Settings
    engine: MemoryEngine
    runner: AsyncRunner
    orchestrator: Orchestrator
    background: Background
    scheduler: AsyncIOScheduler | None = None
    _loop_task: asyncio.Task | None = None

    @classmethod
    def build(cls, settings: Settings, *, clock: Clock | None = None, embedder: Embedder | None | object = _UNSET,
              backoff_s: float = 0.5) -> Runtime:
        engine = MemoryEngine(settings.db_path, build_embedder(settings) if embedder is _UNSET else embedder, clock,
                              vector_mirror=settings.vector_mirror)
        runner = AsyncRunner()
        chat, extraction = (_chat_client(settings, model, backoff_s) for model in (settings.chat_model, settings.extraction_model or settings.chat_model))
        buffer = ExtractionBuffer(engine, settings.extraction_debounce_s)
        summaries = SessionSummaries(engine, settings.summary_ttl_s)
        orchestrator = Orchestrator(engine, runner, chat, owners=OwnerPolicy(frozenset(settings.owner_ids)), buffer=buffer,
                                    summaries=summaries, assembler_options={"summary_window_s": settings.summary_window_s},
                                    voice_options=voice_options(settings))
        background = Background(engine, runner, extraction, buffer, orchestrator.channels, summaries, silence_s=settings.reflection_silence_s)
        orchestrator.voice.extract = background.extract  # WRITE-4: a voice compaction hands its turns to extraction first
        return cls(settings, engine, runner, orchestrator, background)

    async def start(self, *, background_loop: bool = True) -> None:
        # No reply survives a restart: turns held for one are due now, and so are batches that waited out a
        # model outage (the first tick retries them instead of waiting for the next message).
        released = await self.runner.run(self.background.buffer.release_all)
        if released:
            log.info("%d buffered messages from before the restart are due for extraction", released)
        if self.settings.scheduler_enabled:
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
        scheduler.add_job(self._consolidate, cron(self.settings.consolidation_cron), id="consolidation")
        scheduler.add_job(self._maintain, cron(self.settings.maintenance_cron), id="decay-prune")
        return scheduler

    async def _consolidate(self) -> None:
        completer = build_completer(self.settings)
        report = await self.runner.run(maintenance.consolidate, self.engine, completer)
        log.info("consolidation: %d clusters, %d merged, %d failed", report.clusters, report.merged_rows, report.failures)

    async def _maintain(self) -> None:
        counts = await self.runner.run(lambda: (maintenance.decay(self.engine), maintenance.prune(self.engine),
                                                maintenance.prune_entities(self.engine)))
        log.info("maintenance: decayed %d, pruned %d, entities pruned %d", *counts)


def _chat_client(settings: Settings, model: str, backoff_s: float) -> ChatClient:
    return ChatClient(settings.llm_base_url, _secret(settings.llm_api_key), model, timeout=settings.llm_timeout_s,
                      max_retries=settings.llm_max_retries, backoff_s=backoff_s, max_steps=settings.max_tool_steps)


"""The store's periodic upkeep as the running bot does it: closing audit rows a killed run left
open (MAINT-4), the nightly decay and prune (MAINT-2), and the message retention window (SEC-7).
The mechanisms are ``memory.upkeep.maintenance`` and ``memory.upkeep.retention``; this service
runs them on the memory thread and returns frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine import MemoryEngine
from .storage.db import AsyncRunner
from .upkeep import maintenance
from .upkeep.retention import BATCH, Expired, expire_messages


@dataclass(frozen=True, slots=True)
class Maintained:
    """What one nightly decay-and-prune run did."""

    decayed: int = 0  # memories whose importance decayed (not read for a week)
    pruned: int = 0  # memories soft-forgotten (importance fell below 1 and old)
    entities_pruned: int = 0  # graph entities no memory mentioned for 90 days


class Housekeeping:
    """Every method is one call on the memory thread, but ``expire``: a call per batch."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner

    async def reap_stale_audits(self) -> int:
        """Audit rows a killed run left "running" (quoting the chat), marked failed; how many."""
        return await self.runner.run(self.engine.reflections.reap_stale)

    async def maintain(self) -> Maintained:
        """The nightly decay, prune and entity prune, in that order, in one call."""
        return await self.runner.run(self._maintain)

    async def expire(self, days: float, *, batch: int = BATCH) -> Expired:
        """Messages past a window of ``days`` (>= ``MIN_DAYS``) deleted, about ``batch`` (2,000) per
        call on the memory thread: replies waiting for it get their turn between batches.

        :raises ValueError: a window shorter than the daily reflection reads back."""
        messages = noted = 0
        while True:
            done = await self.runner.run(
                expire_messages, self.engine, days, batch=batch, most=batch
            )
            messages, noted = messages + done.messages, noted + done.memories_noted
            if done.messages < batch:
                return Expired(messages, noted)

    def _maintain(self) -> Maintained:
        engine = self.engine
        return Maintained(
            maintenance.decay(engine),
            maintenance.prune(engine),
            maintenance.prune_entities(engine),
        )

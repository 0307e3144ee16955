"""Forgetting, as a person or the operator asks for it (SEC-3): one memory with its lineage and
sources, or everything of a guild or of a person, and what a forget of the person would remove
(MEM-5). The mechanism and the registry it walks are ``memory.upkeep.forgetting`` and
``memory.upkeep.registry``; this service, the one way in from outside memory/, runs them on the
memory thread and returns frozen values or plain data.
"""

from __future__ import annotations

from .engine import MemoryEngine
from .models import Erased
from .storage.db import AsyncRunner
from .upkeep.forgetting import forget_everything, forget_guild, forget_memory
from .upkeep.transfer import JsonObject, export_person


class Forgetting:
    """Every method is one call on the memory thread: a forget is whole before anything else reads the store."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner

    async def memory(self, memory_id: str, *, asked_in: tuple[str, str] | None = None) -> Erased:
        """One memory completely: its history, the messages it was learned from, its tombstone, journal lines.
        ``asked_in``: the (platform, channel) where it was asked, whose summaries go too.

        :raises NotFound: no such id."""
        done = await self.runner.run(forget_memory, self.engine, memory_id, asked_in=asked_in)
        return done.erased()

    async def guild(self, guild_id: str) -> dict[str, int]:
        """Everything of one guild (no undo copy is kept); rows removed per table."""
        return await self.runner.run(forget_guild, self.engine, guild_id)

    async def person(self, person_ids: list[str]) -> dict[str, int]:
        """Everything about a person, all their linked ids (no undo copy is kept); rows removed per
        table. Someone who said /privacy off stays not remembered on every account: their choice
        outlives it (SEC-5)."""
        return await self.runner.run(forget_everything, self.engine, list(person_ids))

    async def export(self, person_ids: list[str]) -> JsonObject:
        """What a forget of the person would remove, as JSON-ready data (MEM-5)."""
        return await self.runner.run(export_person, self.engine, list(person_ids))

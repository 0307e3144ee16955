"""Forgetting, as a person or the operator asks for it (SEC-3): one memory with its lineage and sources, or
everything of a guild or of a person. The mechanism and the registry it walks are ``memory.upkeep.forgetting``
and ``memory.upkeep.registry``; this service runs them on the memory thread and returns frozen values.
"""

from __future__ import annotations

from .engine import MemoryEngine
from .models import Erased
from .storage.db import AsyncRunner
from .upkeep.forgetting import forget_everything, forget_guild, forget_memory, forget_person
from .upkeep.transfer import JsonObject, export_person


class Erasure:
    """The same forgets for code already on the memory thread (a command, the command line): each
    call is whole before it returns. ``everything`` keeps a /privacy off on every account (SEC-5);
    ``export`` is what a forget of the person would remove, as JSON-ready data (MEM-5)."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def memory(self, memory_id: str, *, asked_in: tuple[str, str] | None = None) -> Erased:
        """:raises NotFound: no such id."""
        return forget_memory(self.engine, memory_id, asked_in=asked_in).erased()

    def everything(self, person_ids: list[str]) -> dict[str, int]:
        return forget_everything(self.engine, person_ids)

    def export(self, person_ids: list[str]) -> JsonObject:
        return export_person(self.engine, person_ids)


class Forgetting:
    """Every method is one call on the memory thread: a forget is whole before anything else reads the store."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner

    async def memory(self, memory_id: str, *, asked_in: tuple[str, str] | None = None) -> Erased:
        """One memory completely: its history, the messages it was learned from, its tombstone, journal lines.
        ``asked_in``: the (platform, channel) where it was asked, whose summaries go too.

        :raises NotFound: no such id."""
        now = Erasure(self.engine)
        return await self.runner.run(lambda: now.memory(memory_id, asked_in=asked_in))

    async def guild(self, guild_id: str) -> dict[str, int]:
        """Everything of one guild (no undo copy is kept); rows removed per table."""
        return await self.runner.run(forget_guild, self.engine, guild_id)

    async def person(self, person_ids: tuple[str, ...]) -> dict[str, int]:
        """Everything about a person, all their linked ids (no undo copy is kept); rows removed per table."""
        return await self.runner.run(forget_person, self.engine, list(person_ids))

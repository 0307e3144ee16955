"""The operator's page, memory side: each read and change the dashboard makes, one awaited call
on the memory thread (the routes of ``bot/dashboard/`` hold this service, not the store or its
thread).

Reads: people and one person's profile, pages of memories and a search over the whole store,
reflections, entities and the graph, guilds, the recall knobs, place manners and personas, the
audit trail. Changes: a memory filed or edited by the operator (the write path's own checks), the
knobs, a place's mode or persona, one audit row. Forgetting is ``memory.forgetting``'s, as for
every caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from .engine import MemoryEngine
from .errors import NotFound
from .models import Entity, FactKind, JsonObject, Memory, MemoryType, NewMemory
from .recall.overview import GraphView, Guild, Overview, Person, ReflectionRun
from .scopes import RecallContext
from .settings import RecallSettings, Tuning
from .storage.audit import AuditEntry
from .storage.db import AsyncRunner
from .storage.manners import Mode, PlaceMode
from .storage.memories import MemoryQuery, RecallFilters
from .storage.persona import PlacePersona
from .storage.ranking import Hit
from .write.store import WriteResult

PROFILE_LIMIT = 500  # a person's memories shown on their page, most important first


@dataclass(frozen=True, slots=True)
class Profile:
    """One person as their page shows them: who, their memories by importance, whether they
    share across servers."""

    person: Person
    memories: list[Memory]
    shares: bool


@dataclass(frozen=True, slots=True)
class Correction:
    """The fields an operator changes (None: left as it is)."""

    content: str | None = None
    subject: str | None = None
    tags: Sequence[str] | None = None
    importance: float | None = None
    kind: FactKind | None = None
    type: MemoryType | None = None


class Dashboard:
    """The dashboard's use cases, each awaited from the event loop."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner
        self._overview = Overview(engine)
        self._tuning = Tuning(engine)

    # -- people --------------------------------------------------------------------------------
    async def people(self) -> list[Person]:
        return await self.runner.run(self._overview.people)

    async def person(self, person_id: str) -> Person:
        """:raises NotFound: nobody with that id (no account, no memory)."""
        return await self.runner.run(self._known, person_id)

    async def profile(self, person_id: str) -> Profile:
        """:raises NotFound: as ``person``."""
        return await self.runner.run(self._profile, person_id)

    @property
    def default_zone(self) -> ZoneInfo:
        """The zone of everyone who set none (``COMPANION_TIMEZONE``)."""
        return self.engine.zones.default

    async def zone(self, person_id: str) -> ZoneInfo | None:
        """The zone the person set (None: the default)."""
        return await self.runner.run(self.engine.zones.own, person_id)

    async def set_zone(self, person_id: str, name: str) -> ZoneInfo:
        """:raises InvalidInput: a name that is no zone."""
        return await self.runner.run(self.engine.zones.set, person_id, name)

    async def clear_zone(self, person_id: str) -> None:
        await self.runner.run(self.engine.zones.clear, person_id)

    def _known(self, person_id: str) -> Person:
        found = self._overview.person(person_id)
        if found is None:
            raise NotFound(f"no person with id {person_id!r}")
        return found

    def _profile(self, person_id: str) -> Profile:
        found = self._known(person_id)
        rows = self.engine.memory_rows
        partitions = tuple(
            k
            for k in rows.partitions()
            if k.split("|")[1:2] == [person_id] and not k.startswith("guild|")
        )
        memories = (
            rows.listing(partitions, RecallFilters(), order="important", limit=PROFILE_LIMIT)
            if partitions
            else []
        )
        return Profile(found, memories, self.engine.people.shares(person_id))

    # -- memories ------------------------------------------------------------------------------
    async def memories(self, query: MemoryQuery) -> tuple[list[Memory], int]:
        """One page, newest change first, and how many match in all."""
        return await self.runner.run(self._overview.memories, query)

    async def memory(self, memory_id: str) -> Memory:
        """:raises NotFound: no live memory with that id."""
        return await self.runner.run(self.engine.memory_rows.get, memory_id)

    async def add(self, new: NewMemory) -> WriteResult:
        """Filed by the write path's own checks (safety, duplicates, links)."""
        return await self.runner.run(self.engine.memories.add, new)

    async def edit(self, memory_id: str, change: Correction) -> tuple[Memory, Memory]:
        """In place, a new type included; the old words leave the file (the WAL page too).
        Returns (old, new)."""
        return await self.runner.run(self._edit, memory_id, change)

    def _edit(self, memory_id: str, change: Correction) -> tuple[Memory, Memory]:
        # An operator who corrects a memory's words (and its type with them) means the old words
        # to be gone, so no history row keeps them (issue 20, finding 8), as for a content edit.
        old = self.engine.memory_rows.get(memory_id)
        new = self.engine.memories.update(
            memory_id,
            subject=change.subject,
            content=change.content,
            tags=change.tags,
            importance=change.importance,
            kind=change.kind,
            memory_type=change.type,
        )
        if new.content != old.content or new.subject != old.subject:
            self.engine.scrub()  # the WAL holds the page with the old words until a checkpoint
        return old, new

    async def search(
        self,
        text: str,
        filters: RecallFilters,
        top_k: int,
        *,
        guild: str | None = None,
        ctx: RecallContext | None = None,
    ) -> list[Hit[Memory]]:
        """Hybrid recall as the conversation ``ctx`` would recall, else over everything the store
        holds (or one guild's partitions); nothing is reinforced."""
        if ctx is not None:
            recall = self.engine.recall.recall
            return await self.runner.run(
                recall, ctx, text, filters=filters, top_k=top_k, reinforce=False
            )
        return await self.runner.run(self._search, text, guild, filters, top_k)

    def _search(
        self, text: str, guild: str | None, filters: RecallFilters, top_k: int
    ) -> list[Hit[Memory]]:
        partitions = self.engine.memory_rows.partitions()
        if guild:
            partitions = tuple(
                k
                for k in partitions
                if k == f"guild|{guild}|public" or k.endswith(f"|public|{guild}")
            )
        if not partitions:
            return []
        return self.engine.recall.recall_in(partitions, text, filters=filters, top_k=top_k)

    # -- what the store learned ------------------------------------------------------------------
    async def reflections(self, limit: int) -> list[ReflectionRun]:
        return await self.runner.run(self._overview.reflections, limit)

    async def entities(self, limit: int) -> list[Entity]:
        return await self.runner.run(self._overview.entities, limit)

    async def graph(self, limit: int) -> GraphView:
        return await self.runner.run(self._overview.graph, limit)

    async def guilds(self) -> list[Guild]:
        return await self.runner.run(self._overview.guilds)

    # -- the operator's switches -----------------------------------------------------------------
    async def settings(self) -> RecallSettings:
        return await self.runner.run(self._tuning.shown)

    async def change_settings(self, memories: JsonObject, messages: JsonObject) -> RecallSettings:
        """:raises pydantic.ValidationError: a bad knob; nothing is stored then."""
        return await self.runner.run(self._tuning.change, memories, messages)

    async def places(self) -> tuple[list[PlaceMode], dict[str, str]]:
        """The places with a mode set, and every group chat seen (channel key -> guild id)."""
        return await self.runner.run(self._places)

    def _places(self) -> tuple[list[PlaceMode], dict[str, str]]:
        return self.engine.place_modes.all(), dict(self.engine.messages.group_chats())

    async def set_mode(self, channel_key: str, mode: Mode) -> PlaceMode:
        """A place the bot never saw may be set too (before it speaks there)."""
        return await self.runner.run(self._set_mode, channel_key, mode)

    def _set_mode(self, channel_key: str, mode: Mode) -> PlaceMode:
        guild = dict(self.engine.messages.group_chats()).get(channel_key)
        return self.engine.place_modes.set(channel_key, mode, guild)

    async def personas(self) -> list[PlacePersona]:
        return await self.runner.run(self.engine.personas.all)

    async def set_persona(self, guild_id: str, text: str, who: str) -> PlacePersona:
        """:raises Rejected: the text fails the persona checks (a secret, an injection, a
        heading)."""
        return await self.runner.run(self.engine.personas.set, guild_id, text, who=who)

    async def reset_persona(self, guild_id: str, who: str) -> bool:
        return await self.runner.run(self.engine.personas.reset, guild_id, who=who)

    # -- the audit trail -------------------------------------------------------------------------
    async def audit(self, limit: int) -> list[AuditEntry]:
        return await self.runner.run(self.engine.audit.recent, limit)

    async def record(
        self, who: str, action: str, target: str, person_id: str | None, detail: JsonObject | None
    ) -> None:
        """One audit row (ids, fields and counts only: never a memory's words)."""
        await self.runner.run(
            self.engine.audit.record, who, action, target, person_id=person_id, detail=detail
        )

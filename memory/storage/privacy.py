"""Consent (SEC-5): who asked not to be remembered, and what is kept about a person.

    a person     ``/privacy off``: nothing they say is stored past the reply (``memory.storage.people`` keeps the
                 choice, on their person id, so every linked account follows it)
    a place      ``/privacy server off``: the same for everything said in one server or group, by anyone
                 (this module owns ``privacy_places``)
    about        what is kept about a person: the memories filed under them, and the facts others told the
                 bot about them (subject or entity names them) in the servers they are in: that server's lore
                 and its members' public facts there. Never anyone's DM-private memories, never the owner's,
                 never another server's. Only what is listed can be vetoed (``veto``).

Stopping does not delete the past (that is ``/forget everything``); it only drops what was still waiting
to be learned from, so no new memory comes from the person's words after they said stop. Forgetting a
person (``forget_everything``) keeps their choice: it is the one thing about them that must outlive it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..engine import MemoryEngine
from ..models import Memory
from ..scopes import RecallContext
from ..upkeep.forgetting import Forgotten, forget_memory, forget_person
from .people import People
from .sessions import ExtractionBuffer

SCAN_LIMIT = 1000  # memories read per list; far more than anyone reads in a chat answer
MIN_ID_CHARS = 6


@dataclass(frozen=True, slots=True)
class Kept:
    """One memory kept about a person; ``told`` is True when someone else's words put it there."""

    memory: Memory
    told: bool = False

    @property
    def short_id(self) -> str:
        return self.memory.id[:8]


class Privacy:
    def __init__(self, engine: MemoryEngine) -> None:
        self.engine, self.db = engine, engine.db
        self.people = People(engine)

    def remembers(self, ctx: RecallContext) -> bool:
        """May what is said in this context (by its speaker, in its place) be stored?"""
        return self.people.remembered(ctx.speaker_id) and not (ctx.guild_id and self.place_off(ctx.guild_id))

    def set_person(self, person_id: str, on: bool) -> None:
        with self.db.transaction():
            self.people.set_remembered(person_id, on)
            if not on:
                ExtractionBuffer(self.engine).drop_person(person_id)

    def place_off(self, guild_id: str) -> bool:
        return bool(self.db.scalar("SELECT 1 FROM privacy_places WHERE guild_id = ?", (guild_id,)))

    def set_place(self, guild_id: str, on: bool) -> None:
        with self.db.transaction():
            if on:
                self.db.execute("DELETE FROM privacy_places WHERE guild_id = ?", (guild_id,))
                return
            now = self.engine.clock.now()
            self.db.execute("INSERT OR IGNORE INTO privacy_places (guild_id, since) VALUES (?, ?)", (guild_id, now))
            ExtractionBuffer(self.engine).drop_place(guild_id)

    def forget_everything(self, person_ids: list[str]) -> dict[str, int]:
        """``forget_person``, except that someone who said /privacy off stays not remembered, on every account
        they had (their links are forgotten too, so each account is its own person again)."""
        stopped = [p for p in person_ids if not self.people.remembered(p)]
        accounts = [f"{a['platform']}:{a['platform_user_id']}" for p in stopped for a in self.people.accounts(p)]
        counts = forget_person(self.engine, person_ids)
        for person in dict.fromkeys([*stopped, *accounts]):
            self.people.set_remembered(person, False)
        return counts

    # -- what is kept about a person ---------------------------------------------------------------------
    def kept_about(self, person_id: str) -> list[Kept]:
        """The person's own memories (every partition of theirs), then what others told the bot about them."""
        mine = tuple(self.engine.memory_rows.partitions_of(person_id))
        own = self.engine.memory_rows.listing(mine, limit=SCAN_LIMIT) if mine else []
        return [Kept(m) for m in own] + [Kept(m, told=True) for m in self._told_about(person_id)]

    def veto(self, person_id: str, short_id: str, *, asked_in: tuple[str, str] | None = None) -> Forgotten | None:
        """Forget one listed memory with the full cascade; None (and nothing changed) unless ``short_id``
        names exactly one memory of the person's own list."""
        prefix = short_id.strip().strip("[]").lower()
        if len(prefix) < MIN_ID_CHARS:
            return None
        listed = [k for k in self.kept_about(person_id) if k.memory.id.lower().startswith(prefix)]
        if len(listed) != 1:
            return None
        return forget_memory(self.engine, listed[0].memory.id, asked_in=asked_in)

    def _told_about(self, person_id: str) -> list[Memory]:
        """Facts filed under someone else (or a server's lore) in the servers the person is in, whose subject
        or an entity names them by a name that is theirs alone (``People.own_names``)."""
        names = self.people.own_names(person_id)
        partitions = self._shared_partitions(person_id)
        if not names or not partitions:
            return []
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in names) + r")(?!\w)", re.IGNORECASE)
        entity_rids = set(self.engine.graph.memories_naming(names))
        found = self.engine.memory_rows.listing(partitions, limit=SCAN_LIMIT)
        return [m for m in found if m.rid in entity_rids or pattern.search(m.subject)]

    def _shared_partitions(self, person_id: str) -> tuple[str, ...]:
        """Lore and others' public facts of the servers the person spoke in or has memories in."""
        mine = self.engine.memory_rows.partitions_of(person_id)
        places = set(self.engine.messages.guilds_of(person_id)) | {k.split("|", 3)[3] for k in mine if k.count("|") == 3}
        return tuple(k for k in self.engine.memory_rows.partitions() if _shared_in(k, places, person_id))


def _shared_in(partition: str, places: set[str], person_id: str) -> bool:
    """``guild|<g>|public`` or ``user|<someone else>|public|<g>`` for a server ``g`` the person is in."""
    parts = partition.split("|", 3)
    if parts[0] == "guild" and len(parts) == 3:
        return parts[1] in places
    return parts[0] == "user" and len(parts) == 4 and parts[1] != person_id and parts[2] == "public" and parts[3] in places

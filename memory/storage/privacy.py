"""Consent (SEC-5): who asked not to be remembered, and what is kept about a person.

    a person     ``/privacy off``: nothing they say is stored past the reply (``memory.storage.people`` keeps the
                 choice, on their person id, so every linked account follows it)
    a place      ``/privacy server off``: the same for everything said in one server or group, by anyone
                 (this module owns ``privacy_places``)
    about        what is kept about a person: the memories filed under them (the owner's own memory too, asked
                 in an owner-private chat), and the public facts others said about them in a server, tied to
                 their person id when written (``subject_person_id``: an @mention or a reply the
                 fact names).
                 Never by a display name, which anyone can take; never lore, anyone's DM-private
                 memories, or what an admin or the owner wrote. Only what is listed can be vetoed.

Stopping does not delete the past (that is ``/forget everything``); it only drops what was still waiting
to be learned from, so no new memory comes from the person's words after they said stop. Forgetting a
person (``memory.upkeep.forgetting.forget_everything``) keeps their choice: it is the one thing about them that
must outlive it; a veto of one listed memory is ``memory.upkeep.forgetting.veto``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..clock import Clock
from ..models import Memory, Scope
from ..scopes import RecallContext
from .db import Database
from .memories import MemoryRepository
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
    def __init__(
        self,
        db: Database,
        clock: Clock,
        people: People,
        buffer: ExtractionBuffer,
        rows: MemoryRepository,
    ) -> None:
        self.db, self.clock, self.people, self.buffer, self.rows = db, clock, people, buffer, rows

    def remembers(self, ctx: RecallContext) -> bool:
        """May what is said in this context (by its speaker, in its place) be stored?"""
        return self.people.remembered(ctx.speaker_id) and not (
            ctx.guild_id and self.place_off(ctx.guild_id)
        )

    def set_person(self, person_id: str, on: bool) -> None:
        with self.db.transaction():
            self.people.set_remembered(person_id, on)
            if not on:
                self.buffer.drop_person(person_id)

    def place_off(self, guild_id: str) -> bool:
        return bool(self.db.scalar("SELECT 1 FROM privacy_places WHERE guild_id = ?", (guild_id,)))

    def set_place(self, guild_id: str, on: bool) -> None:
        with self.db.transaction():
            if on:
                self.db.execute("DELETE FROM privacy_places WHERE guild_id = ?", (guild_id,))
                return
            now = self.clock.now()
            self.db.execute(
                "INSERT OR IGNORE INTO privacy_places (guild_id, since) VALUES (?, ?)",
                (guild_id, now),
            )
            self.buffer.drop_place(guild_id)

    def stopped_accounts(self, person_ids: list[str]) -> list[str]:
        """Of ``person_ids``, those who said /privacy off, and each account they have (``"platform:id"``): what must
        stay not remembered when they are forgotten (their links go too, so each account is its own person again)."""
        stopped = [p for p in person_ids if not self.people.remembered(p)]
        accounts = [
            f"{a['platform']}:{a['platform_user_id']}"
            for p in stopped
            for a in self.people.accounts(p)
        ]
        return list(dict.fromkeys([*stopped, *accounts]))

    # -- what is kept about a person ---------------------------------------------------------------------
    def kept_about(self, person_id: str, *, owner: bool = False) -> list[Kept]:
        """The person's own memories (every partition of theirs; ``owner``: the operator asking in an
        owner-private chat, so the owner memory their words are filed in too), then what others said about
        them, tied to their person id when it was written (``memory.write.subjects``), never by a name."""
        rows = self.rows
        mine = tuple(
            p.partition_key
            for p in rows.personal_partitions(person_id)
            if owner or p.scope is Scope.USER
        )
        own = rows.listing(mine, limit=SCAN_LIMIT) if mine else []
        return [Kept(m) for m in own] + [
            Kept(m, told=True) for m in rows.told_about(person_id, SCAN_LIMIT)
        ]

    def listed(self, person_id: str, short_id: str, *, owner: bool = False) -> str | None:
        """The id of the one memory of the person's list (``kept_about``) that ``short_id`` names; None unless
        exactly one (and at least ``MIN_ID_CHARS`` given)."""
        prefix = short_id.strip().strip("[]").lower()
        if len(prefix) < MIN_ID_CHARS:
            return None
        listed = [
            k
            for k in self.kept_about(person_id, owner=owner)
            if k.memory.id.lower().startswith(prefix)
        ]
        return listed[0].memory.id if len(listed) == 1 else None

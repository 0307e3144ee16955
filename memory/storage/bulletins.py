"""Stored memory bulletins (MAINT-5); the one owner of ``bulletins`` and ``bulletin_partitions``. Which memories
a bulletin is written from, and when, is ``memory.upkeep.bulletin``'s business: this keeps what was written.

    replace(bulletin, people, partitions)   a scope's bulletin, in place of the one it had; the partitions it
                                            was built from (the m006 triggers drop it when one of them changes)
    get(scope, scope_id)                    a scope's bulletin, if it has one
    for_context(ctx)                        the bulletin a conversation is shown (``scope_of``), if any
    stored(scope, scope_id)                 the bulletins, of one scope kind or id when named
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..scopes import RecallContext
from .db import Database


@dataclass(frozen=True, slots=True)
class Bulletin:
    scope: str
    scope_id: str
    text: str
    built_at: float
    memory_count: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Bulletin:
        return cls(row["scope"], row["scope_id"], row["text"], row["built_at"], row["memory_count"])


def scope_of(ctx: RecallContext) -> tuple[str, str]:
    """The bulletin a conversation is shown: its guild's, the owner's in the owner's own DM, else the
    person's DMs'."""
    if not ctx.is_dm:
        return "guild", ctx.guild_id or ""
    if ctx.owner_private and ctx.owner_id:
        return "owner", ctx.owner_id
    return "dm", ctx.speaker_id


class BulletinRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def replace(
        self, bulletin: Bulletin, people: tuple[str, ...], partitions: tuple[str, ...]
    ) -> None:
        with self.db.transaction():
            self.db.execute(
                "DELETE FROM bulletins WHERE scope = ? AND scope_id = ?",
                (bulletin.scope, bulletin.scope_id),
            )
            self.db.execute(
                "INSERT INTO bulletins (scope, scope_id, text, people, memory_count, built_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    bulletin.scope,
                    bulletin.scope_id,
                    bulletin.text,
                    json.dumps(list(people)),
                    bulletin.memory_count,
                    bulletin.built_at,
                ),
            )
            rowid = int(self.db.con.last_insert_rowid())
            self.db.con.executemany(
                "INSERT INTO bulletin_partitions (bulletin_id, partition_key) VALUES (?, ?)",
                [(rowid, k) for k in partitions],
            )

    def get(self, scope: str, scope_id: str) -> Bulletin | None:
        row = self.db.one(
            "SELECT * FROM bulletins WHERE scope = ? AND scope_id = ?", (scope, scope_id)
        )
        return Bulletin.from_row(row) if row else None

    def for_context(self, ctx: RecallContext) -> Bulletin | None:
        return self.get(*scope_of(ctx))

    def stored(self, scope: str | None = None, scope_id: str | None = None) -> list[Bulletin]:
        conditions = [
            (c, v) for c, v in (("scope = ?", scope), ("scope_id = ?", scope_id)) if v is not None
        ]
        where = " AND ".join(c for c, _ in conditions) or "1"
        rows = self.db.rows(
            f"SELECT * FROM bulletins WHERE {where} ORDER BY scope, scope_id",
            tuple(v for _, v in conditions),
        )
        return [Bulletin.from_row(r) for r in rows]

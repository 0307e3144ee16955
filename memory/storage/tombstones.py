"""Owner of ``tombstones`` (SEC-5): the rows a forgotten fact leaves, read as ``Buried`` values.

What goes in them (keyed hashes, traces) and how a candidate is matched is
``memory.write.tombstones``'s; this module only keeps and reads the rows, for SQLite and PostgreSQL
alike (plain portable SQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..scopes import placeholders
from .db import Database

# (scope, scope_id, guild_id, content_mac, fact_mac, marks, signature, buried_at): one new tombstone
NewStone = tuple[str, str, str | None, str, str, str, str, float]


@dataclass(frozen=True, slots=True)
class Buried:
    """A tombstone as stored. ``keyed``: 1 when made with the outside key (with a trace in
    ``marks`` and ``signature``), 0 for a store before issue 31 (the legacy in-store key, exact
    hashes only)."""

    id: int
    content_mac: str
    fact_mac: str
    marks: str
    signature: str
    keyed: int
    buried_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Buried:
        return cls(
            int(row["id"]),
            str(row["content_mac"]),
            str(row["fact_mac"]),
            str(row["marks"]),
            str(row["signature"]),
            int(row["keyed"]),
            float(row["buried_at"]),
        )


class TombstoneRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, stones: Sequence[NewStone]) -> None:
        """New tombstones, all made with the outside key (``keyed`` 1)."""
        self.db.con.executemany(
            "INSERT INTO tombstones (scope, scope_id, guild_id, content_mac, fact_mac, marks, "
            "signature, keyed, buried_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
            stones,
        )

    def of(self, scope: str, scope_id: str) -> list[Buried]:
        """The tombstones of one person (or place): bound to whom the forgotten fact was about."""
        return [
            Buried.from_row(row)
            for row in self.db.rows(
                "SELECT id, content_mac, fact_mac, marks, signature, keyed, buried_at "
                "FROM tombstones WHERE scope = ? AND scope_id = ?",
                (scope, scope_id),
            )
        ]

    def owners(self) -> list[tuple[str, str]]:
        """Whom (scope, scope id) the tombstones are bound to, each once."""
        return [
            (str(r["scope"]), str(r["scope_id"]))
            for r in self.db.rows("SELECT DISTINCT scope, scope_id FROM tombstones")
        ]

    def delete(self, ids: list[int]) -> None:
        if ids:  # "IN ()" is SQLite's; PostgreSQL refuses it
            self.db.execute(f"DELETE FROM tombstones WHERE id IN ({placeholders(ids)})", ids)

    def any(self) -> bool:
        return bool(self.db.scalar("SELECT EXISTS (SELECT 1 FROM tombstones)"))

    def count(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM tombstones"))

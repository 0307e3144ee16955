"""The places the bot was removed from (SEC-7); the one owner of ``place_departures``. When a place is purged
is ``memory.upkeep.retention.Departures``' business: this keeps the rows.

    add(departure)      the first departure of a place; told again, the first one's dates hold
    remove(guild_id)    True when a departure was pending (the bot was added back, or the place was purged)
    get(guild_id)       the pending departure of a place, if any
    due(now)            the departures whose purge time came, the oldest purge first
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .db import Database


@dataclass(frozen=True, slots=True)
class Departure:
    guild_id: str
    platform: str
    left_at: float
    purge_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Departure:
        return cls(row["guild_id"], row["platform"], row["left_at"], row["purge_at"])


class PlaceDepartures:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, departure: Departure) -> None:
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO place_departures (guild_id, platform, left_at, purge_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (guild_id) DO NOTHING",
                (departure.guild_id, departure.platform, departure.left_at, departure.purge_at),
            )

    def remove(self, guild_id: str) -> bool:
        with self.db.transaction():
            return bool(
                self.db.rows(
                    "DELETE FROM place_departures WHERE guild_id = ? RETURNING guild_id",
                    (guild_id,),
                )
            )

    def get(self, guild_id: str) -> Departure | None:
        row = self.db.one("SELECT * FROM place_departures WHERE guild_id = ?", (guild_id,))
        return Departure.from_row(row) if row else None

    def due(self, now: float) -> list[Departure]:
        rows = self.db.rows(
            "SELECT * FROM place_departures WHERE purge_at <= ? ORDER BY purge_at", (now,)
        )
        return [Departure.from_row(r) for r in rows]

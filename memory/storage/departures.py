"""The places the bot was removed from (SEC-7); the one owner of ``place_departures``. When a place is purged
is ``memory.upkeep.retention.Departures``' business: this keeps the rows.

A place is named by its store key (``memory.scopes.place_key``: "discord:7001"), the key its
messages, memories and reminders are filed under. Rows written before departures were keyed hold
the platform's own id ("7001"): they are read as their key, found and removed under either form.

    add(departure)      the first departure of a place; told again, the first one's dates hold
    remove(key)         True when a departure was pending (the bot was added back, or purged)
    get(key)            the pending departure of a place, if any
    due(now)            the departures whose purge time came, the oldest purge first, one per place
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..scopes import place_key
from .db import Database


@dataclass(frozen=True, slots=True)
class Departure:
    guild_id: str  # the place's store key
    platform: str
    left_at: float
    purge_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Departure:
        key = place_key(row["platform"], row["guild_id"])
        return cls(key, row["platform"], row["left_at"], row["purge_at"])


def _forms(key: str) -> tuple[str, str]:
    """The key and the platform's own id: the two forms a place's row may be stored under."""
    return key, key.partition(":")[2] or key


class PlaceDepartures:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, departure: Departure) -> None:
        with self.db.transaction():
            if self.get(departure.guild_id) is None:
                self.db.execute(
                    "INSERT INTO place_departures (guild_id, platform, left_at, purge_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (guild_id) DO NOTHING",
                    (departure.guild_id, departure.platform, departure.left_at, departure.purge_at),
                )

    def remove(self, key: str) -> bool:
        with self.db.transaction():
            return bool(
                self.db.rows(
                    "DELETE FROM place_departures WHERE guild_id IN (?, ?) RETURNING guild_id",
                    _forms(key),
                )
            )

    def get(self, key: str) -> Departure | None:
        found = [
            d for d in self._read("WHERE guild_id IN (?, ?)", _forms(key)) if d.guild_id == key
        ]
        return found[0] if found else None

    def due(self, now: float) -> list[Departure]:
        places: dict[str, Departure] = {}
        for departure in self._read("WHERE purge_at <= ?", (now,)):
            places.setdefault(departure.guild_id, departure)
        return list(places.values())

    def _read(self, where: str, params: tuple[Any, ...]) -> list[Departure]:
        rows = self.db.rows(f"SELECT * FROM place_departures {where} ORDER BY purge_at", params)
        return [Departure.from_row(r) for r in rows]

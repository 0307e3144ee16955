"""The usage ledger (ORCH-14): what the model servers said each call cost, counted by day, never a word.

One row per (day, person, platform, place, kind, model), its counts added to as calls come in:

    day        the UTC date of the call ("2026-11-27"): budgets are daily, and a UTC day is one day for every process
    person_id  whose turn or job it was; '' on the place's own row
    platform   discord | telegram | console; '' for work of no platform (a bulletin, a maintenance pass)
    place_id   the server or group (its guild key, "discord:123"); '' for a DM and for work of no place
    kind       reply, voice, caption (a look at a photo), extraction, reflection, compaction, daily,
               bulletin, checkin, judge, other; ``NOTICE`` rows count the polite lines said when a
               budget was spent (no tokens)
    model      the model's name as configured

Every call is added twice: to its person's row and to its place's own row (person ''). The place's rows are the
totals (what a server spent, what the provider bills); a person's rows are their share. Forgetting a person deletes
their rows (counts keyed by a person id are personal data: "Alice asked 300 things on Tuesday", SEC-3); the place's
rows keep their counts under no one's id, so a server's total, and its budget, do not shrink when someone is forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .db import Database

NOTICE = "notice"  # the kind of the rows that count the polite lines said when a budget was spent
_KEY = "day, person_id, platform, place_id, kind, model"
_COUNTS = ("calls", "unreported", "prompt_tokens", "cached_tokens", "completion_tokens")
_SUMS = ", ".join(f"COALESCE(SUM({c}), 0) AS {c}" for c in _COUNTS)


@dataclass(frozen=True, slots=True)
class Charge:
    """Who a model call is for: the job, the person ('' for none in particular), the platform and the place."""

    kind: str
    person_id: str = ""
    platform: str = ""
    place_id: str = ""  # a server's or group's guild key; '' in a DM


@dataclass(frozen=True, slots=True)
class Spend:
    """Counts of calls and tokens, as the model servers reported them. ``unreported``: calls whose answer said
    nothing of its cost (they count as calls, with no tokens)."""

    calls: int = 0
    unreported: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        """What a budget counts: tokens read and written (cached ones included: providers bill them too)."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Spend) -> Spend:
        return Spend(*(getattr(self, c) + getattr(other, c) for c in _COUNTS))


def _spend(row: dict[str, Any] | None) -> Spend:
    """A summed row as a ``Spend`` (no row: nothing spent)."""
    return Spend(**{c: int((row or {}).get(c) or 0) for c in _COUNTS})


@dataclass(frozen=True, slots=True)
class SpendingLine:
    """One group of a listing: its label (a kind, a model, a person id or a place id) and what it spent."""

    label: str
    spend: Spend


def day_of(now: float) -> str:
    """The ledger's day of a moment: its UTC date."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


class UsageLedger:
    """The one owner of ``usage_ledger``: every statement on it is here."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, day: str, charge: Charge, model: str, spend: Spend) -> None:
        """Adds one call's counts to its person's row (when it has a person) and to its place's own row."""
        # not durable: a crash may lose the last calls' counts (a budget then allows a few more); a commit waiting for
        # the disk would cost every model call a sync, as it would every reply in ``ratelimits``
        with self.db.transaction(durable=False):
            if charge.person_id:
                self._add(day, charge, model, spend)
            self._add(day, Charge(charge.kind, "", charge.platform, charge.place_id), model, spend)

    def _add(self, day: str, charge: Charge, model: str, spend: Spend) -> None:
        values = (
            day,
            charge.person_id,
            charge.platform,
            charge.place_id,
            charge.kind,
            model,
            *(getattr(spend, c) for c in _COUNTS),
        )
        added = ", ".join(f"{c} = usage_ledger.{c} + excluded.{c}" for c in _COUNTS)
        self.db.execute(
            f"INSERT INTO usage_ledger ({_KEY}, {', '.join(_COUNTS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            f"ON CONFLICT ({_KEY}) DO UPDATE SET {added}",
            values,
        )

    def person_spent(self, day: str, person_id: str) -> Spend:
        """What one person's turns and jobs cost on ``day``, everywhere."""
        sql = f"SELECT {_SUMS} FROM usage_ledger WHERE day = ? AND person_id = ? AND kind != ?"
        return _spend(self.db.one(sql, (day, person_id, NOTICE)))

    def place_spent(self, day: str, place_id: str) -> Spend:
        """What a server or group cost on ``day``, everyone's share and its own work (from its own rows)."""
        sql = f"SELECT {_SUMS} FROM usage_ledger WHERE day = ? AND place_id = ? AND person_id = '' AND kind != ?"
        return _spend(self.db.one(sql, (day, place_id, NOTICE)))

    def first_notice(self, day: str, person_id: str, place_id: str = "") -> bool:
        """Counts a polite line for ``person_id`` (or, with person '', for the place) on ``day``; True only the first
        time that day. One upsert, then its count read in the same transaction: two processes deciding for the same
        person at once take turns on the row, and only one of them says it."""
        key = (day, person_id, "", place_id, NOTICE, "")
        with self.db.transaction(durable=False):
            self.db.execute(
                f"INSERT INTO usage_ledger ({_KEY}, calls) VALUES (?, ?, ?, ?, ?, ?, 1) "
                f"ON CONFLICT ({_KEY}) DO UPDATE SET calls = usage_ledger.calls + 1",
                key,
            )
            where = " AND ".join(f"{column} = ?" for column in _KEY.split(", "))
            said = self.db.scalar(f"SELECT calls FROM usage_ledger WHERE {where}", key)
        return int(said) == 1

    def totals(self, first_day: str, last_day: str, place_id: str | None = None) -> Spend:
        """The whole spend of the days from ``first_day`` to ``last_day`` (one place's, when given)."""
        where, params = self._places(first_day, last_day, place_id)
        return _spend(self.db.one(f"SELECT {_SUMS} FROM usage_ledger WHERE {where}", params))

    def by(
        self,
        column: str,
        first_day: str,
        last_day: str,
        place_id: str | None = None,
        *,
        limit: int = 50,
    ) -> list[SpendingLine]:
        """The spend grouped by ``column`` (kind, model, place_id or day), the largest first, from the places' own rows."""
        if column not in ("kind", "model", "place_id", "day", "platform"):
            raise ValueError(f"the ledger is not grouped by {column!r}")
        where, params = self._places(first_day, last_day, place_id)
        return self._lines(column, where, params, limit)

    def people(
        self, first_day: str, last_day: str, place_id: str | None = None, *, limit: int = 50
    ) -> list[SpendingLine]:
        """Each person's spend (in one place, when given), the largest first."""
        where = "day BETWEEN ? AND ? AND person_id != '' AND kind != ?"
        params: tuple[Any, ...] = (first_day, last_day, NOTICE)
        if place_id is not None:
            where, params = where + " AND place_id = ?", (*params, place_id)
        return self._lines("person_id", where, params, limit)

    def person(self, person_id: str, first_day: str, last_day: str) -> list[SpendingLine]:
        """One person's spend by kind over the days."""
        where = "day BETWEEN ? AND ? AND person_id = ? AND kind != ?"
        return self._lines("kind", where, (first_day, last_day, person_id, NOTICE), 50)

    def _places(
        self, first_day: str, last_day: str, place_id: str | None
    ) -> tuple[str, tuple[Any, ...]]:
        where = "day BETWEEN ? AND ? AND person_id = '' AND kind != ?"
        params: tuple[Any, ...] = (first_day, last_day, NOTICE)
        if place_id is not None:
            where, params = where + " AND place_id = ?", (*params, place_id)
        return where, params

    def _lines(
        self, column: str, where: str, params: tuple[Any, ...], limit: int
    ) -> list[SpendingLine]:
        rows = self.db.rows(
            f"SELECT {column} AS label, {_SUMS} FROM usage_ledger WHERE {where} GROUP BY {column} "
            f"ORDER BY SUM(prompt_tokens + completion_tokens) DESC, {column} LIMIT ?",
            (*params, limit),
        )
        return [SpendingLine(str(r["label"]), _spend(r)) for r in rows]

"""Reminders a person asked for (ORCH-13); the one owner of ``reminders``. Sending is the bot's (``bot.reminders``).

    add(new)                        a pending row; returns it (its id and due time are what the bot confirms)
    mine(person) / cancel(person, n) / forget_matching(person, words)   what /reminders and /forget do
    due(now)                        pending rows whose time came (and whose retry wait is over), and rows whose
                                    sender died mid-send (lease over), soonest first
    claim(id, holder, lease_s)      -> 'sending' for this holder, one statement (atomic on both engines)
    delivered(id, holder, next)     a one-off row is deleted (its words are no longer needed); a recurring one
                                    is pending again at its next occurrence
    failed(id, holder)              pending again after a backoff, or 'undelivered' after MAX_ATTEMPTS

Delivery is at least once, and this is why: a reminder is something the person asked for at a time they chose
("take the pill", "call mum"); losing one is the failure people report most about such bots, while a repeat
costs a glance. A process killed after its claim and before the platform took the message leaves the row
'sending'; once its lease has run out another process (or the restarted one) claims it again and sends it,
so nothing is lost. The one case that repeats is a kill after the platform took it and before ``delivered``
committed (a few milliseconds); that second copy says it may be a repeat (``Reminder.resent``). Two live
processes never both send: the claim is one conditional UPDATE, and the loser gets no row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from ..clock import Clock
from ..errors import InvalidInput
from ..models import JsonObject
from ..reminder_time import When, next_due, parse_when
from .db import Database

MAX_ATTEMPTS = 5  # sends the platform refused before the person is told it could not be delivered
RETRY_AFTER = 60.0  # seconds, doubled at each failed attempt (1, 2, 4, 8 minutes)
REPORT_AGAIN_AFTER = 3600.0  # telling the person it failed failed too: tried again this much later
# attempts (sends, then tellings) after which only /reminders shows it
MAX_TELLS = MAX_ATTEMPTS + 24
MAX_TEXT = 500
MAX_PENDING = 50  # per person: a runaway model loop cannot fill the store
_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "to",
        "my",
        "me",
        "of",
        "reminder",
        "reminders",
        "remind",
        "about",
        "that",
        "for",
    }
)


@dataclass(frozen=True, slots=True)
class Place:
    """Where the reminder was asked, so where it fires; ``platform_user_id`` is the asker's account there."""

    platform: str
    channel_id: str
    platform_user_id: str
    guild_id: str | None = None
    is_dm: bool = True


@dataclass(frozen=True, slots=True)
class NewReminder:
    person_id: str
    place: Place
    text: str
    zone: str
    due_at: float
    every: str = ""
    wall_time: str = ""


@dataclass(frozen=True, slots=True)
class Reminder:
    id: int
    person_id: str
    platform: str
    channel_id: str
    guild_id: str | None
    is_dm: bool
    platform_user_id: str
    text: str
    zone: str
    due_at: float
    every: str
    wall_time: str
    state: str
    attempts: int
    holder: str | None
    lease_until: float

    @property
    def place(self) -> Place:
        return Place(
            self.platform, self.channel_id, self.platform_user_id, self.guild_id, self.is_dm
        )

    @property
    def resent(self) -> bool:
        """Claimed before by a sender that died before it recorded the delivery: it may have gone out."""
        return self.state == "sending"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def next_due(self, after: float) -> float | None:
        """The next occurrence after ``after`` (None for a one-off), on the local calendar of its zone."""
        if not self.every:
            return None
        return next_due(When(self.due_at, self.every, self.wall_time), after, self.tz)

    def when(self) -> str:
        """Its time as the person reads it: 'Friday 28 November, 09:00 (Europe/Lisbon)', 'every Monday at 09:00'."""
        local = datetime.fromtimestamp(self.due_at, self.tz)
        if self.every == "day":
            return f"every day at {self.wall_time} ({self.zone}), next on {local:%A %-d %B}"
        if self.every == "week":
            return f"every {local:%A} at {self.wall_time} ({self.zone}), next on {local:%-d %B}"
        return f"{local:%A %-d %B %Y, %H:%M} ({self.zone})"

    def as_dict(self) -> JsonObject:
        return {
            "id": self.id,
            "text": self.text,
            "when": self.when(),
            "due_at_utc": self.due_at,
            "every": self.every,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Reminder:
        values = {f.name: row[f.name] for f in fields(cls)}
        return cls(**values | {"is_dm": bool(row["is_dm"])})


class Reminders:
    """Owner of ``reminders``: a ``Database`` and the clock it reads."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def ask(self, person_id: str, place: Place, when: str, what: str, zone: tzinfo) -> Reminder:
        """``what`` at the time ``when`` names in ``zone``: the stored row, or InvalidInput with the question to
        answer (nothing stored). The one way /remind and the reminder_set tool set a reminder."""
        due = parse_when(when, self.clock.now(), zone)
        # a ZoneInfo, or datetime.UTC for a person with no zone
        name = getattr(zone, "key", None) or "UTC"
        return self.add(NewReminder(person_id, place, what, name, due.due_at, due.every, due.local))

    def add(self, new: NewReminder) -> Reminder:
        text = " ".join(new.text.split())
        if not text:
            raise InvalidInput("say what to remind you of")
        if len(text) > MAX_TEXT:
            raise InvalidInput(
                f"a reminder is at most {MAX_TEXT} characters (this one is {len(text)})"
            )
        if len(self.mine(new.person_id)) >= MAX_PENDING:
            raise InvalidInput(
                f"you have {MAX_PENDING} reminders already: cancel some with /reminders cancel <n>"
            )
        p = new.place
        row = self.db.rows(
            "INSERT INTO reminders (person_id, platform, channel_id, guild_id, is_dm, platform_user_id, text, zone, "
            "due_at, every, wall_time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (
                new.person_id,
                p.platform,
                p.channel_id,
                p.guild_id,
                int(p.is_dm),
                p.platform_user_id,
                text,
                new.zone,
            )
            + (new.due_at, new.every, new.wall_time, self.clock.now()),
        )
        return Reminder.from_row(row[0])

    def get(self, reminder_id: int) -> Reminder | None:
        row = self.db.one("SELECT * FROM reminders WHERE id = ?", (reminder_id,))
        return Reminder.from_row(row) if row else None

    def mine(self, person_id: str) -> list[Reminder]:
        """The person's reminders, soonest first: what /reminders numbers 1, 2, 3..."""
        rows = self.db.rows(
            "SELECT * FROM reminders WHERE person_id = ? ORDER BY due_at, id", (person_id,)
        )
        return [Reminder.from_row(r) for r in rows]

    def cancel(self, person_id: str, reminder_id: int) -> bool:
        """Deleted, and its words leave the store's files (SEC-3); False when it is not this person's."""
        return self._delete(person_id, [reminder_id]) == 1

    def _delete(self, person_id: str, ids: list[int]) -> int:
        gone = sum(
            len(
                self.db.rows(
                    "DELETE FROM reminders WHERE id = ? AND person_id = ? RETURNING id",
                    (i, person_id),
                )
            )
            for i in ids
        )
        if gone:
            self.db.scrub()  # the WAL would keep the page with the words until the next checkpoint
        return gone

    def forget_matching(self, person_id: str, words: str) -> list[str]:
        """``/forget <words>``: the person's reminders whose text holds every meaningful word are deleted;
        returns their texts (for the answer)."""
        wanted = _words(words) - _STOP
        if not wanted:
            return []
        hits = [r for r in self.mine(person_id) if wanted <= _words(r.text)]
        self._delete(person_id, [r.id for r in hits])
        return [r.text for r in hits]

    # -- sending -----------------------------------------------------------------------------------
    def due(self, now: float) -> list[Reminder]:
        rows = self.db.rows(
            "SELECT * FROM reminders WHERE (state = 'pending' AND due_at <= ? AND retry_at <= ?) "
            "OR (state = 'sending' AND lease_until < ?) ORDER BY due_at, id",
            (now, now, now),
        )
        return [Reminder.from_row(r) for r in rows]

    def claim(self, reminder: Reminder, holder: str, lease_s: float) -> bool:
        """This holder's to send, for ``lease_s``: the row must still be as ``due`` read it (pending and due, or a
        dead sender's with its lease over). One statement, so of two processes only one gets it."""
        now = self.clock.now()
        taken = self.db.rows(
            "UPDATE reminders SET state = 'sending', holder = ?, lease_until = ? WHERE id = ? AND due_at = ? AND ("
            "(state = 'pending' AND due_at <= ? AND retry_at <= ?) OR (state = 'sending' AND lease_until < ?)) RETURNING id",
            (holder, now + lease_s, reminder.id, reminder.due_at, now, now, now),
        )
        return bool(taken)

    def delivered(self, reminder_id: int, holder: str, next_due: float | None) -> bool:
        """The platform took it: a one-off row is deleted, a recurring one waits for ``next_due``. False when the
        row is no longer this holder's (forgotten meanwhile, or taken over after this process stalled)."""
        params: tuple[Any, ...]
        if next_due is None:
            sql, params = (
                "DELETE FROM reminders WHERE id = ? AND holder = ? RETURNING id",
                (reminder_id, holder),
            )
        else:
            sql = (
                "UPDATE reminders SET state = 'pending', due_at = ?, attempts = 0, retry_at = 0, holder = NULL, "
                "lease_until = 0, sent_count = sent_count + 1 WHERE id = ? AND holder = ? RETURNING id"
            )
            params = (next_due, reminder_id, holder)
        return bool(self.db.rows(sql, params))

    def failed(self, reminder_id: int, holder: str) -> str:
        """The platform refused it: pending again after a backoff, or 'undelivered' once MAX_ATTEMPTS failed.
        Returns the new state ('' when the row is gone or no longer this holder's)."""
        rows = self.db.rows(
            "UPDATE reminders SET attempts = attempts + 1, holder = NULL, lease_until = 0, "
            "retry_at = CASE WHEN attempts + 1 >= ? THEN 0 ELSE ? + ? * (1 << CAST(attempts AS INTEGER)) END, "
            "state = CASE WHEN attempts + 1 >= ? THEN 'undelivered' ELSE 'pending' END "
            "WHERE id = ? AND holder = ? RETURNING state",
            (MAX_ATTEMPTS, self.clock.now(), RETRY_AFTER, MAX_ATTEMPTS, reminder_id, holder),
        )
        return str(rows[0]["state"]) if rows else ""

    def moved_on(self, reminder_id: int, next_due: float | None) -> None:
        """An undelivered reminder the person was told about: a one-off goes, a recurring one tries its next time."""
        if next_due is None:
            self.db.execute(
                "DELETE FROM reminders WHERE id = ? AND state = 'undelivered'", (reminder_id,)
            )
            return
        self.db.execute(
            "UPDATE reminders SET state = 'pending', due_at = ?, attempts = 0, retry_at = 0 WHERE id = ? AND state = 'undelivered'",
            (next_due, reminder_id),
        )

    def undelivered(self, now: float) -> list[Reminder]:
        """Reminders given up on whose person is still to be told (a failed telling is tried again an hour later)."""
        rows = self.db.rows(
            "SELECT * FROM reminders WHERE state = 'undelivered' AND retry_at <= ? AND attempts < ? ORDER BY id",
            (now, MAX_TELLS),
        )
        return [Reminder.from_row(r) for r in rows]

    def tell_later(self, reminder_id: int) -> None:
        """Telling failed too: an hour later, up to a day of tries; after that /reminders is where they see it."""
        now = self.clock.now()
        self.db.execute(
            "UPDATE reminders SET retry_at = ?, attempts = attempts + 1 WHERE id = ?",
            (now + REPORT_AGAIN_AFTER, reminder_id),
        )


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))

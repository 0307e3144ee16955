"""Check-ins (ORCH-8): who asked for them, which of their dated goals, todos and events the bot follows up on,
and the state of each follow-up. The owner of ``checkin_people`` and ``checkins``; asking the model and sending
are the bot's business (``bot.checkins``).

    opt_in / opt_out / destination   a person's choice, made in a DM: that DM is the only place a check-in goes
    plan(person, memories, zone)     a pending row for each dated goal, todo or event not planned before
    due(now)                         pending rows whose moment has come, oldest first
    claim(id)                        pending -> sending, committed on its own before anything leaves
    sent(id, message_id)             sending -> sent, with the check-in's stored message in the DM's history

A row moves pending -> sending -> sent; 'failed' when the model kept failing (or the platform refused it),
'expired' when its moment passed long ago, 'cancelled' when its memory stopped being live. Forgetting the
memory deletes its rows (a foreign key cascade, whichever path deletes it); forgetting the person deletes theirs
(``memory.upkeep.registry``). The tables hold ids, dates and states, never words: the message is written at sending time.

Where the line falls: a row is claimed ('sending') in its own committed statement before the message leaves.
After a crash, a row left in 'sending' is never sent again: the bot cannot know whether it went out, and a
second "how did it go?" is worse than a missed one. A row still 'pending' (the model was writing it, or its turn
had not come) is sent after the restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from ..clock import DAY
from ..errors import InvalidInput
from ..models import FactKind, Memory
from ..scopes import placeholders

if TYPE_CHECKING:
    from ..clock import Clock
    from .db import Database

FOLLOWED_KINDS = (FactKind.EVENT, FactKind.TODO, FactKind.GOAL)
WEEK = 7 * DAY
# "how did the marathon go?" a week later reads like a form letter: such a row expires
STALE_AFTER = 3 * DAY
MAX_ATTEMPTS = 3  # model failures before a row is given up
RETRY_AFTER = 3600.0  # a failed attempt waits this long (times the attempts so far) before the next


@dataclass(frozen=True, slots=True)
class Destination:
    """The DM a person turned check-ins on in: the platform, the chat, and their account there."""

    platform: str
    channel_id: str
    platform_user_id: str


@dataclass(frozen=True, slots=True)
class Checkin:
    id: int
    person_id: str
    memory_id: str
    kind: str
    due_at: float
    state: str
    attempts: int
    claimed_at: float | None
    sent_at: float | None
    destination: Destination | None = (
        None  # joined from checkin_people (None once the person opted out)
    )
    subject: str = ""  # the memory's subject, joined for listings; never stored here

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Checkin:
        where = (
            Destination(row["platform"], row["channel_id"], row["platform_user_id"])
            if row.get("platform")
            else None
        )
        fields = {
            name: row[name] for name in cls.__slots__ if name not in ("destination", "subject")
        }
        return cls(**fields, destination=where, subject=row.get("subject") or "")


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window of local time in which nothing is sent; it may wrap midnight (22:00-09:00)."""

    start: time
    end: time

    @classmethod
    def parse(cls, text: str) -> QuietHours | None:
        """A window like 22:00-09:00 ("off" or "" for none); a malformed one raises InvalidInput naming the expected form."""
        if text.strip().lower() in ("", "off", "none"):
            return None
        try:
            start, end = (time.fromisoformat(part.strip()) for part in text.split("-"))
        except ValueError:
            raise InvalidInput(
                f"quiet hours look like 22:00-09:00 (or off), not {text!r}"
            ) from None
        return cls(start, end)

    def contains(self, local: datetime) -> bool:
        now = local.time().replace(tzinfo=None)
        if self.start <= self.end:
            return self.start <= now < self.end
        return now >= self.start or now < self.end


def due_at(memory: Memory, zone: tzinfo) -> float | None:
    """When to follow up on a fact, in the person's zone; None for a fact with no date of its own or of another kind.

    An event: the day after its date. A todo: on its due date (valid_to, else its date). A goal: on its date.
    The store fills valid_from with the moment of writing when the words named no date, so a valid_from equal to
    created_at is no date. A date is a calendar day (stored as its UTC midnight); the follow-up is due at the
    start of that day in the person's zone, and quiet hours then hold it until their morning.
    """
    named = named_day(memory)
    if named is None:
        return None
    day = named + timedelta(days=1 if memory.kind is FactKind.EVENT else 0)
    return datetime.combine(day, time(0), tzinfo=zone).timestamp()


def named_day(memory: Memory) -> date | None:
    """The calendar day a goal, todo or event names (a todo's due date first), or None when it names none."""
    if memory.kind not in FOLLOWED_KINDS:
        return None
    named = (
        memory.valid_to if memory.kind is FactKind.TODO and memory.valid_to else memory.valid_from
    )
    if named is None or (named == memory.valid_from and memory.valid_from == memory.created_at):
        return None
    return datetime.fromtimestamp(named, UTC).date()


class CheckinStore:
    """Owner of ``checkin_people`` and ``checkins``."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    # -- a person's choice --------------------------------------------------------------------------------
    def opt_in(self, person_id: str, where: Destination) -> None:
        """Check-ins on, reaching the person in this DM (asked again elsewhere, the newer DM wins)."""
        self.db.execute(
            "INSERT INTO checkin_people (person_id, platform, channel_id, platform_user_id, enabled_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (person_id) DO UPDATE SET platform = excluded.platform, channel_id = excluded.channel_id, "
            "platform_user_id = excluded.platform_user_id",
            (person_id, where.platform, where.channel_id, where.platform_user_id, self.clock.now()),
        )

    def opt_out(self, person_id: str) -> int:
        """Check-ins off: what was pending is dropped (planned afresh if they opt in again); returns how many."""
        with self.db.transaction():
            self.db.execute("DELETE FROM checkin_people WHERE person_id = ?", (person_id,))
            self.db.execute(
                "DELETE FROM checkins WHERE person_id = ? AND state = 'pending'", (person_id,)
            )
            return int(self.db.con.changes())

    def destination(self, person_id: str) -> Destination | None:
        row = self.db.one(
            "SELECT platform, channel_id, platform_user_id FROM checkin_people WHERE person_id = ?",
            (person_id,),
        )
        return Destination(**row) if row else None

    def people(self) -> list[tuple[str, Destination]]:
        rows = self.db.rows(
            "SELECT person_id, platform, channel_id, platform_user_id FROM checkin_people ORDER BY person_id"
        )
        return [(r.pop("person_id"), Destination(**r)) for r in rows]

    # -- planning -----------------------------------------------------------------------------------------
    def plan(self, person_id: str, memories: list[Memory], zone: tzinfo) -> int:
        """A pending row for each dated fact whose follow-up falls after it was said and is not stale yet; a fact
        planned once is never planned again (UNIQUE), whatever became of its row. Returns the rows added."""
        now = self.clock.now()
        planned = [
            (m, at)
            for m in memories
            if (at := due_at(m, zone)) is not None and at > m.created_at and at + STALE_AFTER > now
        ]
        added = 0
        with self.db.transaction():
            for memory, at in planned:
                self.db.execute(
                    "INSERT INTO checkins (person_id, memory_id, kind, due_at, created_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (person_id, memory_id) DO NOTHING",
                    (person_id, memory.id, memory.kind.value, at, now),
                )
                added += self.db.con.changes()
        return added

    # -- sending ------------------------------------------------------------------------------------------
    def due(self, now: float) -> list[Checkin]:
        """Pending rows of opted-in people whose moment has come and whose retry wait is over; stale ones expire first."""
        self.db.execute(
            "UPDATE checkins SET state = 'expired' WHERE state = 'pending' AND due_at + ? <= ?",
            (STALE_AFTER, now),
        )
        ready = (
            "c.state = 'pending' AND c.due_at <= ? AND c.retry_at <= ? AND p.person_id IS NOT NULL"
        )
        rows = self.db.rows(f"{_SELECT} WHERE {ready} ORDER BY c.due_at, c.id", (now, now))
        return [Checkin.from_row(r) for r in rows]

    def is_due(self, checkin_id: int, now: float) -> bool:
        """Whether the row is still pending and due (another process may have claimed or postponed it)."""
        row = self.db.one(
            "SELECT 1 AS due FROM checkins WHERE id = ? AND state = 'pending' AND due_at <= ? AND retry_at <= ?",
            (checkin_id, now, now),
        )
        return row is not None

    def sent_this_week(self, person_id: str, now: float) -> int:
        """Check-ins claimed for the person in the last seven days: one whose sending began counts, sent or not."""
        return int(
            self.db.scalar(
                "SELECT COUNT(*) FROM checkins WHERE person_id = ? AND state IN ('sending', 'sent') AND claimed_at > ?",
                (person_id, now - WEEK),
            )
        )

    def claim(self, checkin_id: int) -> bool:
        """pending -> sending, committed before the message leaves; False when the row is no longer pending."""
        now = self.clock.now()
        self.db.execute(
            "UPDATE checkins SET state = 'sending', claimed_at = ? WHERE id = ? AND state = 'pending'",
            (now, checkin_id),
        )
        return self.db.con.changes() == 1

    def sent(self, checkin_id: int, message_id: str | None) -> None:
        now = self.clock.now()
        self.db.execute(
            "UPDATE checkins SET state = 'sent', sent_at = ?, message_id = ? WHERE id = ?",
            (now, message_id, checkin_id),
        )

    def postpone(self, checkin_id: int) -> str:
        """The model failed or answered garbage: tried again later, a bounded number of times; returns the new state."""
        now = self.clock.now()
        self.db.execute(
            "UPDATE checkins SET attempts = attempts + 1, retry_at = ? + ? * (attempts + 1), "
            "state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE state END WHERE id = ? AND state = 'pending'",
            (now, RETRY_AFTER, MAX_ATTEMPTS, checkin_id),
        )
        return str(self.db.scalar("SELECT state FROM checkins WHERE id = ?", (checkin_id,)))

    def finish(self, checkin_id: int, state: str) -> None:
        """'failed' (the platform refused a claimed row) or 'cancelled' (its memory is no longer live)."""
        if state not in ("failed", "cancelled"):
            raise InvalidInput(f"a check-in cannot be finished as {state!r}")
        self.db.execute("UPDATE checkins SET state = ? WHERE id = ?", (state, checkin_id))

    # -- reading ------------------------------------------------------------------------------------------
    def listing(self, person_id: str | None = None, states: tuple[str, ...] = ()) -> list[Checkin]:
        """Rows with their memory's subject, soonest due first (``companion checkins list``, ``/checkins``)."""
        conds, params = ["1 = 1"], []
        if person_id is not None:
            conds.append("c.person_id = ?")
            params.append(person_id)
        if states:
            conds.append(f"c.state IN ({placeholders(states)})")
            params.extend(states)
        return [
            Checkin.from_row(r)
            for r in self.db.rows(
                f"{_SELECT} WHERE {' AND '.join(conds)} ORDER BY c.due_at, c.id", params
            )
        ]

    def sent_messages(self, memory_ids: list[str]) -> list[str]:
        """The stored ids of the check-ins sent about these memories (forgetting a memory deletes them too)."""
        if not memory_ids:
            return []
        rows = self.db.execute(
            f"SELECT message_id FROM checkins WHERE message_id IS NOT NULL AND memory_id IN ({placeholders(memory_ids)})",
            memory_ids,
        )
        return [m for (m,) in rows]


_SELECT = (
    "SELECT c.*, p.platform, p.channel_id, p.platform_user_id, m.subject FROM checkins AS c "
    "LEFT JOIN checkin_people AS p ON p.person_id = c.person_id LEFT JOIN memories AS m ON m.id = c.memory_id"
)

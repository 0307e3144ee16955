"""Reminders a person asked for (ORCH-13); the one owner of ``reminders``. Sending is the bot's (``bot.reminders.sending``).

    add(new)                        a pending row; returns it (its id and due time are what the bot confirms)
    mine(person) / cancel(person, n) / forget_matching(person, words)   what /reminders and /forget do
    cancel_all(person)              /privacy off: a reminder keeps the person's words
    in_place(place)                 a server's or group's admins: every reminder set there ...
    cancel_in_place(place, id)      ... and any of them cancelled
    setter_left(place)              the setter left or was banned: their reminders there go
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

In a server or group a reminder posts where others read, so there are bounds beyond the person's
50: repeating reminders a member keeps in one place, and posts a day a member and a place
(``_check_room``). Text is stored as ``normalise_text`` leaves it: no control characters, no bidi
overrides or isolates.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Any

from ..clock import Clock
from ..errors import InvalidInput
from ..reminder_time import parse_when
from ..safety import normalise_text
from .audit import AuditTrail
from .db import Database
from .reminder_rows import NewReminder, Reminder, ReminderPlace

__all__ = ["MAX_ATTEMPTS", "NewReminder", "Reminder", "ReminderPlace", "Reminders"]

MAX_ATTEMPTS = 5  # sends the platform refused before the person is told it could not be delivered
RETRY_AFTER = 60.0  # seconds, doubled at each failed attempt (1, 2, 4, 8 minutes)
REPORT_AGAIN_AFTER = 3600.0  # telling the person it failed failed too: tried again this much later
# attempts (sends, then tellings) after which only /reminders shows it
MAX_TELLS = MAX_ATTEMPTS + 24
MAX_TEXT = 500
MAX_PENDING = 50  # per person: a runaway model loop cannot fill the store
# In a server or group (issue 44: one member's 50 daily reminders posted 150 times in three days): a
# person's routine (a pill, a stand-up, a weekly call) fits in 5 repeating reminders a place, more
# belongs in their DM where it disturbs nobody; 10 posts a member a day and 30 a place a day (a bit
# more than one an hour) keep a shared channel a conversation, whoever sets them.
MAX_REPEATING_HERE = 5
MAX_MEMBER_DAY = 10
MAX_PLACE_DAY = 30
DAY_S = 86400.0
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


class Reminders:
    """Owner of ``reminders``: a ``Database`` and the clock it reads."""

    def __init__(self, db: Database, clock: Clock, audit: AuditTrail | None = None) -> None:
        """:param audit: where an admin's cancel of another member's reminder is recorded."""
        self.db, self.clock, self.audit = db, clock, audit

    def ask(
        self, person_id: str, place: ReminderPlace, when: str, what: str, zone: tzinfo
    ) -> Reminder:
        """``what`` at the time ``when`` names in ``zone``: the stored row, or InvalidInput with the question to
        answer (nothing stored). The one way /remind and the reminder_set tool set a reminder."""
        due = parse_when(when, self.clock.now(), zone)
        # a ZoneInfo, or datetime.UTC for a person with no zone
        name = getattr(zone, "key", None) or "UTC"
        return self.add(NewReminder(person_id, place, what, name, due.due_at, due.every, due.local))

    def add(self, new: NewReminder) -> Reminder:
        """Stored, or InvalidInput saying why not: empty, too long, or beyond a bound (checked and
        written in one transaction, so two processes cannot both take the last free place)."""
        text = normalise_text(new.text)  # controls and bidi overrides would be posted as they are
        if not text:
            raise InvalidInput("say what to remind you of")
        if len(text) > MAX_TEXT:
            raise InvalidInput(
                f"a reminder is at most {MAX_TEXT} characters (this one is {len(text)})"
            )
        with self.db.transaction():
            if len(self.mine(new.person_id)) >= MAX_PENDING:
                raise InvalidInput(
                    f"you have {MAX_PENDING} reminders already: "
                    "cancel some with /reminders cancel <n>"
                )
            if not new.place.is_dm:
                _check_room(new, self.in_place(new.place))
            return self._insert(new, text)

    def _insert(self, new: NewReminder, text: str) -> Reminder:
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

    def cancel_all(self, person_id: str) -> int:
        """Every reminder of the person deleted (``/privacy off``: a reminder keeps their words);
        how many."""
        ids = [r.id for r in self.mine(person_id)]
        return self._delete(person_id, ids)

    # -- a server or group: its admins see and cancel every reminder posted there ------------
    def in_place(self, place: ReminderPlace) -> list[Reminder]:
        """The reminders set in ``place``'s server or group (by anyone), soonest first; none for
        a DM."""
        if place.is_dm:
            return []
        where, params = _here(place)
        rows = self.db.rows(f"SELECT * FROM reminders WHERE {where} ORDER BY due_at, id", params)
        return [Reminder.from_row(r) for r in rows]

    def cancel_in_place(self, place: ReminderPlace, reminder_id: int, *, admin: str) -> bool:
        """An admin's cancel of any reminder set in the place (deleted, words scrubbed, an audit
        row naming ids only); False when it is not one of the place's."""
        where, params = _here(place)
        with self.db.transaction():
            gone = self.db.rows(
                f"DELETE FROM reminders WHERE id = ? AND {where} RETURNING person_id",
                (reminder_id, *params),
            )
            if gone and self.audit is not None:
                key = place.guild_id or f"{place.platform}:{place.channel_id}"
                setter, detail = gone[0]["person_id"], {"reminder_id": reminder_id}
                self.audit.record(admin, "reminder.cancel", key, person_id=setter, detail=detail)
        if gone:
            self.db.scrub()
        return bool(gone)

    def setter_left(self, place: ReminderPlace) -> int:
        """The account ``place.platform_user_id`` left the server or group (or was banned): its
        reminders there are deleted, words scrubbed; how many."""
        where, params = _here(place)
        gone = self.db.rows(
            f"DELETE FROM reminders WHERE platform_user_id = ? AND {where} RETURNING id",
            (place.platform_user_id, *params),
        )
        if gone:
            self.db.scrub()
        return len(gone)

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


def _here(place: ReminderPlace) -> tuple[str, tuple[Any, ...]]:
    """The SQL condition for the rows of ``place``'s server or group (its chat without a key)."""
    if place.guild_id:
        return "is_dm = 0 AND guild_id = ?", (place.guild_id,)
    return "is_dm = 0 AND guild_id IS NULL AND platform = ? AND channel_id = ?", (
        place.platform,
        place.channel_id,
    )


def _check_room(new: NewReminder, here: list[Reminder]) -> None:
    """InvalidInput when one more reminder in this server or group passes a bound
    (``MAX_REPEATING_HERE``, ``MAX_MEMBER_DAY``, ``MAX_PLACE_DAY``). A day's posts near the new
    one's time: every repeating reminder (at most one post a day each, a weekly one counted as
    daily) and the one-offs due within 24 hours either side, so no 24 hours holding the new one
    hold more than the bound."""
    own = [r for r in here if r.person_id == new.person_id]
    if new.every and sum(1 for r in own if r.every) >= MAX_REPEATING_HERE:
        raise InvalidInput(
            f"you have {MAX_REPEATING_HERE} repeating reminders in this server or group already "
            "(the most one member may have in one place): cancel one with /reminders cancel <n>, "
            "or set it in our private chat"
        )
    if _day_load(own, new.due_at) >= MAX_MEMBER_DAY:
        raise InvalidInput(
            f"that would be more than {MAX_MEMBER_DAY} of your reminders posted here within a day "
            "(the most for one member in one place): pick another day, or set it in our "
            "private chat"
        )
    if _day_load(here, new.due_at) >= MAX_PLACE_DAY:
        raise InvalidInput(
            f"this server or group has {MAX_PLACE_DAY} reminders posting within a day of that time "
            "already (the most I post in one place a day): pick another day, or set it in our "
            "private chat"
        )


def _day_load(rows: list[Reminder], due_at: float) -> int:
    return sum(1 for r in rows if r.every or abs(r.due_at - due_at) < DAY_S)

"""Per-account sliding windows of replies (OPS-5), kept in the store so every process of a bot shares them (SCALE-1).

Each person (their person id: linked accounts are one person; an unlinked account's id is "platform:user id") has
one ``rate_windows`` row (its ``account`` column): the times of its replies still inside the window
and whether it was already told to slow down. ``admit`` reads and writes that row in one transaction, and its
first statement is a write to the row, so two processes deciding for the same account at once take turns (the
row lock on PostgreSQL, the write lock that ``transaction`` takes first on SQLite) instead of both counting the
same free slot. Times are wall-clock (``time.time``): a monotonic clock means nothing in another process.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Database
    from .people import People


class RateWindows:
    def __init__(self, db: Database, people: People) -> None:
        self.db, self.people = db, people

    def admit_person(
        self, platform: str, user_id: str, limit: int, window_s: float, now: float
    ) -> bool | None:
        """``admit`` for the person behind an account: linked accounts share one window (issue 31: two linked
        accounts got twice the replies). An account never seen is its own person until it is linked."""
        return self.admit(self.people.lookup(platform, user_id), limit, window_s, now)

    def admit(self, account: str, limit: int, window_s: float, now: float) -> bool | None:
        """True: under ``limit`` replies in the last ``window_s`` seconds (counted now); False: over it, say so once;
        None: over it and already told."""
        # not durable: a crash that loses the last few reply times lets someone send a few more; a commit that waits
        # for the disk costs each reply ~5 ms on PostgreSQL (measured on this machine)
        with self.db.transaction(durable=False):
            self.db.execute("INSERT OR IGNORE INTO rate_windows (account) VALUES (?)", (account,))
            # holds the row
            self.db.execute("UPDATE rate_windows SET last_at = ? WHERE account = ?", (now, account))
            row = self.db.one("SELECT hits, told FROM rate_windows WHERE account = ?", (account,))
            assert row is not None  # inserted above in this transaction
            hits = [t for t in json.loads(row["hits"]) if t > now - window_s]
            verdict: bool | None = True
            if len(hits) < limit:
                hits.append(now)
            else:
                verdict = None if row["told"] else False
            told = verdict is not True
            self.db.execute(
                "UPDATE rate_windows SET hits = ?, told = ? WHERE account = ?",
                (json.dumps(hits), int(told), account),
            )
        return verdict

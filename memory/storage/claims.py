"""Claims on background jobs, so several processes on one store run each job once (SCALE-1); owner of ``job_claims``.

A job has a key it can name before it reads anything ("extract:<chat>", "daily:<chat>:<day>", "checkin:<id>").
A process takes the key's claim for ``lease_s`` seconds before the job gathers, renews it while the model
writes, and releases it inside the job's last write transaction::

    claim(key, holder, lease_s)    True: the job is this holder's now (no claim, an expired one, or its own)
    renew(key, holder, lease_s)    True: still this holder's, held for another ``lease_s``
    release(key, holder)           in the job's write transaction: done, and the claim goes with it

A holder that dies mid-job never releases: its claim expires and the next taker redoes the job once (the redo
dedups what the first may have written; nothing was written, as the write and the release commit together).
A live claim is never taken: the claim is one statement (an upsert whose update only fires on an expired or
own claim), atomic on both engines; on PostgreSQL a second taker waits on the row lock and then sees the new
lease, on SQLite the write lock orders them.

Times are the engine's clock, so every process must keep time (NTP); a lease is minutes long, so a clock a
second off only shortens or lengthens it by that second.
"""

from __future__ import annotations

import functools
import os
import secrets
import socket

from ..clock import Clock
from .db import Database

STALE_S = 86_400.0  # an abandoned claim (its job is no longer due anywhere) is swept a day after it expired


@functools.cache
def process_holder() -> str:
    """This process's holder id, the same for its whole life: host, process id, and a random part (a reused pid)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class JobClaims:
    """The ``job_claims`` table: who is doing which background job, until when."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def claim(self, key: str, holder: str, lease_s: float) -> bool:
        """Take ``key`` for ``lease_s`` seconds: True when it was free, expired, or already ``holder``'s."""
        now = self.clock.now()
        taken = self.db.rows(
            "INSERT INTO job_claims (key, holder, lease_until, attempts, claimed_at) VALUES (?, ?, ?, 1, ?) "
            "ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until, "
            "attempts = CASE WHEN job_claims.holder = excluded.holder THEN job_claims.attempts ELSE job_claims.attempts + 1 END, "
            "claimed_at = excluded.claimed_at "
            "WHERE job_claims.lease_until < ? OR job_claims.holder = excluded.holder RETURNING key",
            (key, holder, now + lease_s, now, now),
        )
        return bool(taken)

    def renew(self, key: str, holder: str, lease_s: float) -> bool:
        """Extend ``holder``'s claim: False when it is no longer theirs (it expired and another process took it)."""
        until = self.clock.now() + lease_s
        return bool(
            self.db.rows(
                "UPDATE job_claims SET lease_until = ? WHERE key = ? AND holder = ? RETURNING key",
                (until, key, holder),
            )
        )

    def release(self, key: str, holder: str) -> bool:
        """The job is done (call it in the job's write transaction): False when the claim was not ``holder``'s."""
        released = bool(
            self.db.rows(
                "DELETE FROM job_claims WHERE key = ? AND holder = ? RETURNING key", (key, holder)
            )
        )
        # claims whose holder died and whose job no other process took up again (no longer due) go a day later
        self.db.execute(
            "DELETE FROM job_claims WHERE lease_until < ?", (self.clock.now() - STALE_S,)
        )
        return released

    def holder_of(self, key: str) -> tuple[str, float, int] | None:
        """(holder, lease_until, attempts) of the claim on ``key``, or None: what ``companion stats`` and tests read."""
        row = self.db.one(
            "SELECT holder, lease_until, attempts FROM job_claims WHERE key = ?", (key,)
        )
        return (row["holder"], row["lease_until"], row["attempts"]) if row else None

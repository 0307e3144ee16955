"""Conversation bookkeeping kept in the store: the extraction buffer (WRITE-1), per-channel state for
micro-reflection and compaction (WRITE-3/4, ORCH-4), and persisted session summaries (CROSS-1)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..models import JsonObject, SessionSummary
from ..safety import redact_secrets
from ..scopes import RecallContext, placeholders
from .db import Database
from .messages import MessageLog


def context_to_json(ctx: RecallContext) -> str:
    return json.dumps(ctx.to_dict())


def context_from_json(text: str) -> RecallContext:
    return RecallContext.from_dict(json.loads(text))


MAX_ATTEMPTS = 5  # failed extraction attempts before a batch is parked in dead_letters
BACKOFF_S = 60.0  # first retry after a failure; doubles with each attempt (1, 2, 4, 8 minutes)


def backoff(attempts: int) -> float:
    return BACKOFF_S * 2 ** max(0, attempts - 1)


@dataclass(frozen=True, slots=True)
class Buffered:
    id: int
    ctx: RecallContext
    message_id: str | None  # the stored message's own id (``messages.id``)
    author_name: str
    text: str
    created_at: float
    attempts: int = 0


class ExtractionBuffer:
    """User messages waiting for extraction, per channel; due 30 s after the channel's last message.

    A message is pushed *held* before its reply is made (write-ahead) and released when the reply is
    done, so extraction never reads a turn whose "forget that ..." is still being carried out; a
    restart releases everything (no reply survives a restart). A batch whose extraction fails is
    retried with backoff; after ``MAX_ATTEMPTS`` it moves to ``dead_letters``, never dropped.
    """

    def __init__(
        self, db: Database, clock: Clock, messages: MessageLog, debounce_s: float = 30.0
    ) -> None:
        self.db, self.clock, self.messages, self.debounce_s = db, clock, messages, debounce_s

    def push(
        self,
        channel_key: str,
        ctx: RecallContext,
        text: str,
        *,
        author_name: str = "",
        message_id: str | None = None,
        held: bool = False,
        said_at: float | None = None,
        wait_s: float = 0.0,
    ) -> int:
        """Add a message and push the whole channel's due time back (debounce by reschedule).
        ``said_at``: when the message was written, if not now (an edit of an older message): its
        relative dates are read against it. ``wait_s``: the least time before it is due, if longer
        than the debounce (an edit settling)."""
        now = self.clock.now()
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO extraction_buffer (channel_key, person_id, context, message_id, message_rid, author_name, text, "
                "created_at, due_at, held) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    channel_key,
                    ctx.speaker_id,
                    context_to_json(ctx),
                    message_id,
                    self._rid(message_id),
                    author_name,
                    text,
                    now if said_at is None else said_at,
                    now + max(self.debounce_s, wait_s),
                    int(held),
                ),
            )
            row_id = int(self.db.con.last_insert_rowid())
            self._debounce(channel_key)
        return row_id

    def _rid(self, message_id: str | None) -> int | None:
        found = self.messages.rids_by_id([message_id]) if message_id else []
        return found[0] if found else None

    def release(self, row_id: int) -> None:
        """The reply is done: the message may be extracted once the channel is quiet."""
        with self.db.transaction():
            self.db.execute("UPDATE extraction_buffer SET held = 0 WHERE id = ?", (row_id,))
            key = self.db.scalar(
                "SELECT channel_key FROM extraction_buffer WHERE id = ?", (row_id,)
            )
            if key:
                self._debounce(key)

    def release_all(self) -> int:
        """At start-up: no reply is in flight, so nothing is held any more (a crash mid-reply left some)."""
        with self.db.transaction():
            self.db.execute(
                "UPDATE extraction_buffer SET held = 0, due_at = MIN(due_at, ?) WHERE held = 1 OR attempts > 0",
                (self.clock.now(),),
            )
            return self.db.con.changes()

    def expedite(self, channel_key: str) -> int:
        """The channel's released messages are due now, not after the debounce (a voice session ended, or its
        turns are about to be compacted: WRITE-4). Held ones wait for their reply as always."""
        self.db.execute(
            "UPDATE extraction_buffer SET due_at = MIN(due_at, ?) WHERE channel_key = ? AND held = 0 AND attempts = 0",
            (self.clock.now(), channel_key),
        )
        return self.db.con.changes()

    def _debounce(self, channel_key: str) -> None:
        due = self.clock.now() + self.debounce_s
        self.db.execute(
            "UPDATE extraction_buffer SET due_at = MAX(due_at, ?) WHERE channel_key = ? AND attempts = 0",
            (due, channel_key),
        )

    def due_channels(self) -> list[str]:
        rows = self.db.execute(
            "SELECT channel_key FROM extraction_buffer GROUP BY channel_key HAVING MAX(held) = 0 AND MAX(due_at) <= ?",
            (self.clock.now(),),
        )
        return [r for (r,) in rows]

    def channels(self) -> list[str]:
        """Every channel with something buffered and not held, due or not (for a graceful shutdown)."""
        return [
            r
            for (r,) in self.db.execute(
                "SELECT DISTINCT channel_key FROM extraction_buffer WHERE held = 0"
            )
        ]

    def fail(self, ids: list[int], error: str) -> int:
        """A failed attempt: retried after a backoff; past ``MAX_ATTEMPTS`` parked in dead_letters. Returns how many were parked."""
        if not ids:
            return 0
        marks, now = placeholders(ids), self.clock.now()
        attempts = (
            int(
                self.db.scalar(
                    f"SELECT MAX(attempts) FROM extraction_buffer WHERE id IN ({marks})", ids
                )
                or 0
            )
            + 1
        )
        with self.db.transaction():
            self.db.execute(
                f"UPDATE extraction_buffer SET attempts = ?, last_error = ?, due_at = ? WHERE id IN ({marks})",
                (attempts, error[:500], now + backoff(attempts), *ids),
            )
            if attempts < MAX_ATTEMPTS:
                return 0
            self.db.execute(
                "INSERT INTO dead_letters (job, channel_key, person_id, context, message_id, message_rid, author_name, text, created_at, "
                f"attempts, error, failed_at) SELECT 'extraction', channel_key, person_id, context, message_id, message_rid, author_name, "
                f"text, created_at, attempts, COALESCE(last_error, ''), ? FROM extraction_buffer WHERE id IN ({marks})",
                (now, *ids),
            )
            self.done(ids)
        return len(ids)

    def dead(self) -> list[dict[str, Any]]:
        return self.db.rows(
            "SELECT id, job, channel_key, person_id, attempts, error, failed_at FROM dead_letters ORDER BY id"
        )

    def dead_count(self) -> int:
        """How many batches are parked (the health endpoint's gauge)."""
        return int(self.db.scalar("SELECT COUNT(*) FROM dead_letters"))

    def retry_dead(self) -> int:
        """An operator's retry: parked batches go back to the buffer, due now, with a fresh attempt count."""
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO extraction_buffer (channel_key, person_id, context, message_id, message_rid, author_name, text, created_at, "
                "due_at) SELECT channel_key, person_id, context, message_id, message_rid, author_name, text, created_at, ? "
                "FROM dead_letters",
                (self.clock.now(),),
            )
            moved = self.db.con.changes()
            self.db.execute("DELETE FROM dead_letters")
        return moved

    def next_due(self) -> float | None:
        return self.db.scalar("SELECT MIN(due_at) FROM extraction_buffer WHERE held = 0")

    def take(self, channel_key: str) -> list[Buffered]:
        """The channel's buffered messages, oldest first (they stay until ``done`` is called)."""
        rows = self.db.rows(
            "SELECT * FROM extraction_buffer WHERE channel_key = ? AND held = 0 ORDER BY id",
            (channel_key,),
        )
        return [
            Buffered(
                r["id"],
                context_from_json(r["context"]),
                r["message_id"],
                r["author_name"],
                r["text"],
                r["created_at"],
                r["attempts"],
            )
            for r in rows
        ]

    def done(self, ids: list[int]) -> None:
        if ids:
            self.db.execute(f"DELETE FROM extraction_buffer WHERE id IN ({placeholders(ids)})", ids)

    def still_to_read(self) -> tuple[set[int], set[str]]:
        """The stored messages (rids, ids) a buffered or parked extraction will still read (SEC-7: not yet expired)."""
        rows = self.db.execute(
            "SELECT message_rid, message_id FROM extraction_buffer UNION SELECT message_rid, message_id FROM dead_letters"
        )
        found = list(rows)
        return {r for r, _ in found if r is not None}, {i for _, i in found if i}

    def drop_messages(self, rids: list[int]) -> int:
        """Buffered and parked copies of these stored messages (their text changed or was deleted at the source)."""
        if not rids:
            return 0
        marks = placeholders(rids)
        with self.db.transaction():
            self.db.execute(f"DELETE FROM extraction_buffer WHERE message_rid IN ({marks})", rids)
            dropped = self.db.con.changes()
            self.db.execute(f"DELETE FROM dead_letters WHERE message_rid IN ({marks})", rids)
        return dropped + self.db.con.changes()

    def pending(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM extraction_buffer"))

    def drop_person(self, person_id: str) -> int:
        """Someone asked not to be remembered (SEC-5): their words waiting for extraction are not learned from."""
        return self._drop("person_id = ?", person_id)

    def drop_place(self, guild_id: str) -> int:
        """A server asked not to be remembered (SEC-5): nothing said there and still waiting is learned from."""
        return self._drop("json_extract(context, '$.guild_id') = ?", guild_id)

    def _drop(self, condition: str, value: str) -> int:
        with self.db.transaction():
            self.db.execute(f"DELETE FROM extraction_buffer WHERE {condition}", (value,))
            dropped = self.db.con.changes()
            self.db.execute(f"DELETE FROM dead_letters WHERE {condition}", (value,))
        return dropped + self.db.con.changes()

    def move_person(self, source: str, target: str) -> None:
        """Linking: buffered and parked messages of ``source`` (and the contexts saved with them) become ``target``'s."""
        for table in ("extraction_buffer", "dead_letters"):
            self.db.execute(
                f"UPDATE {table} SET person_id = ?, context = json_set(context, '$.speaker_id', ?) WHERE person_id = ?",
                (target, target, source),
            )


@dataclass(frozen=True, slots=True)
class ChannelRecord:
    """One chat's state: when it last spoke, its session, whether that was reflected on, its rolling summary."""

    channel_key: str
    ctx: RecallContext
    last_message_at: float
    session_started_at: float
    reflected_at: float | None
    compacted_until: float
    rolling_summary: str
    failures: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ChannelRecord:
        return cls(
            row["channel_key"],
            context_from_json(row["context"]),
            row["last_message_at"],
            row["session_started_at"],
            row["reflected_at"],
            row["compacted_until"],
            row["rolling_summary"],
            row["failures"],
        )


class ChannelState:
    """When a channel last spoke, whether its session was reflected on, and its rolling summary."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def touch(self, channel_key: str, ctx: RecallContext) -> None:
        now = self.clock.now()
        self.db.execute(
            "INSERT INTO channel_state (channel_key, context, last_message_at, session_started_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (channel_key) DO UPDATE SET context = excluded.context, last_message_at = excluded.last_message_at, "
            "session_started_at = CASE WHEN channel_state.reflected_at IS NOT NULL AND channel_state.reflected_at >= "
            "channel_state.last_message_at "
            "THEN excluded.session_started_at ELSE channel_state.session_started_at END, "
            "reflected_at = CASE WHEN channel_state.reflected_at >= channel_state.last_message_at THEN NULL ELSE "
            "channel_state.reflected_at END",
            (channel_key, context_to_json(ctx), now, now),
        )

    def silent(self, silence_s: float) -> list[ChannelRecord]:
        """Channels quiet for ``silence_s`` whose session has not been reflected on yet."""
        cutoff = self.clock.now() - silence_s
        rows = self.db.rows(
            "SELECT * FROM channel_state WHERE last_message_at <= ? AND reflected_at IS NULL AND retry_at <= ?",
            (cutoff, self.clock.now()),
        )
        return [ChannelRecord.from_row(r) for r in rows]

    def active(self, since: float) -> list[ChannelRecord]:
        """Channels that spoke after ``since``."""
        rows = self.db.rows(
            "SELECT * FROM channel_state WHERE last_message_at > ? AND retry_at <= ?",
            (since, self.clock.now()),
        )
        return [ChannelRecord.from_row(r) for r in rows]

    def failed(self, channel_key: str) -> None:
        """A reflection or compaction of this chat failed: back off before the next try (other chats go on)."""
        self.db.execute(
            "UPDATE channel_state SET failures = failures + 1, retry_at = ? + ? * (1 << CAST(MIN(failures, 6) AS INTEGER)) "
            "WHERE channel_key = ?",  # PostgreSQL shifts an integer by an integer only
            (self.clock.now(), BACKOFF_S, channel_key),
        )

    def succeeded(self, channel_key: str) -> None:
        self.db.execute(
            "UPDATE channel_state SET failures = 0, retry_at = 0 WHERE channel_key = ? AND failures > 0",
            (channel_key,),
        )

    def dm_channel(self, platform: str, person_id: str) -> str | None:
        """The channel of the person's latest DM with the bot on ``platform`` (a Discord DM's id is not the user's)."""
        found = self.db.scalar(
            "SELECT json_extract(context, '$.channel_id') FROM channel_state WHERE json_extract(context, '$.platform') = ? "
            "AND json_extract(context, '$.speaker_id') = ? AND json_extract(context, '$.is_dm') ORDER BY last_message_at DESC LIMIT 1",
            (platform, person_id),
        )
        return None if found is None else str(found)

    def get(self, channel_key: str) -> ChannelRecord | None:
        row = self.db.one("SELECT * FROM channel_state WHERE channel_key = ?", (channel_key,))
        return ChannelRecord.from_row(row) if row else None

    def move_person(self, source: str, target: str) -> None:
        """Linking: saved contexts that name ``source`` as the speaker name ``target``."""
        self.db.execute(
            "UPDATE channel_state SET context = json_set(context, '$.speaker_id', ?) WHERE json_extract(context, '$.speaker_id') = ?",
            (target, source),
        )

    def forget_summaries(self, channel_keys: list[str]) -> None:
        """The rolling summaries of these chats go; their turns are compacted afresh (the turns stay)."""
        self.db.execute(
            f"UPDATE channel_state SET rolling_summary = '', compacted_until = 0 WHERE channel_key IN ({placeholders(channel_keys)})",
            channel_keys,
        )

    def mark_reflected(self, channel_key: str) -> None:
        self.db.execute(
            "UPDATE channel_state SET reflected_at = ? WHERE channel_key = ?",
            (self.clock.now(), channel_key),
        )

    def set_summary(self, channel_key: str, summary: str, compacted_until: float) -> None:
        self.db.execute(
            "UPDATE channel_state SET rolling_summary = ?, compacted_until = ? WHERE channel_key = ?",
            (redact_secrets(summary), compacted_until, channel_key),
        )


class SessionSummaries:
    """Summaries of ended sessions (voice or text), shown to later replies in the same place for a while."""

    def __init__(self, db: Database, clock: Clock, ttl_s: float = 86_400.0) -> None:
        self.db, self.clock, self.ttl_s = db, clock, ttl_s

    def add(
        self,
        *,
        platform: str,
        guild_id: str | None,
        channel_id: str,
        participants: list[str],
        text: str,
        modality: str = "text",
        started_at: float | None = None,
    ) -> int:
        now = self.clock.now()
        self.db.execute(
            "INSERT INTO session_summaries (platform, guild_id, channel_id, modality, participants, text, started_at, "
            "ended_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                platform,
                guild_id,
                channel_id,
                modality,
                json.dumps(participants),
                redact_secrets(text),
                started_at,
                now,
                now + self.ttl_s,
            ),
        )
        return int(self.db.con.last_insert_rowid())

    def recent(self, ctx: RecallContext, within_s: float, limit: int = 3) -> list[SessionSummary]:
        """Unexpired summaries that ended within the window, in this guild (any channel) or this DM."""
        now = self.clock.now()
        place = (
            ("guild_id = ?", ctx.guild_id)
            if ctx.guild_id
            else ("guild_id IS NULL AND channel_id = ?", ctx.channel_id)
        )
        rows = self.db.rows(
            f"SELECT * FROM session_summaries WHERE platform = ? AND {place[0]} AND ended_at >= ? AND expires_at > ? "
            "ORDER BY ended_at DESC LIMIT ?",
            (ctx.platform, place[1], now - within_s, now, limit),
        )
        return [SessionSummary.from_row(r) for r in rows]

    def forget_chats(self, channel_keys: list[str]) -> None:
        """Drop the summaries of these "platform:channel" chats (they may repeat something forgotten)."""
        marks = placeholders(channel_keys)
        self.db.execute(
            f"DELETE FROM session_summaries WHERE (platform || ':' || channel_id) IN ({marks})",
            channel_keys,
        )

    def restore(self, row: JsonObject) -> int:
        """A summary from an export, as it was (same times); one already here is not added twice (0 then)."""
        if self.db.scalar(
            "SELECT 1 FROM session_summaries WHERE platform = ? AND channel_id = ? AND ended_at = ? AND text = ?",
            (row["platform"], str(row["channel_id"]), float(row["ended_at"]), str(row["text"])),
        ):
            return 0
        self.db.execute(
            "INSERT INTO session_summaries (platform, guild_id, channel_id, modality, participants, text, started_at, "
            "ended_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["platform"],
                row.get("guild_id"),
                str(row["channel_id"]),
                row.get("modality", "text"),
                json.dumps(list(row.get("participants") or [])),
                str(row["text"]),
                row.get("started_at"),
                float(row["ended_at"]),
                float(row["expires_at"]),
            ),
        )
        return int(self.db.con.last_insert_rowid())

    def expire(self) -> int:
        """Delete summaries past their lifetime (run by the background tick, not on the reply path)."""
        self.db.execute("DELETE FROM session_summaries WHERE expires_at <= ?", (self.clock.now(),))
        return self.db.con.changes()

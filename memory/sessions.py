"""Conversation bookkeeping kept in the store: the extraction buffer (WRITE-1), per-channel state for
micro-reflection and compaction (WRITE-3/4, ORCH-4), and persisted session summaries (CROSS-1)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .engine import MemoryEngine
from .scopes import RecallContext


def context_to_json(ctx: RecallContext) -> str:
    return json.dumps({name: getattr(ctx, name) for name in ctx.__slots__})


def context_from_json(text: str) -> RecallContext:
    data = json.loads(text)
    data["participants"] = tuple(data.get("participants") or ())
    return RecallContext(**data)


@dataclass(frozen=True, slots=True)
class Buffered:
    id: int
    ctx: RecallContext
    message_id: str | None
    author_name: str
    text: str
    created_at: float


class ExtractionBuffer:
    """User messages waiting for extraction, per channel; due 30 s after the channel's last message."""

    def __init__(self, engine: MemoryEngine, debounce_s: float = 30.0) -> None:
        self.engine, self.db, self.debounce_s = engine, engine.db, debounce_s

    def push(self, channel_key: str, ctx: RecallContext, text: str, *, author_name: str = "", message_id: str | None = None) -> None:
        """Add a message and push the whole channel's due time back (debounce by reschedule)."""
        now = self.engine.clock.now()
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO extraction_buffer (channel_key, person_id, context, message_id, author_name, text, created_at, due_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (channel_key, ctx.speaker_id, context_to_json(ctx), message_id, author_name, text, now, now + self.debounce_s))
            self.db.execute("UPDATE extraction_buffer SET due_at = ? WHERE channel_key = ?", (now + self.debounce_s, channel_key))

    def due_channels(self) -> list[str]:
        rows = self.db.execute("SELECT DISTINCT channel_key FROM extraction_buffer WHERE due_at <= ?", (self.engine.clock.now(),))
        return [r for (r,) in rows]

    def channels(self) -> list[str]:
        """Every channel with something buffered, due or not (for a graceful shutdown)."""
        return [r for (r,) in self.db.execute("SELECT DISTINCT channel_key FROM extraction_buffer")]

    def postpone(self, ids: list[int], until: float) -> None:
        if ids:
            self.db.execute(f"UPDATE extraction_buffer SET due_at = ? WHERE id IN ({','.join('?' * len(ids))})", (until, *ids))

    def next_due(self) -> float | None:
        return self.db.scalar("SELECT MIN(due_at) FROM extraction_buffer")

    def take(self, channel_key: str) -> list[Buffered]:
        """The channel's buffered messages, oldest first (they stay until ``done`` is called)."""
        rows = self.db.rows("SELECT * FROM extraction_buffer WHERE channel_key = ? ORDER BY id", (channel_key,))
        return [Buffered(r["id"], context_from_json(r["context"]), r["message_id"], r["author_name"], r["text"], r["created_at"]) for r in rows]

    def done(self, ids: list[int]) -> None:
        if ids:
            self.db.execute(f"DELETE FROM extraction_buffer WHERE id IN ({','.join('?' * len(ids))})", ids)

    def pending(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM extraction_buffer"))


class ChannelState:
    """When a channel last spoke, whether its session was reflected on, and its rolling summary."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine, self.db = engine, engine.db

    def touch(self, channel_key: str, ctx: RecallContext) -> None:
        now = self.engine.clock.now()
        self.db.execute(
            "INSERT INTO channel_state (channel_key, context, last_message_at, session_started_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (channel_key) DO UPDATE SET context = excluded.context, last_message_at = excluded.last_message_at, "
            "session_started_at = CASE WHEN channel_state.reflected_at IS NOT NULL AND channel_state.reflected_at >= channel_state.last_message_at "
            "THEN excluded.session_started_at ELSE channel_state.session_started_at END, "
            "reflected_at = CASE WHEN channel_state.reflected_at >= channel_state.last_message_at THEN NULL ELSE channel_state.reflected_at END",
            (channel_key, context_to_json(ctx), now, now))

    def silent(self, silence_s: float) -> list[dict[str, Any]]:
        """Channels quiet for ``silence_s`` whose session has not been reflected on yet."""
        cutoff = self.engine.clock.now() - silence_s
        return self.db.rows("SELECT * FROM channel_state WHERE last_message_at <= ? AND reflected_at IS NULL", (cutoff,))

    def active(self, since: float) -> list[dict[str, Any]]:
        """Channels that spoke after ``since``."""
        return self.db.rows("SELECT * FROM channel_state WHERE last_message_at > ?", (since,))

    def get(self, channel_key: str) -> dict[str, Any] | None:
        return self.db.one("SELECT * FROM channel_state WHERE channel_key = ?", (channel_key,))

    def mark_reflected(self, channel_key: str) -> None:
        self.db.execute("UPDATE channel_state SET reflected_at = ? WHERE channel_key = ?", (self.engine.clock.now(), channel_key))

    def set_summary(self, channel_key: str, summary: str, compacted_until: float) -> None:
        self.db.execute("UPDATE channel_state SET rolling_summary = ?, compacted_until = ? WHERE channel_key = ?",
                        (summary, compacted_until, channel_key))


class SessionSummaries:
    """Summaries of ended sessions (voice or text), shown to later replies in the same place for a while."""

    def __init__(self, engine: MemoryEngine, ttl_s: float = 86_400.0) -> None:
        self.engine, self.db, self.ttl_s = engine, engine.db, ttl_s

    def add(self, *, platform: str, guild_id: str | None, channel_id: str, participants: list[str], text: str,
            modality: str = "text", started_at: float | None = None) -> int:
        now = self.engine.clock.now()
        self.db.execute(
            "INSERT INTO session_summaries (platform, guild_id, channel_id, modality, participants, text, started_at, ended_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (platform, guild_id, channel_id, modality, json.dumps(participants), text, started_at, now, now + self.ttl_s))
        return int(self.db.con.last_insert_rowid())

    def recent(self, ctx: RecallContext, within_s: float, limit: int = 3) -> list[dict[str, Any]]:
        """Unexpired summaries that ended within the window, in this guild (any channel) or this DM."""
        now = self.engine.clock.now()
        place = ("guild_id = ?", ctx.guild_id) if ctx.guild_id else ("guild_id IS NULL AND channel_id = ?", ctx.channel_id)
        return self.db.rows(
            f"SELECT * FROM session_summaries WHERE platform = ? AND {place[0]} AND ended_at >= ? AND expires_at > ? "
            "ORDER BY ended_at DESC LIMIT ?", (ctx.platform, place[1], now - within_s, now, limit))

    def expire(self) -> int:
        """Delete summaries past their lifetime (run by the background tick, not on the reply path)."""
        self.db.execute("DELETE FROM session_summaries WHERE expires_at <= ?", (self.engine.clock.now(),))
        return self.db.con.changes()

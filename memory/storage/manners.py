"""Group manners and reactions in the store (ORCH-10, ORCH-12): the one owner of ``place_modes``,
``reply_memories``, ``reply_posts``, ``reply_reactions`` and ``memory_feedback``.

    /manners chime-in (a place's admins, or the dashboard)  -> place_modes: one row per channel or group
    a reply of the bot                                      -> reply_memories: the ids of the memories it used
    the adapter posted it                                   -> reply_posts: the platform ids it went out as
    a reaction on one of those posts                        -> reply_reactions: one vote per person per reply
    (by the memory's owner, once per memory)                -> memory_feedback + memories.importance

Ids, counts and emoji, never words. A deleted memory or reply takes its rows along (ON DELETE CASCADE); a
forgotten person's votes go with them (``memory.upkeep.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import InvalidInput
from ..scopes import placeholders

if TYPE_CHECKING:
    from ..clock import Clock
    from .db import Database
    from .memories import MemoryRepository
    from .messages import MessageLog


class Mode(StrEnum):
    """When the bot speaks in a place (ORCH-10)."""

    ADDRESSED = "addressed"  # only when spoken to: a mention, a reply to it, its name
    CHIME_IN = "chime-in"  # also when a cheap check says a message is for it (a question its way)
    ALL = "all"  # every message reaches the chat model, which may stay silent ([SKIP])


def mode_of(word: str) -> Mode:
    """``InvalidInput`` naming the three modes for anything else ("chime in", "chimein" and "CHIME-IN" are one)."""
    key = word.strip().lower().replace("_", "-").replace(" ", "-")
    key = "chime-in" if key == "chimein" else key
    try:
        return Mode(key)
    except ValueError:
        raise InvalidInput(f"unknown mode {word[:40]!r}: use addressed, chime-in or all") from None


@dataclass(frozen=True, slots=True)
class PlaceMode:
    channel_key: str
    guild_id: str | None
    mode: Mode
    set_at: float


@dataclass(frozen=True, slots=True)
class Answered:
    """The reply a reaction landed on: its row, who it answered (a person id) and the memories it used."""

    reply_rid: int
    answered: str
    memories: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Used:
    """One memory a reply used, as a reaction may touch it: whose it is and whether it is private."""

    rid: int
    scope: str
    scope_id: str
    private: bool


class PlaceModes:
    """A channel's or group's mode, by channel key ("discord:123")."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def get(self, channel_key: str) -> Mode | None:
        row = self.db.execute(
            "SELECT mode FROM place_modes WHERE channel_key = ?", (channel_key,)
        ).fetchone()
        return Mode(row[0]) if row else None

    def set(self, channel_key: str, mode: Mode, guild_id: str | None) -> PlaceMode:
        if not channel_key or ":" not in channel_key:
            raise InvalidInput("name a place as platform:channel, like discord:1234")
        now = self.clock.now()
        self.db.execute(
            "INSERT INTO place_modes (channel_key, guild_id, mode, set_at) VALUES (?, ?, ?, ?) ON CONFLICT (channel_key) "
            "DO UPDATE SET mode = excluded.mode, set_at = excluded.set_at, guild_id = COALESCE(excluded.guild_id, place_modes.guild_id)",
            (channel_key, guild_id, mode.value, now),
        )
        return PlaceMode(channel_key, guild_id, mode, now)

    def all(self) -> list[PlaceMode]:
        rows = self.db.rows(
            "SELECT channel_key, guild_id, mode, set_at FROM place_modes ORDER BY channel_key"
        )
        return [
            PlaceMode(r["channel_key"], r["guild_id"], Mode(r["mode"]), r["set_at"]) for r in rows
        ]


class ReplyFeedback:
    """What a reply used, where it was posted, and how people received it."""

    def __init__(
        self, db: Database, clock: Clock, messages: MessageLog, memory_rows: MemoryRepository
    ) -> None:
        self.db, self.clock, self.messages, self.memory_rows = db, clock, messages, memory_rows

    def record_used(self, answered_message_id: str, memory_ids: list[str]) -> int | None:
        """The bot's stored reply to ``answered_message_id`` used these memories; its rid (None: no reply stored)."""
        messages = self.messages
        replies = messages.replies_to(messages.rids_by_id([answered_message_id]))
        if not replies:
            return None
        reply = max(replies)
        for rid in self.memory_rows.rids_by_id(memory_ids):
            self.db.execute(
                "INSERT OR IGNORE INTO reply_memories (reply_rid, memory_rid) VALUES (?, ?)",
                (reply, rid),
            )
        return reply

    def record_posts(
        self, platform: str, channel_id: str, answered_platform_id: str, post_ids: list[str]
    ) -> int:
        """The reply to the message ``answered_platform_id`` went out as ``post_ids``; how many were recorded."""
        messages = self.messages
        replies = messages.replies_to(
            messages.rids_by_platform_id(platform, channel_id, [answered_platform_id])
        )
        if not replies:
            return 0  # nothing stored (/privacy off, a failure's apology): no memories to adjust, nothing to find
        with self.db.transaction():
            for post in post_ids:
                self.db.execute(
                    "INSERT OR IGNORE INTO reply_posts (platform, channel_id, post_id, reply_rid) VALUES (?, ?, ?, ?)",
                    (platform, channel_id, str(post), max(replies)),
                )
        return len(post_ids)

    def answered(self, platform: str, channel_id: str, post_id: str) -> Answered | None:
        """The reply posted as ``post_id`` in that very channel (a post id from elsewhere finds nothing)."""
        row = self.db.execute(
            "SELECT reply_rid FROM reply_posts WHERE platform = ? AND channel_id = ? AND post_id = ?",
            (platform, channel_id, str(post_id)),
        ).fetchone()
        author = self.messages.answered_author(int(row[0])) if row else None
        if row is None or author is None:
            return None
        used = self.db.execute(
            "SELECT memory_rid FROM reply_memories WHERE reply_rid = ? ORDER BY memory_rid",
            (row[0],),
        )
        return Answered(int(row[0]), author, tuple(int(m) for (m,) in used))

    def used(self, rids: tuple[int, ...]) -> list[Used]:
        """The live memories among ``rids``, as a reaction may touch them."""
        found = self.memory_rows.by_rids(list(rids))
        return [
            Used(m.rid, m.scope.value, m.scope_id, m.visibility.value == "private")
            for m in found
            if not m.forgotten
        ]

    def vote(self, reply_rid: int, person_id: str, emoji: str) -> bool:
        """One vote per person per reply: False when they had already voted on it."""
        self.db.execute(
            "INSERT OR IGNORE INTO reply_reactions (reply_rid, person_id, emoji, at) VALUES (?, ?, ?, ?)",
            (reply_rid, person_id, emoji, self.clock.now()),
        )
        return bool(self.db.con.changes())

    def unvoted(self, person_id: str, reply_rid: int, rids: list[int]) -> list[int]:
        """The memories among ``rids`` that no other reply this person voted on used: one
        person's vote counts once per memory (ORCH-12)."""
        if not rids:
            return []
        voted = {
            int(rid)
            for (rid,) in self.db.execute(
                "SELECT DISTINCT u.memory_rid FROM reply_reactions AS r JOIN reply_memories AS u "
                "ON u.reply_rid = r.reply_rid WHERE r.person_id = ? AND r.reply_rid != ? "
                f"AND u.memory_rid IN ({placeholders(rids)})",
                (person_id, reply_rid, *rids),
            )
        }
        return [rid for rid in rids if rid not in voted]

    def concert(self, rids: list[int], emojis: list[str]) -> dict[int, int]:
        """For each memory among ``rids``: how many people, each voting on a reply that answered
        them, voted one of ``emojis`` on a reply that used it (ORCH-12: others' votes counted)."""
        if not rids or not emojis:
            return {}
        rows = self.db.execute(
            "SELECT u.memory_rid, v.reply_rid, v.person_id FROM reply_reactions AS v "
            "JOIN reply_memories AS u ON u.reply_rid = v.reply_rid "
            f"WHERE v.emoji IN ({placeholders(emojis)}) "
            f"AND u.memory_rid IN ({placeholders(rids)})",
            (*emojis, *rids),
        )
        voters: dict[int, set[str]] = {}
        asked: dict[int, str | None] = {}
        for rid, reply, person in rows:
            if reply not in asked:
                asked[reply] = self.messages.answered_author(int(reply))
            if asked[reply] == person:
                voters.setdefault(int(rid), set()).add(str(person))
        return {rid: len(people) for rid, people in voters.items()}

    def received(self, rids: list[int], delta: float, *, recheck: bool) -> None:
        """Count the reception and move each memory's importance by ``delta`` (within 0..10)."""
        if not rids:
            return
        up, down = (delta, 0.0) if delta > 0 else (0.0, -delta)
        with self.db.transaction():
            self.memory_rows.adjust_importance(rids, delta)
            for rid in rids:
                self.db.execute(
                    "INSERT INTO memory_feedback (memory_rid, up, down, recheck, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (memory_rid) DO UPDATE SET up = memory_feedback.up + excluded.up, "
                    "down = memory_feedback.down + excluded.down, recheck = MAX(memory_feedback.recheck, excluded.recheck), "
                    "updated_at = excluded.updated_at",
                    (rid, up, down, int(recheck), self.clock.now()),
                )

    def to_recheck(self, partitions: list[str], limit: int = 20) -> list[tuple[str, str]]:
        """(id, content) of live memories in these partitions a 👎 marked for the next reflection to recheck."""
        marked = [
            int(r)
            for (r,) in self.db.execute(
                "SELECT memory_rid FROM memory_feedback WHERE recheck = 1 ORDER BY updated_at"
            )
        ]
        wanted = set(partitions)
        found = [
            m
            for m in self.memory_rows.by_rids(marked)
            if not m.forgotten and m.partition_key in wanted
        ]
        return [(m.id, m.content) for m in found[:limit]]

    def rechecked(self, memory_ids: list[str]) -> None:
        rids = self.memory_rows.rids_by_id(memory_ids)
        if rids:  # a short list (a reflection rechecks at most 10): plain placeholders, typed alike on both engines
            self.db.execute(
                f"UPDATE memory_feedback SET recheck = 0 WHERE memory_rid IN ({placeholders(rids)})",
                rids,
            )

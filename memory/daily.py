"""Daily reflection's bookkeeping (MAINT-4): which chat's day is due, its turns, and marking it done.

The unit is one chat (``platform:channel``, the key every chat's summaries, audits and forgetting use) on one
UTC day. A run at 04:00 reflects the days before today that had human turns and are not marked done,
reaching back ``CATCH_UP_DAYS`` (a bot that was down at 04:00 catches up on its next run; older days are left
to ordinary extraction, which saw every message anyway). A day is marked after its facts are stored, so a run
that crashes or fails on one chat redoes that chat next time, and the store's dedup keeps the redo from
duplicating what was already stored. Asking the model is the bot's business (``bot.daily``); this module only
reads and writes the store.

    due(now)         (chat, day) pairs to reflect, oldest first
    turns(chat_day)  the day's stored turns of that chat, oldest first
    mark_done(...)   the day of that chat is reflected (idempotent)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from .clock import DAY
from .engine import MemoryEngine
from .models import StoredMessage
from .scopes import RecallContext, message_partition
from .sessions import ChannelState

CATCH_UP_DAYS = 7
EDGE = 1e-3  # "after" queries are strict (>): a turn written exactly at midnight belongs to the day it opens


@dataclass(frozen=True, slots=True)
class ChatDay:
    """One chat's UTC day, with the chat's saved context (its last speaker's): the base of every speaker's."""

    channel_key: str
    ctx: RecallContext
    start: float  # midnight UTC opening the day

    @property
    def day(self) -> str:
        return day_name(self.start)

    @property
    def end(self) -> float:
        return self.start + DAY

    @property
    def partition_key(self) -> str:
        return message_partition(self.ctx.guild_id, self.ctx.speaker_id)


def midnight(at: float) -> float:
    """The UTC midnight at or before ``at``."""
    return (at // DAY) * DAY


def day_name(start: float) -> str:
    return datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d")


class DailyReflections:
    """Owner of ``daily_reflections``; reads turns through ``MessageLog`` and chats through ``ChannelState``."""

    def __init__(self, engine: MemoryEngine, *, catch_up_days: int = CATCH_UP_DAYS) -> None:
        self.engine, self.db, self.catch_up_days = engine, engine.db, catch_up_days
        self.channels = ChannelState(engine)

    def window(self, now: float) -> tuple[float, float]:
        """(first day's midnight, today's midnight): today is not over, so it is never reflected yet."""
        today = midnight(now)
        return today - self.catch_up_days * DAY, today

    def due(self, now: float) -> list[ChatDay]:
        """Days before today, within the catch-up window, on which a chat had turns and that are not marked done."""
        first, today = self.window(now)
        out: list[ChatDay] = []
        for state in self.channels.active(first):
            done = self.done_days(state.channel_key, first)
            for start in _days(first, today):
                if day_name(start) not in done and self._count(state.ctx, start) > 0:
                    out.append(ChatDay(state.channel_key, state.ctx, start))
        return sorted(out, key=lambda c: (c.start, c.channel_key))

    def _count(self, ctx: RecallContext, start: float) -> int:
        messages = self.engine.messages
        before = messages.count_in_channel_after(ctx.platform, ctx.channel_id, start - EDGE)
        return before - messages.count_in_channel_after(ctx.platform, ctx.channel_id, start + DAY - EDGE)

    def turns(self, chat: ChatDay) -> list[StoredMessage]:
        """The chat's stored turns of that day (user and bot), oldest first."""
        rows = self.engine.messages.in_channel_after(chat.ctx.platform, chat.ctx.channel_id, chat.start - EDGE)
        return [r for r in rows if r.created_at <= chat.end - EDGE]

    def done_days(self, channel_key: str, since: float = 0.0) -> set[str]:
        rows = self.db.execute("SELECT day FROM daily_reflections WHERE channel_key = ? AND day >= ?", (channel_key, day_name(since)))
        return {d for (d,) in rows}

    def mark_done(self, chat: ChatDay, *, stored: int = 0, audit_id: int | None = None) -> None:
        """The chat's day is reflected; marking it twice keeps the first mark (a second run adds nothing)."""
        self.db.execute(
            "INSERT INTO daily_reflections (channel_key, day, partition_key, stored, audit_id, done_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (channel_key, day) DO NOTHING",
            (chat.channel_key, chat.day, chat.partition_key, stored, audit_id, self.engine.clock.now()),
        )


def _days(first: float, today: float) -> list[float]:
    return [first + i * DAY for i in range(int(round((today - first) / DAY)))]

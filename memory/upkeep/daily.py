"""Daily reflection's bookkeeping (MAINT-4): which chat's day is due, its turns, and marking it done.

The unit is one chat (``platform:channel``, the key every chat's summaries, audits and forgetting use) on one
day of that chat's zone (ORCH-8): a DM's day is its person's (their ``/timezone``), a server channel's the
operator default's (``memory.storage.timezones``); without zones, every day is UTC's. Days run midnight to midnight on
the wall clock, so a day that changes to or from summer time is 23 or 25 hours long. A run at 04:00 (UTC)
reflects the days before today (the chat's today) that had human turns and are not marked done, reaching back
``CATCH_UP_DAYS`` (a bot that was down at 04:00 catches up on its next run; older days are left to ordinary
extraction, which saw every message anyway). A day is marked after its facts are stored, so a run that crashes
or fails on one chat redoes that chat next time, and the store's dedup keeps the redo from duplicating what
was already stored. Asking the model is ``memory.jobs.day.DayReflection``'s job (when to run it, the scheduler's);
this module only reads and writes the store.

    due(now)         (chat, day) pairs to reflect, oldest first
    turns(chat_day)  the day's stored turns of that chat, oldest first
    mark_done(...)   the day of that chat is reflected (idempotent)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from ..engine import MemoryEngine
from ..models import StoredMessage
from ..scopes import RecallContext, message_partition

CATCH_UP_DAYS = 7
EDGE = 1e-3  # "after" queries are strict (>): a turn written exactly at midnight belongs to the day it opens


@dataclass(frozen=True, slots=True)
class ChatDay:
    """One chat's day in its zone, with the chat's saved context (its last speaker's): the base of every speaker's."""

    channel_key: str
    ctx: RecallContext
    day: str  # the date there, "2026-03-29"
    start: float  # the midnight opening it there
    end: float  # the next midnight there: 23 or 25 hours later when the clocks change that day

    @property
    def partition_key(self) -> str:
        return message_partition(self.ctx.guild_id, self.ctx.speaker_id)


def midnight(on: date, zone: tzinfo = UTC) -> float:
    """The moment ``on`` begins in ``zone`` (a wall-clock midnight, whatever the offset that day)."""
    return datetime(on.year, on.month, on.day, tzinfo=zone).timestamp()


def local_date(at: float, zone: tzinfo = UTC) -> date:
    return datetime.fromtimestamp(at, zone).date()


class DailyReflections:
    """Owner of ``daily_reflections``; reads turns through ``MessageLog`` and chats through ``ChannelState``.
    ``zone_for`` gives a chat's zone from its context (``Timezones.zone_for``); without it, days are UTC's."""

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        catch_up_days: int = CATCH_UP_DAYS,
        zone_for: Callable[[RecallContext], tzinfo] | None = None,
    ) -> None:
        self.engine, self.db, self.catch_up_days = engine, engine.db, catch_up_days
        self.channels = engine.channels
        self.zone_for = zone_for or (lambda ctx: UTC)

    def window(self, now: float, zone: tzinfo = UTC) -> list[date]:
        """The dates before today there, within the catch-up window: today is not over, so it is never reflected yet."""
        today = local_date(now, zone)
        return [today - timedelta(days=back) for back in range(self.catch_up_days, 0, -1)]

    def due(self, now: float) -> list[ChatDay]:
        """Days before today, within the catch-up window, on which a chat had turns and that are not marked done."""
        out: list[ChatDay] = []
        # 14 hours of slack: the earliest zone's window opens up to that much before UTC's
        earliest = midnight(local_date(now) - timedelta(days=self.catch_up_days)) - 14 * 3600
        for state in self.channels.active(earliest):
            zone = self.zone_for(state.ctx)
            dates = self.window(now, zone)
            done = self.done_days(state.channel_key, midnight(dates[0], zone) if dates else now)
            for on in dates:
                chat = ChatDay(
                    state.channel_key,
                    state.ctx,
                    on.isoformat(),
                    midnight(on, zone),
                    midnight(on + timedelta(days=1), zone),
                )
                if chat.day not in done and self._count(chat) > 0:
                    out.append(chat)
        return sorted(out, key=lambda c: (c.start, c.channel_key))

    def _count(self, chat: ChatDay) -> int:
        messages, ctx = self.engine.messages, chat.ctx
        before = messages.count_in_channel_after(ctx.platform, ctx.channel_id, chat.start - EDGE)
        return before - messages.count_in_channel_after(
            ctx.platform, ctx.channel_id, chat.end - EDGE
        )

    def turns(self, chat: ChatDay) -> list[StoredMessage]:
        """The chat's stored turns of that day (user and bot), oldest first."""
        rows = self.engine.messages.in_channel_after(
            chat.ctx.platform, chat.ctx.channel_id, chat.start - EDGE
        )
        return [r for r in rows if r.created_at <= chat.end - EDGE]

    def done_days(self, channel_key: str, since: float = 0.0) -> set[str]:
        """The days marked done from the UTC date of ``since`` on (a day's name is its own zone's date: a day of
        slack keeps a zone ahead of UTC from missing its first one)."""
        first = (local_date(since) - timedelta(days=1)).isoformat()
        rows = self.db.execute(
            "SELECT day FROM daily_reflections WHERE channel_key = ? AND day >= ?",
            (channel_key, first),
        )
        return {d for (d,) in rows}

    def is_done(self, chat: ChatDay) -> bool:
        return chat.day in self.done_days(chat.channel_key, chat.start)

    def mark_done(self, chat: ChatDay, *, stored: int = 0, audit_id: int | None = None) -> None:
        """The chat's day is reflected; marking it twice keeps the first mark (a second run adds nothing)."""
        self.db.execute(
            "INSERT INTO daily_reflections (channel_key, day, partition_key, stored, audit_id, done_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (channel_key, day) DO NOTHING",
            (
                chat.channel_key,
                chat.day,
                chat.partition_key,
                stored,
                audit_id,
                self.engine.clock.now(),
            ),
        )

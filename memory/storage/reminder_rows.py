"""A reminder's values (ORCH-13): where it was asked (``ReminderPlace``), a new one
(``NewReminder``) and a stored row (``Reminder``), with how a person reads its time. The table's one owner is
``memory.storage.reminders``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ..models import JsonObject
from ..reminder_time import When, next_due


@dataclass(frozen=True, slots=True)
class ReminderPlace:
    """Where the reminder was asked, so where it fires; ``platform_user_id`` is the asker's account there."""

    platform: str
    channel_id: str
    platform_user_id: str
    guild_id: str | None = None
    is_dm: bool = True


@dataclass(frozen=True, slots=True)
class NewReminder:
    person_id: str
    place: ReminderPlace
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
    def place(self) -> ReminderPlace:
        return ReminderPlace(
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

"""Reminders as the bot's sender keeps their books (ORCH-13): which are due, the claim that makes one process
the sender of a row, and what became of a send. The rules (at-least-once, backoff, telling the person) live
in ``memory.storage.reminders``; this service runs them on the memory thread, as one holder for the life of
the process, and returns the frozen ``Reminder`` rows.
"""

from __future__ import annotations

from .engine import MemoryEngine
from .storage.claims import process_holder
from .storage.db import AsyncRunner
from .storage.reminders import Reminder


class Reminding:
    """One process's side of the reminders table: every method is one call on the memory thread."""

    def __init__(
        self, engine: MemoryEngine, runner: AsyncRunner, *, holder: str | None = None
    ) -> None:
        """:param holder: this process's id in the claims (``process_holder()`` when None): a row claimed by
        another holder is never recorded as sent by this one."""
        self.engine, self.runner = engine, runner
        self.reminders = engine.reminders
        self.holder = holder or process_holder()

    def now(self) -> float:
        return self.engine.clock.now()

    async def due(self) -> list[Reminder]:
        """Pending rows whose time came, and rows a dead sender left mid-send (its lease over)."""
        return await self.runner.run(self.reminders.due, self.now())

    async def claim(self, reminder: Reminder, lease_s: float) -> bool:
        """This process's to send for ``lease_s`` seconds; False when another process has it or it changed."""
        return await self.runner.run(self.reminders.claim, reminder, self.holder, lease_s)

    async def delivered(self, reminder: Reminder, now: float) -> bool:
        """The platform took it (at ``now``): a one-off goes, a recurring one waits for its next time. False when
        the row was no longer this process's to record (forgotten meanwhile)."""
        return await self.runner.run(
            self.reminders.delivered, reminder.id, self.holder, reminder.next_due(now)
        )

    async def failed(self, reminder: Reminder) -> str:
        """The platform refused it: its new state ('pending' after a backoff, 'undelivered' after the last try)."""
        return await self.runner.run(self.reminders.failed, reminder.id, self.holder)

    async def undelivered(self) -> list[Reminder]:
        """Reminders given up on whose person is still to be told."""
        return await self.runner.run(self.reminders.undelivered, self.now())

    async def told(self, reminder: Reminder) -> None:
        """The person was told it was not delivered: a one-off goes, a recurring one tries its next time."""
        await self.runner.run(self.reminders.moved_on, reminder.id, reminder.next_due(self.now()))

    async def tell_later(self, reminder: Reminder) -> None:
        """Telling failed too: tried again later (``/reminders`` shows it meanwhile)."""
        await self.runner.run(self.reminders.tell_later, reminder.id)

    async def setter_left(self, reminder: Reminder) -> int:
        """Its setter is no longer in the server or group it posts in (left, or banned): their
        reminders there are deleted; how many."""
        return await self.runner.run(self.reminders.setter_left, reminder.place)

    async def kept_for(self, person_id: str) -> list[Reminder]:
        """The person's reminders, soonest first."""
        return await self.runner.run(self.reminders.mine, person_id)

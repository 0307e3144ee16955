"""A place the bot was removed from, as the bot's event loop awaits it (SEC-7): marked when the
adapters say the bot left, unmarked when it is added back, purged once the grace period passed.
The mechanism is ``memory.upkeep.retention.Departures``; each call here is one call on the memory
thread."""

from __future__ import annotations

from .engine import MemoryEngine
from .storage.db import AsyncRunner
from .storage.departures import Departure
from .upkeep.retention import Departures


class Leaving:
    """``grace_days``: how long a place's rows wait after the bot left
    (``COMPANION_LEAVE_GRACE_DAYS``)."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, grace_days: float) -> None:
        self.runner = runner
        self.departures = Departures(engine, grace_days)

    @property
    def grace_days(self) -> float:
        return self.departures.grace_days

    async def left(self, platform: str, place_id: str) -> Departure:
        """The bot was removed there (``place_id`` as the platform says it); told twice, the first
        date holds."""
        return await self.runner.run(self.departures.left, platform, place_id)

    async def returned(self, platform: str, place_id: str) -> bool:
        """The bot was added back: True when a purge was pending (it is cancelled)."""
        return await self.runner.run(self.departures.returned, platform, place_id)

    async def purge_due(self) -> list[dict[str, int]]:
        """Every place whose grace period passed, purged: each one's counts by table and
        ``rows``."""
        return await self.runner.run(self.departures.purge_due)

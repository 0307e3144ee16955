"""What the model calls cost, as ``/usage`` and the dashboard read it (ORCH-14): the usage
ledger's listings over a span of UTC days ending today, by the project clock. The counts and their
rules (a person's share, a place's own rows, the polite-line rows left out) live in
``memory.storage.ledger``; this service names the reads, for code on the memory thread, and returns
its frozen ``Spend`` and ``Line`` values. The recorder that writes the ledger is
``bot.spending.budgets.Budgets``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .engine import MemoryEngine
from .storage.ledger import Spend, SpendingLine, day_of


class Spending:
    """The ledger's reads; each call runs on the caller's thread, which must be the store's."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.ledger, self.clock = engine.ledger, engine.clock

    def span(self, days: int) -> tuple[str, str]:
        """The first and the last UTC day of the ``days`` ending today: 7 on 2026-11-27 is
        ("2026-11-21", "2026-11-27")."""
        now = self.clock.now()
        first = datetime.fromtimestamp(now, UTC) - timedelta(days=days - 1)
        return first.strftime("%Y-%m-%d"), day_of(now)

    def totals(self, first: str, last: str, place_id: str | None = None) -> Spend:
        """Everything spent from ``first`` to ``last`` (in one place, when given)."""
        return self.ledger.totals(first, last, place_id)

    def by(
        self, column: str, first: str, last: str, place_id: str | None = None, *, limit: int = 50
    ) -> list[SpendingLine]:
        """The spend by kind, model, place_id, day or platform, the largest first."""
        return self.ledger.by(column, first, last, place_id, limit=limit)

    def people(
        self, first: str, last: str, place_id: str | None = None, *, limit: int = 50
    ) -> list[SpendingLine]:
        """Each person's share (labelled by person id), the largest first."""
        return self.ledger.people(first, last, place_id, limit=limit)

    def person(self, person_id: str, first: str, last: str) -> list[SpendingLine]:
        """One person's spend by kind over the days."""
        return self.ledger.person(person_id, first, last)

    def person_spent(self, day: str, person_id: str) -> Spend:
        """What one person's turns and jobs cost on ``day``, everywhere (what their budget
        counts)."""
        return self.ledger.person_spent(day, person_id)

    def place_spent(self, day: str, place_id: str) -> Spend:
        """What a server or group cost on ``day`` (what its budget counts)."""
        return self.ledger.place_spent(day, place_id)

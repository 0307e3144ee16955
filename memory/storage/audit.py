"""The dashboard's audit trail (DASH-3): who changed what, and when; the one owner of ``dashboard_audit``.

A row names ids (a memory's, a person's, a guild's), field names, knob values and counts, never the
words of a memory or a message: forgetting a memory must not leave its text here, so there is none to
leave. A row about a person carries their id in ``person_id``, and forgetting that person removes it
(``memory.upkeep.registry``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..models import JsonObject
from .db import Database

MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: float
    who: str
    action: str  # "memory.create", "memory.update", "memory.forget", "person.forget", "guild.purge", "settings.update"
    target: str  # the id acted on ("" when the target itself was forgotten and is not to be named)
    detail: JsonObject
    person_id: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AuditEntry:
        return cls(
            row["id"],
            row["at"],
            row["who"],
            row["action"],
            row["target"],
            json.loads(row["detail"] or "{}"),
            row["person_id"],
        )


class AuditTrail:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def record(
        self,
        who: str,
        action: str,
        target: str = "",
        *,
        person_id: str | None = None,
        detail: JsonObject | None = None,
    ) -> int:
        """One row; ``detail`` must hold ids, names of fields, numbers: never a person's words."""
        self.db.execute(
            "INSERT INTO dashboard_audit (at, who, action, target, person_id, detail) VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.clock.now(),
                who,
                action,
                target,
                person_id,
                json.dumps(detail or {}, sort_keys=True),
            ),
        )
        return int(self.db.con.last_insert_rowid())

    def recent(self, limit: int = 100) -> list[AuditEntry]:
        rows = self.db.rows(
            "SELECT * FROM dashboard_audit ORDER BY at DESC, id DESC LIMIT ?",
            (max(1, min(limit, MAX_LIMIT)),),
        )
        return [AuditEntry.from_row(r) for r in rows]

"""What the bot learned about a chat model by asking it (ORCH-11: whether it sees images).

Kept in the store's settings, one row per server and model (``vision.<base url>|<model>``), so every process of
the bot and ``companion doctor`` read the same answer and no restart asks the model again. It holds no words of
anyone: a yes or no and when it was asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Database

PREFIX = "vision."


@dataclass(frozen=True, slots=True)
class SightTrait:
    sees: bool
    asked_at: str  # ISO 8601, UTC


class ModelTraits:
    def __init__(self, db: Database) -> None:
        self.db = db

    def sight(self, model_key: str) -> SightTrait | None:
        """Whether the model (``model_key``: server and name) was found to see images, or None: never asked."""
        kept = self.db.get_setting(PREFIX + model_key)
        if not kept:
            return None
        value = json.loads(kept)
        return SightTrait(bool(value["sees"]), str(value["at"]))

    def keep_sight(self, model_key: str, sight: SightTrait) -> None:
        self.db.set_setting(
            PREFIX + model_key, json.dumps({"sees": sight.sees, "at": sight.asked_at})
        )

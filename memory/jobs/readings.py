"""A fact forgotten in another language, read in English (LANG-4), in ``memory.jobs.base``'s shape:

    gather   the facts buried in another language since the last run (``Tombstones.take_unread``:
             held in this process's memory only, never written)
    ask      the model's English reading of each (the gloss prompt)
    apply    a second tombstone laid from each reading (``Tombstones.bury_reading``)

So "Alice ha paura delle vespe", forgotten, also holds back "Alice is afraid of wasps" and
"Алиса боится ос" (read in English by the write path: ``WriteFacts``): the words of two languages
share no marks, and the multilingual model alone cannot tell "afraid of wasps" from "afraid of
dogs" across them. A reading the model does not give leaves the first tombstone to hold alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import prompts

from ..engine import MemoryEngine
from ..protocols import AsyncCompleter
from ..write.glosses import english_reading
from ..write.tombstones import Worded
from .base import NoAnswer


@dataclass(frozen=True, slots=True)
class TombstoneReadings:
    engine: MemoryEngine

    def gather(self) -> tuple[Worded, ...] | None:
        return self.engine.memories.tombstones.take_unread() or None

    async def ask(self, plan: tuple[Worded, ...], model: AsyncCompleter) -> tuple[str | None, ...]:
        readings = []
        for fact in plan:
            try:
                readings.append(english_reading(await model(prompts.render("gloss"), fact.content)))
            except NoAnswer:
                readings.append(None)  # its own tombstone still holds its own words
        return tuple(readings)

    def apply(self, plan: tuple[Worded, ...], answer: tuple[str | None, ...]) -> int:
        tombstones = self.engine.memories.tombstones
        return sum(
            tombstones.bury_reading(fact, reading)
            for fact, reading in zip(plan, answer, strict=True)
            if reading
        )

    def failed(self, plan: tuple[Worded, ...], error: Exception) -> int:
        return 0

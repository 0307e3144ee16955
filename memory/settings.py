"""The recall knobs an operator tunes while the bot runs (RET-3): both corpora's (memories,
messages), with one line of help per knob, and a change validated as a whole before any of it is
stored. The knobs, their checks and their storage are ``memory.storage.knobs``; recall reads the
settings table on every turn, so a stored change shows on the next reply, with no restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine import MemoryEngine
from .models import JsonObject
from .storage.knobs import CorpusName, KnobStore, RecallKnobs, knob_help


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """Both corpora's knobs as JSON-ready data, and ``help``: one line per knob ("weights.semantic"
    for a nested one) from the field descriptions, so a page and the knob it explains cannot drift
    apart."""

    memories: JsonObject
    messages: JsonObject
    help: dict[str, str]


class Tuning:
    """The knobs' use cases, for code on the memory thread."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.knobs: KnobStore = engine.knobs

    def shown(self) -> RecallSettings:
        return RecallSettings(
            self.knobs.get("memories").model_dump(mode="json"),
            self.knobs.get("messages").model_dump(mode="json"),
            knob_help(),
        )

    def change(self, memories: JsonObject, messages: JsonObject) -> RecallSettings:
        """Partial changes of either corpus (an empty one is left alone).

        :raises pydantic.ValidationError: an unknown knob or a bad value, naming the field; then
            nothing is stored: both corpora are validated before either is."""
        parts: dict[CorpusName, JsonObject] = {"memories": memories, "messages": messages}
        merged = {name: self._checked(name, part) for name, part in parts.items() if part}
        with self.engine.transaction():
            for name, part in merged.items():
                self.knobs.update(name, part)
        return self.shown()

    def _checked(self, corpus: CorpusName, part: JsonObject) -> JsonObject:
        current = self.knobs.get(corpus).model_dump(mode="json")
        for key, value in part.items():
            current[key] = (
                {**current[key], **value}
                if isinstance(value, dict) and isinstance(current.get(key), dict)
                else value
            )
        RecallKnobs.model_validate(current)  # raises ValidationError naming the field
        return part

"""One of two processes writing to one store at once (run by tests/memory/test_two_writers.py).

    python -m tests.store_writer STORE NAME SECONDS

Until SECONDS pass it stores a message and a memory learned from it, and every third round forgets an
earlier one of its own memories (a targeted forget: the memory, its message, a scrub). It prints one JSON
line: how many rounds and forgets it made, the failures (an exception's type and text), and the unique
words of everything it forgot, which the test then looks for in the file.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

from memory.engine import MemoryEngine
from memory.models import NewMemory, Provenance, Scope
from memory.storage.messages import NewMessage
from memory.upkeep.forgetting import forget_memory
from tests.conftest import HashEmbedder


def _round(engine: MemoryEngine, name: str, i: int) -> tuple[str, str]:
    """A message and a memory learned from it, both holding one word nobody else writes."""
    word = f"{name}word{i}z"  # the z ends it: "annword1z" is not inside "annword12z"
    said = engine.messages.add(
        NewMessage(
            platform="discord",
            channel_id=f"dm-{name}",
            author_id=name,
            content=f"I keep {word} at home",
            dm_person_id=name,
        )
    )
    stored = engine.memories.add(
        NewMemory(
            content=f"{name} keeps {word} at home",
            subject=word,
            scope=Scope.USER,
            scope_id=name,
            provenance=Provenance(platform="discord", channel_id=f"dm-{name}", sources=(said,)),
        )
    )
    return word, stored.memory.id


def _described(exc: Exception) -> str:
    """The failure with SQLite's extended code and the innermost frames, to tell a timeout from a refusal."""
    where = " < ".join(
        f"{f.name}:{f.lineno}" for f in reversed(traceback.extract_tb(exc.__traceback__)[-3:])
    )
    return f"{type(exc).__name__} ({getattr(exc, 'extendedresult', '')}): {exc} at {where}"


def main(path: str, name: str, seconds: float) -> dict[str, object]:
    engine = MemoryEngine(path, HashEmbedder(), vector_mirror=False)
    kept: list[tuple[str, str]] = []
    forgotten: list[str] = []
    failures: list[str] = []
    rounds = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            rounds += 1
            try:
                kept.append(_round(engine, name, rounds))
                if rounds % 3 == 0:
                    word, memory_id = kept.pop(0)
                    forget_memory(engine, memory_id, asked_in=("discord", f"dm-{name}"))
                    forgotten.append(word)
            except (
                Exception
            ) as exc:  # counted, not raised: the test wants every failure, not the first
                failures.append(_described(exc))
    finally:
        engine.close()
    return {
        "rounds": rounds,
        "forgets": len(forgotten),
        "forgotten": forgotten,
        "failures": failures,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], float(sys.argv[3]))))

"""The paraphrase suite of issue 31 (``tests/memory/data/forget_rewordings.txt``), measured: 50
facts Alice asked to forget, each with five rewordings a model might learn back, and 254 other facts
about her (the last 50 in German, French, Spanish, Italian and Portuguese) that must still be
learned.

Two ways of judging a later fact, as the write path does (``WriteFacts``): by its words alone (no
model to read it), and with the model's English reading of a fact in another language
(``memory.write.glosses``), here what the real Qwen2.5-Coder 1.5B read, recorded by
``scripts/record_readings.py`` and replayed (the default run calls no model). Used by
``tests/memory/test_forget_rewording.py`` and the group trust suite, which print the rates.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import prompts
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.jobs.base import Facts, WriteFacts
from memory.jobs.readings import TombstoneReadings
from memory.models import NewMemory, Provenance, Scope, Source
from memory.protocols import Embedder
from memory.write.tombstones import learnable

DATA = Path(__file__).parent / "memory" / "data"
SUITE, READINGS = DATA / "forget_rewordings.txt", DATA / "forget_readings_1.5b.json"
HOLDOUT = DATA / "forget_rewordings_holdout.txt"  # written after the tuning, measured as it stands
LANGUAGES = DATA / "forget_rewordings_languages.txt"  # LANG-4: forgotten in six languages
TRANSLATIONS = ("de", "fr", "es", "it", "pt")
KEY = bytes(range(32))  # the operator's key (fixed: an outcome must not hang on a key drawn)


def suite(path: Path = SUITE) -> tuple[list[tuple[str, list[tuple[str, str]]]], list[str]]:
    """(forgotten fact, [(kind, rewording)]) blocks, and the unrelated facts."""
    lines = path.read_text(encoding="utf-8").splitlines()
    cut = lines.index("== unrelated ==")
    text = "\n".join(line for line in lines[:cut] if not line.startswith("#")).strip()
    facts = [
        (b.splitlines()[0], [tuple(x.split(": ", 1)) for x in b.splitlines()[1:]])
        for b in text.split("\n\n")
    ]
    return facts, [line for line in lines[cut + 1 :] if line.strip()]  # type: ignore[return-value]


def about(person: str, content: str, sources: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(
        content=content,
        subject="alice",
        scope=Scope.USER,
        scope_id=person,
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=sources),
    )


def recorded_readings() -> dict[str, Any]:
    found = json.loads(READINGS.read_text(encoding="utf-8"))
    # answers to another prompt would measure nothing: record them again when the prompt changes
    assert found["prompt_sha256"] == hashlib.sha256(prompts.render("gloss").encode()).hexdigest()
    return found


@dataclass(frozen=True)
class Rates:
    held: Counter[str]  # rewordings held back, "english" and "translation"
    total: Counter[str]
    blocked: list[str]  # unrelated facts held back
    unrelated: int
    others: int  # the forgotten facts held back for another person (Bob): must be 0

    @property
    def rate(self) -> float:
        return sum(self.held.values()) / sum(self.total.values())

    def english(self) -> float:
        return self.held["english"] / self.total["english"]

    def line(self, how: str) -> str:
        return (
            f"paraphrase suite, {how}: {sum(self.held.values())}/{sum(self.total.values())} "
            f"rewordings held ({self.rate:.1%}; English {self.held['english']}/"
            f"{self.total['english']}, translations {self.held['translation']}/"
            f"{self.total['translation']}), {len(self.blocked)}/{self.unrelated} unrelated "
            f"facts blocked {self.blocked}"
        )


async def measure(
    path: Path, embedder: Embedder, readings: dict[str, str] | None = None, of: Path = SUITE
) -> Rates:
    """Buries the suite's facts of Alice in a fresh store at ``path``, then judges every rewording
    and every unrelated fact as the write path would (``readings``: the model's English for a fact
    in another language; None: by their words alone)."""
    facts, unrelated = suite(of)
    with MemoryEngine(path, embedder, FakeClock(), secret_key=KEY) as engine:
        alice = engine.people.resolve("discord", "alice", "Alice")
        buried = engine.memories.tombstones.bury([about(alice, fact) for fact, _ in facts])
        assert buried == len(facts)

        async def model(system: str, user: str, *, temperature: float = 0.0) -> str:
            assert system == prompts.render("gloss"), "only a reading is asked: nothing is related"
            if readings is None:
                raise AssertionError("no model: a fact is judged by its words")
            return readings[user]

        if readings is not None:  # LANG-4: a fact forgotten in another language, read in English
            job = TombstoneReadings(engine)
            plan = job.gather()
            if plan:
                job.apply(plan, await job.ask(plan, model))

        async def held_back(person: str, text: str) -> bool:
            write = WriteFacts(engine, Facts((about(person, text),)))
            plan = write.gather()
            if readings is None:
                return not plan
            verdicts = await write.ask(plan, model)
            read = {j.new.content: v.reading for j, v in zip(plan, verdicts, strict=True)}
            return not learnable(
                engine, [j.new for j in plan], {k: v for k, v in read.items() if v}
            )

        held, total = Counter[str](), Counter[str]()
        for _, rewordings in facts:
            for kind, text in rewordings:
                group = "translation" if kind in TRANSLATIONS else "english"
                total[group] += 1
                held[group] += await held_back(alice, text)
        blocked = [text for text in unrelated if await held_back(alice, text)]
        others = sum([await held_back("bob", fact) for fact, _ in facts])
    return Rates(held, total, blocked, len(unrelated), others)

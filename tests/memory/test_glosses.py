"""A fact in another language about someone who forgot something is read in English by the model
before it is stored (SEC-5, issue 31 item 2): the forgotten fact is not learned back in German,
what is not forgotten still is, and a person who says it again in their own language is heard.

The write path is the real one (``WriteFacts``: gather, ask, apply on a real store); the model is
a scripted ``AsyncCompleter`` that reads each fact as a model would, or fails as one does.
"""

from __future__ import annotations

import pytest
from conftest import remember, say

import prompts
from memory.engine import MemoryEngine
from memory.jobs.base import Facts, NoAnswer, WriteFacts
from memory.models import NewMemory
from memory.upkeep.forgetting import forget_memory
from memory.write.glosses import english_reading, foreign
from tests.paraphrase_support import about

READ = {
    "Alice hat Angst vor Spinnen": "Alice is afraid of spiders.",
    "Alice hat Angst vor Hunden": "Alice is afraid of dogs.",
    "Alice a peur des araignées": "Alice is scared of spiders",
}


class Reader:
    """The model: reads a fact in English (``READ``), or raises ``fail``; the judge says "no"."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail, self.read = fail, []

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        if system != prompts.render("gloss"):
            return "no"
        self.read.append(user)
        if self.fail is not None:
            raise self.fail
        return READ[user]


def fact(text: str, person: str = "alice", sources: tuple[str, ...] = ()) -> NewMemory:
    """A fact a job learned about ``person`` from ``sources`` (stored message ids)."""
    return about(person, text, sources)


async def learn(engine: MemoryEngine, model: Reader, *facts: NewMemory) -> list[str]:
    """The facts through the one write path; the contents stored."""
    job = WriteFacts(engine, Facts(facts))
    plan = job.gather()
    job.apply(plan, await job.ask(plan, model))
    return [
        r["content"] for r in engine.db.rows("SELECT content FROM memories WHERE forgotten = 0")
    ]


@pytest.fixture
def forgot(engine: MemoryEngine) -> MemoryEngine:
    forget_memory(engine, remember(engine, "Alice is afraid of spiders").id)
    return engine


@pytest.mark.asyncio
async def test_a_forgotten_fact_in_another_language_is_known_by_its_english_reading(forgot):
    model = Reader()
    stored = await learn(
        forgot, model, fact("Alice hat Angst vor Spinnen"), fact("Alice a peur des araignées")
    )
    assert stored == [] and model.read == [
        "Alice hat Angst vor Spinnen",
        "Alice a peur des araignées",
    ]


@pytest.mark.asyncio
async def test_what_was_not_forgotten_is_learned_in_any_language(forgot):
    assert await learn(forgot, Reader(), fact("Alice hat Angst vor Hunden")) == [
        "Alice hat Angst vor Hunden"
    ]


@pytest.mark.asyncio
async def test_only_a_foreign_fact_of_someone_who_forgot_something_is_read(forgot):
    model = Reader()
    stored = await learn(
        forgot,
        model,
        fact("Alice loves spider plants"),  # English: its words are enough
        fact("Bob hat Angst vor Spinnen", person="bob"),  # Bob forgot nothing
    )
    assert model.read == [] and sorted(stored) == [
        "Alice loves spider plants",
        "Bob hat Angst vor Spinnen",
    ]


@pytest.mark.asyncio
async def test_a_model_that_cannot_read_leaves_the_fact_judged_by_its_words(forgot):
    """A reading that fails (the model down) is no reading: the fact is judged by its own words, and
    the rest of the batch is stored."""
    model = Reader(NoAnswer("connection refused"))
    stored = await learn(
        forgot, model, fact("Alice hat Angst vor Spinnen"), fact("Alice bakes bread")
    )
    assert sorted(stored) == ["Alice bakes bread", "Alice hat Angst vor Spinnen"]


@pytest.mark.asyncio
async def test_saying_it_again_in_her_own_language_is_heard(forgot):
    forgot.clock.advance(60)
    said = say(forgot, "Ich habe wirklich Angst vor Spinnen", author="alice", dm_person="alice")
    thanks = say(forgot, "danke!", author="alice", dm_person="alice")
    assert (
        await learn(forgot, Reader(), fact("Alice hat Angst vor Spinnen", sources=(thanks,))) == []
    )
    assert await learn(forgot, Reader(), fact("Alice hat Angst vor Spinnen", sources=(said,))) == [
        "Alice hat Angst vor Spinnen"
    ]
    assert forgot.memories.tombstones.count() == 0  # said again: the forget is lifted


@pytest.mark.asyncio
async def test_someone_else_saying_it_in_another_language_lifts_nothing(forgot):
    """Bob, in a server after Alice's forget, says it of her in German: learned about Alice from
    his line, it is still held back, and her forget stays."""
    forgot.clock.advance(60)
    bobs = say(forgot, "Alice hat Angst vor Spinnen, lol", author="bob", guild="g1")
    assert await learn(forgot, Reader(), fact("Alice hat Angst vor Spinnen", sources=(bobs,))) == []
    assert forgot.memories.tombstones.count() == 1


@pytest.mark.parametrize(
    "text,is_foreign",
    [
        ("Alice hat Angst vor Spinnen", True),
        ("Alice est infirmière de nuit", True),
        ("Alice boit du lait d'avoine", True),
        ("Alice tiene diabetes tipo 1", True),
        ("Alice ha paura dei cani", True),
        ("Alice tem medo de altura", True),
        ("Alice schlafwandelt", True),
        ("Alice is a night-shift nurse", False),
        ("Alice keeps a tortoise called Quintrell", False),
        ("Alice was born in Tromsø", False),
        ("", False),
        ("\u200b", False),
    ],
)
def test_a_fact_is_foreign_by_its_little_words(text, is_foreign):
    assert foreign(text, frozenset({"alice"})) is is_foreign


def test_the_english_reading_is_one_line_of_a_sentence_s_length():
    assert english_reading('"Alice is afraid of spiders."\n\nNote: Angst means fear.') == (
        "Alice is afraid of spiders."
    )
    assert english_reading("x" * 1_000_000) == "x" * 300
    assert english_reading("") is None and english_reading("\n  \n") is None

"""A fact forgotten in another language is read in English too (LANG-4, ``memory.jobs.readings``):
its tombstone is laid again from the model's English reading, so an English wording, or a third
language's read in English, is known; the reading and the forgotten words never reach a file.

Also the marks that keep languages apart (``memory.write.traces``): the person's own name in
another alphabet weighs nothing, a pair of Chinese or Japanese characters cannot meet an English
word's mark by chance, a relative named by the relation is not what a fact is about, and a name of
two words is one name.
"""

from __future__ import annotations

import pytest
from conftest import remember

import prompts
from memory.engine import MemoryEngine
from memory.jobs.base import NoAnswer
from memory.jobs.readings import TombstoneReadings
from memory.upkeep.forgetting import forget_everything, forget_memory
from memory.write.name_keys import own_name_elsewhere, sound_key
from memory.write.tombstones import UNREAD_AT_MOST, unforgotten
from memory.write.traces import NAME, NAME_BITS, PAIR, Trace, Tracer, weighed
from tests.paraphrase_support import about

ITALIAN, READING = "Alice ha paura delle vespe", "Alice is afraid of wasps."


class Gloss:
    """The model reading a note in English (or failing as a model does)."""

    def __init__(self, answer: str = READING, fail: Exception | None = None) -> None:
        self.answer, self.fail = answer, fail
        self.asked: list[str] = []

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        assert system == prompts.render("gloss")
        self.asked.append(user)
        if self.fail is not None:
            raise self.fail
        return self.answer


async def read(engine: MemoryEngine, model: Gloss) -> int | None:
    job = TombstoneReadings(engine)
    plan = job.gather()
    if plan is None:
        return None
    try:
        return job.apply(plan, await job.ask(plan, model))
    except NoAnswer as exc:  # pragma: no cover - ask turns a failure into no reading
        return job.failed(plan, exc)


def held(engine: MemoryEngine, *texts: str) -> list[str]:
    return [t for t in texts if not unforgotten(engine, [about("alice", t)])]


@pytest.mark.asyncio
async def test_a_fact_forgotten_in_italian_holds_back_its_english_wording_once_read(engine):
    forget_memory(engine, remember(engine, ITALIAN).id)
    english = "Alice is scared of wasps"
    assert held(engine, english) == []  # the Italian words alone do not know it
    model = Gloss()
    assert await read(engine, model) == 1 and model.asked == [ITALIAN]
    assert held(engine, english, "Alice is afraid of wasps") == [
        english,
        "Alice is afraid of wasps",
    ]
    # what she did not forget is still learned, in English or Italian
    assert held(engine, "Alice is afraid of dogs", "Alice ha paura dei cani") == []
    assert await read(engine, model) is None  # each forgotten fact is read once


@pytest.mark.asyncio
async def test_neither_the_forgotten_words_nor_the_reading_reach_a_file(engine, tmp_path):
    forget_memory(engine, remember(engine, "Alice colleziona cartoline di Quintrellia").id)
    await read(engine, Gloss("Alice collects postcards of Quintrellia."))
    # the store, its WAL and its journals, as they are on disk
    written = b"".join(p.read_bytes().lower() for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) > 10_000
    for word in ("colleziona", "cartoline", "quintrellia", "postcards", "collects"):
        assert word.encode() not in written


@pytest.mark.asyncio
async def test_an_english_fact_is_never_read_and_a_model_that_fails_leaves_the_first_stone(
    engine,
):
    forget_memory(engine, remember(engine, "Alice is afraid of spiders").id)
    assert await read(engine, Gloss()) is None  # nothing to read: no model call
    forget_memory(engine, remember(engine, ITALIAN).id)
    assert await read(engine, Gloss(fail=NoAnswer("connection refused"))) == 0
    assert engine.memories.tombstones.count() == 2
    assert held(engine, "Alice ha sempre paura delle vespe") == [
        "Alice ha sempre paura delle vespe"
    ]


def test_what_waits_for_a_reading_is_bounded(engine):
    for i in range(UNREAD_AT_MOST + 5):
        forget_memory(engine, remember(engine, f"Alice ha un gatto di nome Micio{i}").id)
    waiting = engine.memories.tombstones.take_unread()
    assert len(waiting) == UNREAD_AT_MOST and waiting[-1].content.endswith(f"{UNREAD_AT_MOST + 4}")
    assert engine.memories.tombstones.take_unread() == ()


# -- the marks -------------------------------------------------------------------------------
def test_her_own_name_in_another_alphabet_weighs_nothing():
    assert sound_key("Алиса") == sound_key("Элис") == sound_key("Alice") == "ls"
    assert own_name_elsewhere("Алиса", ["Alice"]) and own_name_elsewhere("Αλίκη", ["Alike"])
    assert not own_name_elsewhere("Теодор", ["Alice"])
    assert not own_name_elsewhere("Alicia", ["Alice"])  # her alphabet: told apart exactly
    words = [w for _, w, _, _ in weighed("Брат Алисы, Теодор, работает в Скерроу", ["Alice"])]
    assert "Алисы" not in words and "Теодор" in words


def test_a_pair_of_characters_cannot_meet_a_word_by_chance():
    tracer = Tracer(bytes(range(32)))
    japanese = tracer.trace("user|alice", "アリスはクモが怖い", None, ["Alice"])
    english = tracer.trace("user|alice", "Alice is afraid of wasps", None, ["Alice"], synonyms=True)
    assert japanese.marks and all(m >> NAME_BITS == PAIR for m in japanese.marks)
    words = set(english.marks) | {a for alike in english.alike.values() for a in alike}
    assert all(m >> NAME_BITS != PAIR for m in words)


def test_a_tombstone_laid_before_still_knows_pairs_by_their_older_marks():
    tracer = Tracer(bytes(range(32)))
    word_like = tracer._mark("user|alice", "芒果")  # a pair's mark before pairs had their own
    later = tracer.trace("user|alice", "芒果", None, ["Alice"])
    assert Trace({word_like: 1}, None, version=1).matches(later)
    assert not Trace({word_like: 1}, None).matches(later)
    stone = tracer.trace("user|alice", "爱丽丝对芒果过敏", None, ["Alice"], synonyms=True)
    assert Trace.decode(*stone.encode()) == stone
    assert Trace.decode("00abc:1", "").version == 1


def test_a_relative_named_by_the_relation_and_a_name_of_two_words():
    weights = {w: n for _, w, _, n in weighed("Ernestina, Alice's grandmother, cooks well", [])}
    assert weights["grandmother"] == 1 and weights["Ernestina"] == NAME
    weights = {w: n for _, w, _, n in weighed("Alice hört gern Welle Nord", ["Alice"])}
    assert weights["Welle"] == weights["Nord"] == NAME
    first = {w: n for _, w, _, n in weighed("Стартовый номер — 5182", [])}
    assert first["Стартовый"] == 4  # a sentence's first word, not a name


@pytest.mark.asyncio
async def test_a_reading_lays_nothing_once_the_person_is_forgotten_whole(engine):
    """Forget everything removes a person's tombstones: a reading that comes after lays none."""
    forget_memory(engine, remember(engine, ITALIAN).id)
    job = TombstoneReadings(engine)
    plan = job.gather()
    assert plan is not None
    forget_everything(engine, ["alice"])
    assert engine.memories.tombstones.count() == 0
    assert job.apply(plan, await job.ask(plan, Gloss())) == 0
    assert engine.memories.tombstones.count() == 0

"""Words close in meaning (RET-3, docs/recall.md): the words channel also searches the words a thesaurus made from
MiniLM finds close to the question's own ("battery" -> charge), a row they find counting ``expand_weight`` of a
match on the question's words. The thesaurus ships with the package; nothing in it comes from a store."""

from __future__ import annotations

import gzip

import numpy as np
import pydantic
import pytest
from conftest import guild_ctx, say

import memory.recall.thesaurus as thesaurus
from memory.recall.retrieval import Channel
from memory.storage.fts import STOP_WORDS, FtsQueryBuilder
from memory.storage.knobs import MESSAGE_DEFAULTS
from memory.storage.pgsearch import tokenizer_db

WORDS = frozenset({Channel.FTS})
POWER_BANK = "I bought a portable power bank and a wireless charging pad last week"
CAKE = "we baked a lemon cake for the party"


@pytest.fixture
def engine(any_engine):
    """Every test here runs on SQLite and on PostgreSQL (the words channel is each engine's own)."""
    return any_engine


@pytest.fixture(scope="module")
def fts():
    """The words channel's own tokenizer and stemmer."""
    return FtsQueryBuilder(tokenizer_db(), "message_fts")


def _found(engine, question: str, **knobs) -> list[str]:
    if knobs:
        engine.knobs.update("messages", knobs)
    partitions = guild_ctx("g1", "dan").message_partitions()
    return [
        h.item.content
        for h in engine.messages.search_partitions(partitions, question, channels=WORDS, top_k=5)
    ]


def test_the_defaults_expand_history_searches_and_leave_memories_alone(engine):
    assert (MESSAGE_DEFAULTS.expand_weight, MESSAGE_DEFAULTS.expand_likeness) == (0.5, 0.6)
    assert engine.knobs.get("memories").expand_weight == 0.0


def test_a_question_in_other_words_finds_the_turn_by_the_words_close_to_its_own(engine):
    say(engine, POWER_BANK, author="ann", guild="g1")
    say(engine, CAKE, author="bob", guild="g1")
    question = "my phone battery is always low, what should I do?"
    # not one word of the question is in the turn
    assert _found(engine, question, expand_weight=0.0) == []
    # (the cake turn after it holds it as context)
    assert _found(engine, question, expand_weight=0.5)[0] == POWER_BANK


def test_a_match_on_the_questions_own_word_comes_before_a_match_on_a_close_one(engine):
    say(engine, "the car was charging all night", author="ann", guild="g1")
    say(engine, "my battery died on the train", author="bob", guild="g1")
    found = _found(engine, "battery")
    assert found == ["my battery died on the train", "the car was charging all night"]


def test_hostile_questions_are_searched_as_words_and_break_nothing(engine):
    say(engine, POWER_BANK, author="ann", guild="g1")
    for question in (
        "\u200b",
        "*",
        'battery" OR NEAR(charging pad) -x ^y',
        "battery " * 200_000,
        "électricité ☕ 🔋",
    ):
        assert isinstance(_found(engine, question), list)


def test_close_words_are_no_form_of_the_questions_words_and_come_in_rounds(fts):
    question = fts.terms("which phones, batteries or chargers lately")
    close = thesaurus.expand(question, fts.stem, 0.6)
    stems = {stem for _, stem in question}
    assert close and len(close) <= thesaurus.MAX_WORDS
    assert not {fts.stem(w) for w in close} & stems
    assert len({fts.stem(w) for w in close}) == len(close)
    # "phone" has many close neighbours (telephone, smartphone, iphone, ...): each word still brings its likest
    firsts = [
        next(w for w, like in thesaurus.neighbours(raw, stem) if fts.stem(w) not in stems)
        for raw, stem in question
    ]
    assert set(firsts) <= set(close)


def test_a_plural_the_thesaurus_lacks_is_looked_up_by_its_stem(fts):
    [(raw, stem)] = fts.terms("cuisines")
    assert thesaurus.neighbours(raw) == [] and thesaurus.neighbours(
        raw, stem
    ) == thesaurus.neighbours("cuisine")


def test_a_likeness_below_what_the_file_holds_is_refused(engine):
    assert (
        engine.knobs.update("messages", {"expand_likeness": thesaurus.MIN_STORED}).expand_likeness
        == thesaurus.MIN_STORED
    )
    with pytest.raises(pydantic.ValidationError, match="expand_likeness"):
        engine.knobs.update("messages", {"expand_likeness": thesaurus.MIN_STORED - 0.01})


def test_the_shipped_thesaurus_says_what_the_model_says(minilm, fts):
    with gzip.open(thesaurus.THESAURUS, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    assert len(lines) > 20_000
    for word, own, close in lines[::997]:  # ~20 words from the commonest to the rarest
        pairs = [(w, float(like)) for w, like in (item.rsplit(":", 1) for item in close.split())]
        assert own == fts.stem(word) and 0 < len(pairs) <= thesaurus.STORED
        assert [like for _, like in pairs] == sorted((like for _, like in pairs), reverse=True)
        assert all(like >= thesaurus.MIN_STORED for _, like in pairs)
        assert own not in {fts.stem(w) for w, _ in pairs}
        vectors = minilm.embed([word, *(w for w, _ in pairs)])
        measured = vectors[1:] @ vectors[0]
        assert np.allclose(measured, [like for _, like in pairs], atol=0.01), word


def test_building_keeps_the_likest_neighbours_one_form_a_stem(fts):
    words = ["football", "soccer", "soccers", "banana", "tennis"]
    vectors = np.array(
        [[1, 0, 0], [0.9, 0.1, 0], [0.88, 0.12, 0], [0, 0, 1], [0.7, 0.7, 0]], dtype=np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lines = {
        line.split("\t")[0]: line.split("\t") for line in thesaurus.build(words, vectors, fts.stem)
    }
    # "soccers" is soccer's stem again
    assert lines["football"][2].split() == [
        "soccer:0.99",
        "tennis:0.71",
    ]
    assert "banana" not in lines  # nothing close enough
    assert thesaurus.vocabulary(
        ["the", "running", "##ing", "ab", "café", "Paris", "x1"], STOP_WORDS
    ) == ["running"]

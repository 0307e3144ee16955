"""Normalised fusion (RET-3): BM25 and cosine both scaled over the query's own candidate pool, then blended.

relevance = (vector_weight * (cos - lowest) / (highest - lowest) + text_weight * bm25 / best_bm25) / (sum of weights)
over the rows the query's channels found. A cosine of 0 or less counts 0, and a pool whose cosines are all
alike (one row) keeps them as they are: scaling never makes an unrelated turn a perfect match.
"""

from __future__ import annotations

import pytest
from conftest import say

from memory.recall.retrieval import Channel
from memory.scopes import message_partition
from memory.storage.knobs import MEMORY_DEFAULTS, MESSAGE_DEFAULTS, Fusion

PARTITION = (message_partition("g1", ""),)
TURNS = [
    "we planted tomatoes and basil in the garden",
    "the garden needs water every morning",
    "my bike has a flat tyre again",
    "tomatoes need sun and water",
]


@pytest.fixture
def chat(engine):
    engine.knobs.update(
        "messages",
        {"fusion": "normalised", "context_weight": 0.0, "graph_seeds": 0, "speaker_boost": 0.0},
    )
    for text in TURNS:
        say(engine, text, author="ann", guild="g1", author_name="")
    return engine


def search(engine, query: str, channels: frozenset[Channel]):
    return engine.messages.search_partitions(PARTITION, query, top_k=10, channels=channels)


def test_the_messages_default_is_normalised_and_memories_keep_the_weighted_blend():
    assert MESSAGE_DEFAULTS.fusion is Fusion.NORMALISED
    # memories keep RET-3's default and its 0.5 threshold
    assert MEMORY_DEFAULTS.fusion is Fusion.WEIGHTED


def test_cosines_are_spread_over_the_pool_best_to_one_and_worst_to_zero(chat):
    every = chat.messages.retriever.corpus.vectors.get(list(range(1, len(TURNS) + 1)))
    query = chat.embeddings.embed_query("tomatoes garden water")
    cosines = [float(v @ query) for v in every.values()]
    hits = search(chat, "tomatoes garden water", frozenset({Channel.VECTOR}))
    # the pool's worst cosine scales to 0: no meaning, no words, so it is no hit (the bike turn shares nothing)
    assert [h.item.content for h in hits if "bike" in h.item.content] == [] and len(hits) == len(
        TURNS
    ) - 1
    share = MESSAGE_DEFAULTS.vector_weight  # of vector + text weights summing to 1
    for hit in hits:  # vector only: no text share, so relevance is the vector share of the cosine
        expected = share * (hit.cosine - min(cosines)) / (max(cosines) - min(cosines))
        assert hit.relevance == pytest.approx(expected, abs=1e-6)
    assert hits[0].relevance == pytest.approx(share)


def test_the_best_row_of_both_channels_has_full_relevance(chat):
    top = search(chat, "tomatoes basil garden", frozenset({Channel.VECTOR, Channel.FTS}))[0]
    assert top.item.content == TURNS[0]
    assert top.text_score == pytest.approx(1.0) and top.relevance == pytest.approx(1.0)


def test_a_pool_of_one_is_not_divided_by_zero(engine):
    engine.knobs.update(
        "messages", {"fusion": "normalised", "context_weight": 0.0, "graph_seeds": 0}
    )
    say(engine, "we planted tomatoes in the garden", author="ann", guild="g1", author_name="")
    (hit,) = search(engine, "tomatoes", frozenset({Channel.VECTOR, Channel.FTS}))
    assert 0 < hit.cosine < 1  # nothing to spread over: the cosine counts as it is
    knobs = MESSAGE_DEFAULTS
    assert hit.relevance == pytest.approx(knobs.vector_weight * hit.cosine + knobs.text_weight)


def test_a_pool_of_one_unrelated_turn_is_no_hit(engine):
    """Scaling must not turn the only candidate of a pool into a perfect match: no words, no meaning, no hit."""
    engine.knobs.update("messages", {"fusion": "normalised"})
    say(engine, "Cool, tell me more about it", author="yuri", guild="g1")
    assert search(engine, "zorbing", frozenset(Channel)) == []


def test_the_order_of_a_single_channel_is_unchanged_by_scaling(chat):
    """Min-max scaling is monotonic: the vector channel alone ranks exactly as the raw cosines do."""
    chat.knobs.update("messages", {"weights": {"semantic": 1.0, "recency": 0.0, "importance": 0.0}})
    hits = search(chat, "water for the garden", frozenset({Channel.VECTOR}))
    assert [h.cosine for h in hits] == sorted((h.cosine for h in hits), reverse=True)


def test_without_embeddings_normalised_fusion_is_bm25_alone(bm25_engine):
    bm25_engine.knobs.update("messages", {"fusion": "normalised"})
    for text in TURNS:
        say(bm25_engine, text, author="ann", guild="g1", author_name="")
    hits = search(bm25_engine, "tomatoes water", frozenset(Channel))
    assert hits and all(h.cosine is None for h in hits)
    assert hits[0].relevance == pytest.approx(hits[0].text_score) == pytest.approx(1.0)


@pytest.mark.parametrize("query", ["\u200b", "", "   ", "((", "x" * 5_000])
def test_queries_with_nothing_to_match_do_not_break_the_scaling(chat, query):
    hits = search(chat, query, frozenset(Channel))
    assert all(0.0 <= h.relevance <= 1.0 + 1e-9 for h in hits)

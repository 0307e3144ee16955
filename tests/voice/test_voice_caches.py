"""VOICE-3 session caches on a real store: the behavioural fact pool and the conversation history cache."""

from __future__ import annotations

import pytest
from conftest import contents, guild_ctx, remember, say

from memory.models import FactKind, NewMemory, Scope
from voice.caches import BehaviouralPool, CacheSettings, HistoryCache, jaccard, tokens


@pytest.fixture
def ctx():
    return guild_ctx("g1", "alice", "alice", "bob")


def rule(
    engine, content, *, kind=FactKind.BEHAVIORAL, scope=Scope.GUILD, scope_id="g1", importance=5.0
):
    return remember(
        engine,
        content,
        subject="voice manner",
        scope=scope,
        scope_id=scope_id,
        kind=kind,
        importance=importance,
    )


# -- behavioural fact pool ---------------------------------------------------------------------------
def test_voice_caches_behavioural_pool_holds_at_most_64_rules_read_from_the_store_once(engine, ctx):
    engine.memories.insert_batch(
        [
            (
                NewMemory(
                    f"Rule {i}: answer topic {i} in one sentence",
                    f"rule {i}",
                    Scope.GUILD,
                    "g1",
                    kind=FactKind.BEHAVIORAL,
                    importance=1 + i % 9,
                ),
                None,
            )
            for i in range(70)
        ]
    )
    remember(engine, "Alice likes tea", scope=Scope.GUILD, scope_id="g1", kind=FactKind.PREFERENCE)
    pool = BehaviouralPool(engine.memory_rows)
    for turn in ("topic 3 please", "and topic 7", "what about topic 69"):
        pool.facts(ctx, turn)
    assert len(pool.pool(ctx)) == 64
    assert {m.kind for m in pool.pool(ctx)} == {FactKind.BEHAVIORAL}
    assert pool.loads == 1


def test_voice_caches_behavioural_pool_reranks_by_the_words_of_each_turn_and_keeps_importance_order_on_ties(
    engine, ctx
):
    rule(engine, "Keep spoken answers under three sentences", importance=9)
    rule(engine, "Never spoil the ending of a movie for Bob", importance=5)
    rule(engine, "Call Alice by her nickname Al", kind=FactKind.GUIDANCE, importance=7)
    pool = BehaviouralPool(engine.memory_rows, CacheSettings(pool_top_n=2))
    assert [m.content for m in pool.facts(ctx, "how did that movie end, Bob?")] == [
        "Never spoil the ending of a movie for Bob",
        "Keep spoken answers under three sentences",
    ]
    assert [m.content for m in pool.facts(ctx, "what should I call Alice")] == [
        "Call Alice by her nickname Al",
        "Keep spoken answers under three sentences",
    ]
    assert [m.content for m in pool.facts(ctx, "mhm")] == [  # no word matches: importance decides
        "Keep spoken answers under three sentences",
        "Call Alice by her nickname Al",
    ]
    assert pool.loads == 1


def test_voice_caches_a_new_participant_set_reads_its_own_pool_with_only_what_it_may_see(
    engine, ctx
):
    # said by Carol in this server
    engine.memories.add(
        NewMemory(
            "Speak slowly when Carol is around",
            "voice manner",
            Scope.USER,
            "carol",
            kind=FactKind.BEHAVIORAL,
            guild_id="g1",
        )
    )
    pool = BehaviouralPool(engine.memory_rows)
    assert pool.facts(ctx, "hello") == []
    joined = guild_ctx("g1", "alice", "alice", "bob", "carol")
    assert contents(pool.facts(joined, "hello")) == {"Speak slowly when Carol is around"}
    assert pool.loads == 2


def test_voice_caches_invalidate_drops_the_pool_so_a_forgotten_rule_is_not_served(engine, ctx):
    forgotten = rule(engine, "Never mention the surprise party")
    pool = BehaviouralPool(engine.memory_rows)
    assert contents(pool.facts(ctx, "party")) == {"Never mention the surprise party"}
    engine.memories.delete(forgotten.id)
    pool.invalidate()
    assert pool.facts(ctx, "party") == []
    assert pool.loads == 2


# -- conversation history cache -----------------------------------------------------------------------
@pytest.fixture
def history(engine, ctx):
    """The real history search, with a log of the queries that reached the store."""
    say(engine, "the raid starts at nine on saturday", author="alice", guild="g1")
    say(engine, "bring the healing potions to the raid", author="bob", guild="g1")
    asked: list[str] = []

    def search(query):
        asked.append(query)
        return tuple(engine.messages.search(ctx, query))

    search.asked = asked
    return search


def test_voice_caches_history_cache_reuses_a_recall_for_a_similar_query_within_45_seconds(
    engine, clock, history
):
    cache = HistoryCache(clock)
    first = cache.get_or_fetch("when does the raid start on saturday", history)
    clock.advance(30)
    # {raid, start} of {raid, start, saturday}: J = 0.67
    again = cache.get_or_fetch("so when does the raid start", history)
    assert again == first and "the raid starts at nine on saturday" in contents(first)
    assert history.asked == ["when does the raid start on saturday"]
    assert (cache.hits, cache.misses) == (1, 1)


def test_voice_caches_history_cache_asks_again_after_45_seconds_or_for_a_different_query(
    clock, history
):
    cache = HistoryCache(clock)
    cache.get_or_fetch("when does the raid start on saturday", history)
    cache.get_or_fetch("who brings the healing potions", history)
    clock.advance(45)
    cache.get_or_fetch("when does the raid start on saturday", history)
    assert history.asked == [
        "when does the raid start on saturday",
        "who brings the healing potions",
        "when does the raid start on saturday",
    ]


def test_voice_caches_history_cache_lets_a_filler_reuse_the_latest_result_and_invalidate_empties_it(
    clock, history
):
    cache = HistoryCache(clock)
    latest = cache.get_or_fetch("who brings the healing potions", history)
    assert cache.get_or_fetch("mhm, okay", history) == latest
    cache.invalidate()
    cache.get_or_fetch("who brings the healing potions", history)
    assert history.asked == ["who brings the healing potions"] * 2


def test_voice_caches_history_cache_never_hands_a_result_to_another_scope(clock, history):
    cache = HistoryCache(clock)
    cache.get_or_fetch("when does the raid start", history, scope=("guild|g1",))
    cache.get_or_fetch("when does the raid start", history, scope=("dm|alice",))
    assert len(history.asked) == 2


def test_voice_caches_jaccard_threshold_reuses_three_shared_words_of_four_but_not_two():
    settings = CacheSettings()
    base = tokens("healing potions for the raid tonight")
    assert base == {"healing", "potion", "raid", "tonight"}
    # one word swapped
    assert (
        jaccard(base, tokens("healing potions raid tomorrow")) == 3 / 5 >= settings.history_jaccard
    )
    assert jaccard(base, tokens("healing potions raid")) >= settings.history_jaccard
    assert (
        jaccard(base, tokens("healing potions, the dungeon and the boss"))
        == 2 / 6
        < settings.history_jaccard
    )

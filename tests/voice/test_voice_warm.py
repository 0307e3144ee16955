"""VOICE-2 warm memory, on a real store with the real offline embedder (MiniLM) and a fake clock.

The turns below were measured with MiniLM: the camping paraphrases sit at cosine 0.8-0.95 to the running
fingerprint (the turn lifted by its context), the violin turn at 0.53-0.56, under ``full_below`` (SPEC VOICE-2: 0.65).
"""

from __future__ import annotations

import pytest
from conftest import contents, guild_ctx, remember

from memory.models import FactKind, NewMemory, Scope
from voice.warm import (
    Decision,
    Retrieval,
    WarmMemory,
    WarmSettings,
    cosine,
    is_low_signal,
    memory_retrieval,
)

CAMPING = [
    "I'm planning a camping trip to the lake district next weekend",
    "The camping trip to the lake district is next weekend and I need a tent",
    "For the camping trip I need a tent that works in the lake district rain",
    "Which tent should I bring camping in the lake district next weekend",
    "camping in the lake district next weekend, what tent do I bring",
]
VIOLIN = "My sister wants to learn to play the violin"


class Counted:
    """The real store retrieval, with a log of which path ran for which turn."""

    def __init__(self, retrieval: Retrieval):
        self.inner, self.calls, self.searched = retrieval, [], []

    def retrieval(self) -> Retrieval:
        def full(text, vector):
            self.calls.append(("full", text))
            return self.inner.full(text, vector)

        def lexical(text, warm, new_words):
            self.calls.append(("lexical", text))
            self.searched.append(new_words)
            return self.inner.lexical(text, warm, new_words)

        return Retrieval(full, lexical, self.inner.scope)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.calls if k == kind)


@pytest.fixture
def ctx():
    return guild_ctx("g1", "alice", "alice", "bob")


@pytest.fixture
def stored(minilm_engine):
    for text in (
        "Alice owns a bright orange two-person tent",
        "Alice goes camping in the Lake District every summer",
        "Alice's sister Jo is learning the violin",
        "Bob fixes Rust borrow checker errors for fun",
    ):
        remember(minilm_engine, text, scope=Scope.GUILD, scope_id="g1")
    return minilm_engine


@pytest.fixture
def embeds(stored):
    """The turn embedder the session uses, with a log of every text it embedded (texts of one run in order)."""
    log: list[str] = []

    def embed(texts):
        log.extend(texts)
        return stored.embeddings.embed_queries(texts)

    embed.log = log
    return embed


@pytest.fixture
def warm(embeds, clock):
    return WarmMemory(embeds, clock)


def run(warm, counted, turns, clock=None, gap=5.0):
    results = []
    for text in turns:
        results.append(warm.turn(text, counted.retrieval()))
        if clock is not None:
            clock.advance(gap)
    return results


def test_voice_warm_a_stretch_of_same_topic_turns_reuses_the_snapshot_after_one_full_retrieval(
    warm, stored, ctx, clock
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    results = run(warm, counted, CAMPING, clock)
    assert [r.record.decision for r in results][0] is Decision.FULL
    # every word of it was searched for by the turns before
    assert results[-1].record.decision is Decision.REUSE
    assert counted.count("full") == 1
    assert "Alice goes camping in the Lake District every summer" in contents(results[-1].snapshot)


def test_voice_warm_a_clear_topic_change_triggers_a_full_retrieval_and_a_new_snapshot(
    warm, stored, ctx, clock
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    run(warm, counted, CAMPING[:2], clock)
    changed = warm.turn(VIOLIN, counted.retrieval())
    assert (changed.record.decision, changed.record.reason) == (Decision.FULL, "drift")
    assert changed.record.similarity < WarmSettings().full_below
    assert "Alice's sister Jo is learning the violin" in contents(changed.snapshot)
    assert counted.calls[-1] == ("full", VIOLIN)


def test_voice_warm_a_moderately_similar_turn_refreshes_lexically_without_a_full_retrieval(
    warm, stored, ctx
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    tent = "Alice owns a bright orange two-person tent"
    first = warm.turn(CAMPING[0], counted.retrieval())
    # the same topic, but a word not searched yet, "tent"
    moved = warm.turn(CAMPING[1], counted.retrieval())
    assert moved.record.decision is Decision.REFRESH
    assert counted.calls == [("full", CAMPING[0]), ("lexical", CAMPING[1])]
    assert tent not in contents(first.snapshot)
    assert contents(moved.snapshot) == contents(first.snapshot) | {tent}
    # BM25 brought it, no vector search
    assert next(h.channels for h in moved.snapshot if h.item.content == tent) == ("fts",)


def test_voice_warm_a_short_follow_up_is_judged_with_the_turns_before_it_and_a_new_topic_still_is_not(
    warm, stored, ctx, embeds
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    follow_up, practice, back = (
        "I need a warmer sleeping bag",
        "she practises every evening",
        "anyway, back to the camping trip",
    )
    # Alone, the follow-up is no camping turn for MiniLM: cosine 0.33 to the fingerprint would be a full retrieval.
    assert (
        cosine(stored.embeddings.embed_query(follow_up), stored.embeddings.embed_query(CAMPING[0]))
        < WarmSettings().full_below
    )
    results = run(warm, counted, [CAMPING[0], follow_up, VIOLIN, practice, back])
    assert [(r.record.decision, r.record.reason) for r in results] == [
        (Decision.FULL, "cold"),
        (Decision.REFRESH, "moved"),
        (Decision.FULL, "drift"),
        (Decision.REFRESH, "moved"),
        (Decision.FULL, "drift"),
    ]
    # the camping context did not carry the violin
    assert results[2].record.similarity < WarmSettings().full_below
    assert counted.calls[2] == ("full", VIOLIN)  # the full retrieval searches for the turn itself


def test_voice_warm_a_turn_in_the_topics_own_words_is_refreshed_unembedded_searching_only_its_new_words(
    warm, stored, ctx, embeds
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    results = run(warm, counted, [CAMPING[0], CAMPING[1], "the tent for the lake district trip"])
    assert [(r.record.decision, r.record.reason) for r in results] == [
        (Decision.FULL, "cold"),
        (
            Decision.REFRESH,
            "known-words",
        ),  # 6 of its 8 words were the first turn's: BM25 for "need" and "tent" alone
        (
            Decision.REUSE,
            "known-words",
        ),  # every word searched: the snapshot stands, nothing is read
    ]
    assert counted.searched == [frozenset({"need", "tent"})]
    assert embeds.log == [CAMPING[0]]
    assert "Alice owns a bright orange two-person tent" in contents(results[1].snapshot)


def test_voice_warm_a_turn_naming_the_topic_but_turning_to_another_still_gets_the_new_topics_memory(
    warm, stored, ctx, embeds
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    turned = "forget the camping trip, my sister has a violin recital on friday"
    results = run(warm, counted, [CAMPING[0], turned])
    # two of its seven words are the topic's: judged by its embedding
    assert embeds.log == [
        CAMPING[0],
        turned,
    ]
    assert "Alice's sister Jo is learning the violin" in contents(results[1].snapshot)


def test_voice_warm_runs_the_model_once_per_turn_on_the_turn_alone(warm, stored, ctx, embeds):
    turns = [
        CAMPING[0],
        "I need a warmer sleeping bag",
        "yeah",
        VIOLIN,
        "she practises every evening",
    ]
    run(warm, Counted(memory_retrieval(stored.recall, ctx)), turns)
    # the context lifts a turn through the vectors of the turns before it, made when they were judged: no second run
    assert embeds.log == [t for t in turns if t != "yeah"]


def test_voice_warm_a_repeated_turn_is_not_embedded_again_until_a_forget_drops_the_cached_vectors(
    warm, stored, ctx, embeds
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    # back to the trip, in the same words
    results = run(warm, counted, [CAMPING[0], VIOLIN, CAMPING[0]])
    assert [r.record.reason for r in results] == ["cold", "drift", "drift"]
    assert embeds.log == [CAMPING[0], VIOLIN]
    warm.invalidate()  # a forget: no vector of a forgotten turn may stay in the process (SEC-3)
    run(warm, counted, [VIOLIN])
    assert embeds.log == [CAMPING[0], VIOLIN, VIOLIN]


def test_voice_warm_keeps_at_most_vector_cache_turn_vectors(stored, ctx, clock, embeds):
    warm = WarmMemory(embeds, clock, WarmSettings(vector_cache=2, known_share=None))
    counted = Counted(memory_retrieval(stored.recall, ctx))
    run(warm, counted, [CAMPING[0], CAMPING[1], CAMPING[2], CAMPING[0]])
    # the oldest went when the third came
    assert embeds.log == [
        CAMPING[0],
        CAMPING[1],
        CAMPING[2],
        CAMPING[0],
    ]


def test_voice_warm_without_context_turns_a_turn_is_judged_alone(stored, ctx, clock, embeds):
    warm = WarmMemory(embeds, clock, WarmSettings(context_turns=0))
    counted = Counted(memory_retrieval(stored.recall, ctx))
    results = run(warm, counted, [CAMPING[0], "I need a warmer sleeping bag"])
    assert [r.record.decision for r in results] == [Decision.FULL, Decision.FULL]
    assert embeds.log == [CAMPING[0], "I need a warmer sleeping bag"]


def test_voice_warm_snapshot_expires_five_minutes_after_its_full_retrieval(
    warm, stored, ctx, clock
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    warm.turn(CAMPING[3], counted.retrieval())
    clock.advance(299)
    assert warm.turn(CAMPING[4], counted.retrieval()).record.decision is Decision.REUSE
    clock.advance(1)
    expired = warm.turn(CAMPING[4], counted.retrieval())
    assert (expired.record.decision, expired.record.reason) == (Decision.FULL, "expired")
    assert counted.count("full") == 2


def test_voice_warm_filler_turns_reuse_the_snapshot_without_being_embedded(
    warm, stored, ctx, embeds
):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    first = warm.turn(CAMPING[0], counted.retrieval())
    results = run(warm, counted, ["yeah", "ok", "mhm", "uh huh", "Okay, got it."])
    assert {(r.record.decision, r.record.reason) for r in results} == {
        (Decision.REUSE, "low-signal")
    }
    assert all(r.snapshot == first.snapshot for r in results)
    assert embeds.log == [CAMPING[0]]
    assert counted.count("full") == 1


def test_voice_warm_low_signal_rule_takes_fillers_and_tiny_turns_but_not_short_topics():
    assert all(
        is_low_signal(t) for t in ("yeah", "OK!", "mhm", "uh huh", "k", "hm", "yeah yeah okay", "")
    )
    assert not any(
        is_low_signal(t) for t in ("tent?", "Rust", "what about the violin", "yeah but which tent")
    )


def test_voice_warm_counts_hits_per_decision_for_the_hit_rate(warm, stored, ctx, clock):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    run(warm, counted, [*CAMPING, "mhm", VIOLIN], clock)
    stats = warm.stats
    assert stats.turns == 7 == len(warm.log)
    assert stats.full == counted.count("full") == 2
    assert stats.refresh == counted.count("lexical")
    assert stats.hits == stats.reuse + stats.refresh == 5
    assert stats.hit_rate == pytest.approx(5 / 7)


def test_voice_warm_invalidate_drops_the_warm_copy_of_forgotten_text(warm, stored, ctx):
    counted = Counted(memory_retrieval(stored.recall, ctx))
    tent = "Alice owns a bright orange two-person tent"
    before = warm.turn(CAMPING[3], counted.retrieval()).snapshot
    stored.memories.delete(next(h.item.id for h in before if h.item.content == tent))
    warm.invalidate()
    after = warm.turn(CAMPING[4], counted.retrieval())
    assert (after.record.decision, after.record.reason) == (Decision.FULL, "cold")
    assert tent not in contents(after.snapshot)


def test_voice_warm_a_changed_participant_set_never_gets_the_other_scopes_snapshot(
    warm, stored, ctx
):
    carol = "Carol's camping tent for the lake district is a green tarp shelter"
    stored.memories.add(
        NewMemory(carol, "carol tent", Scope.USER, "carol", kind=FactKind.PREFERENCE, guild_id="g1")
    )
    with_carol = guild_ctx("g1", "alice", "alice", "bob", "carol")
    assert carol in contents(
        warm.turn(
            CAMPING[3], Counted(memory_retrieval(stored.recall, with_carol)).retrieval()
        ).snapshot
    )
    counted = Counted(memory_retrieval(stored.recall, ctx))  # Carol left the channel
    after = warm.turn(CAMPING[4], counted.retrieval())
    assert (after.record.decision, after.record.reason) == (Decision.FULL, "scope")
    assert carol not in contents(after.snapshot)


def test_voice_warm_on_topic_turns_of_a_scripted_conversation_hold_what_a_cold_recall_finds(
    warm, stored, ctx, clock
):
    for text in (
        "Alice cooks on a small gas stove when camping",
        "Alice needs a warm sleeping bag because the lake district nights are cold",
        "Alice's favourite campsite has a lake she swims in",
    ):
        remember(stored, text, scope=Scope.GUILD, scope_id="g1")
    talk = [
        CAMPING[0],
        "which tent should I bring",
        "yeah",
        "we will cook on the gas stove when camping",
        "I need a warmer sleeping bag for the cold nights",
        "can we swim in the lake at the campsite",
        CAMPING[4],
    ]
    retrieval = memory_retrieval(stored.recall, ctx)
    served = []
    for text in talk:
        result = warm.turn(text, retrieval)
        clock.advance(5)
        if result.record.decision is not Decision.FULL:
            vector = stored.embeddings.embed_query(text)
            cold = stored.recall.recall(
                ctx, text, top_k=stored.knobs.get("memories").top_k + 8, query_vector=vector
            )
            served.append((text, contents(cold), contents(cold) - contents(result.snapshot)))
    assert len(served) >= len(talk) - 2  # the conversation stayed warm...
    assert [
        (text, missing) for text, _, missing in served if missing
    ] == []  # ...and lost nothing a cold recall finds
    found = set().union(*(cold for _, cold, _ in served))
    assert {
        "Alice cooks on a small gas stove when camping",
        "Alice's favourite campsite has a lake she swims in",
    } <= found

"""RET-3/5/6 and MAINT-2/3 against the seeds' formulas, with time from a FakeClock.

temporal  = min(1, exp(-0.05 * days) * (1 + 0.02 * access_count)), 1.0 for guidance/behavioral/profile
score     = 0.6 * relevance + 0.2 * temporal + 0.2 * importance / 10
relevance = 0.7 * cosine + 0.3 * bm25 / best_bm25   (weighted fusion; RRF: rank based)
"""

from __future__ import annotations

import math

import pydantic
import pytest
from conftest import contents, count, dm_ctx, remember

from memory.clock import DAY
from memory.engine import MemoryEngine
from memory.models import EntityRef, FactKind, MemoryType, Visibility
from memory.storage.knobs import Fusion, Weights
from memory.upkeep.maintenance import decay, prune, prune_entities
from memory.write.store import RecallFilters

CTX = dm_ctx("alice")


def seed_temporal(days: float, access: int) -> float:
    return min(1.0, math.exp(-0.05 * days) * (1 + 0.02 * access))


def row_of(engine, memory_id):
    return engine.db.one("SELECT * FROM memories WHERE id = ?", (memory_id,))


# -- temporal decay with reinforcement ------------------------------------------------------------------
@pytest.mark.parametrize("days", [0, 0.5, 1, 7, 30, 365])
@pytest.mark.parametrize("access", [0, 3, 40])
def test_temporal_follows_the_seed_formula(engine, clock, days, access):
    memory = remember(engine, "Alice went to a jazz concert", scope_id="alice")
    engine.recall.note_access([memory.rid] * access)
    engine.recall.flush_access()
    clock.advance(days * DAY)
    row = row_of(engine, memory.id)
    assert row["access_count"] == access
    got = engine.recall.retriever.temporal(row, engine.knobs.get("memories"), clock.now())
    assert got == pytest.approx(seed_temporal(days, access), rel=1e-12)


def test_temporal_counts_days_since_the_last_access(engine, clock):
    memory = remember(engine, "Alice went to a jazz concert", scope_id="alice")
    clock.advance(20 * DAY)
    engine.recall.note_access([memory.rid])
    engine.recall.flush_access()
    clock.advance(2 * DAY)
    got = engine.recall.retriever.temporal(
        row_of(engine, memory.id), engine.knobs.get("memories"), clock.now()
    )
    assert got == pytest.approx(seed_temporal(2, 1))


@pytest.mark.parametrize("kind", [FactKind.GUIDANCE, FactKind.BEHAVIORAL, FactKind.PROFILE])
def test_exempt_kinds_never_fade(engine, clock, kind):
    memory = remember(engine, "Alice is a retired marine biologist", scope_id="alice", kind=kind)
    clock.advance(400 * DAY)
    assert (
        engine.recall.retriever.temporal(
            row_of(engine, memory.id), engine.knobs.get("memories"), clock.now()
        )
        == 1.0
    )


def test_a_changed_decay_rate_is_used(engine, clock):
    memory = remember(engine, "Alice went to a jazz concert", scope_id="alice")
    engine.knobs.update("memories", {"decay_rate": 0.5, "access_bonus": 0.0})
    clock.advance(3 * DAY)
    got = engine.recall.retriever.temporal(
        row_of(engine, memory.id), engine.knobs.get("memories"), clock.now()
    )
    assert got == pytest.approx(math.exp(-1.5))


# -- the composite score ---------------------------------------------------------------------------------
@pytest.fixture
def scored(engine, clock):
    remember(engine, "Alice plays chess every Tuesday at the club", scope_id="alice", importance=9)
    clock.advance(10 * DAY)
    remember(
        engine,
        "Alice is teaching her nephew chess openings",
        scope_id="alice",
        importance=3,
        kind=FactKind.PROFILE,
    )
    clock.advance(3 * DAY)
    remember(engine, "Alice bought a new bicycle", scope_id="alice", importance=6)
    clock.advance(1 * DAY)
    return engine


def test_score_is_the_weighted_sum_of_relevance_recency_and_importance(scored, clock, embedder):
    hits = scored.recall.recall(CTX, "chess club", threshold=0)
    assert len(hits) == 3
    for h in hits:
        m = h.item
        days = (clock.now() - max(m.updated_at, m.last_accessed_at or 0)) / DAY
        temporal = 1.0 if m.kind == "profile" else seed_temporal(days, m.access_count)
        assert h.score == pytest.approx(
            0.6 * h.relevance + 0.2 * temporal + 0.2 * m.importance / 10, abs=1e-9
        )
        # relevance is the 0.7/0.3 blend of the true cosine and the normalised BM25
        assert h.cosine == pytest.approx(embedder.cosine("chess club", m.content), abs=1e-5)
        assert h.relevance == pytest.approx(0.7 * max(0.0, h.cosine) + 0.3 * h.text_score, abs=1e-9)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert (
        hits[0].item.content == "Alice plays chess every Tuesday at the club"
        and hits[0].text_score == 1.0
    )


def test_default_threshold_drops_weak_hits(scored):
    all_hits = scored.recall.recall(CTX, "chess club", threshold=0)
    default = scored.recall.recall(CTX, "chess club")
    assert [h.item.id for h in default] == [h.item.id for h in all_hits if h.score >= 0.5]
    assert len(default) < len(all_hits)


def test_bm25_only_relevance_is_the_normalised_text_score(bm25_engine):
    remember(bm25_engine, "Alice plays chess every Tuesday at the club", scope_id="alice")
    remember(bm25_engine, "Alice is teaching her nephew chess openings", scope_id="alice")
    hits = bm25_engine.recall.recall(CTX, "chess club", threshold=0)
    assert [h.text_score for h in hits][0] == 1.0 and 0 < hits[1].text_score < 1
    assert all(h.cosine is None and h.relevance == h.text_score for h in hits)


def test_a_per_call_weight_override_changes_the_ranking(engine, clock):
    important = remember(
        engine, "Alice's passport expires in March", scope_id="alice", importance=10
    )
    clock.advance(200 * DAY)
    relevant = remember(
        engine, "Alice loves rock climbing and bouldering", scope_id="alice", importance=1
    )
    default = engine.recall.recall(CTX, "rock climbing", threshold=0)
    assert default[0].item.id == relevant.id
    by_importance = engine.recall.recall(
        CTX, "rock climbing", threshold=0, weights=Weights(semantic=0, recency=0, importance=1)
    )
    assert by_importance[0].item.id == important.id
    assert by_importance[0].score == pytest.approx(1.0)


def test_the_tool_passes_weights_through(engine, clock):
    import json

    from memory.tools import MemoryTools

    remember(engine, "Alice's passport expires in March", scope_id="alice", importance=10)
    clock.advance(200 * DAY)
    remember(engine, "Alice loves rock climbing and bouldering", scope_id="alice", importance=1)
    tools = MemoryTools(engine, CTX)
    plain = json.loads(tools.call("memory_search", json.dumps({"query": "rock climbing"})))[
        "results"
    ]
    biased = json.loads(
        tools.call(
            "memory_search",
            json.dumps(
                {
                    "query": "rock climbing",
                    "weights": {"semantic": 0, "recency": 0, "importance": 1},
                }
            ),
        )
    )["results"]
    assert plain[0]["content"].startswith("Alice loves rock") and biased[0]["content"].startswith(
        "Alice's passport"
    )
    assert tools.call(
        "memory_search",
        json.dumps({"query": "x", "weights": {"semantic": 0, "recency": 0, "importance": 0}}),
    ).startswith("Error:")


# -- fusion and knobs (hot reload) ------------------------------------------------------------------------
def test_rrf_fusion_is_switched_on_by_a_knob_without_restart(engine, embedder):
    memory = remember(engine, "Alice grows tomatoes on her balcony", scope_id="alice")
    before = engine.recall.recall(CTX, "tomatoes balcony", threshold=0)[0]
    assert before.relevance == pytest.approx(0.7 * before.cosine + 0.3 * 1.0)
    assert engine.knobs.update("memories", {"fusion": "rrf"}).fusion is Fusion.RRF
    after = engine.recall.recall(CTX, "tomatoes balcony", threshold=0)[0]
    assert after.item.id == memory.id
    # rank 0 in both the vector and the FTS channel: 2 / (60 + 1), scaled by (60 + 1) / 2
    assert after.relevance == pytest.approx(1.0)
    assert after.score == pytest.approx(0.6 * 1.0 + 0.2 * 1.0 + 0.2 * 0.5)


def test_rrf_relevance_from_one_channel_is_half(engine):
    remember(engine, "Alice grows tomatoes on her balcony", scope_id="alice")
    engine.knobs.update("memories", {"fusion": "rrf"})
    # found by the vector and recent channels only
    (hit,) = engine.recall.recall(CTX, "zzzz unrelated", threshold=0)
    assert "fts" not in hit.channels and "vector" in hit.channels
    assert hit.relevance == pytest.approx(0.5)


def test_knobs_changed_by_another_process_apply_on_the_next_recall(engine, tmp_path):
    remember(engine, "Alice grows tomatoes on her balcony", scope_id="alice")
    assert engine.knobs.get("memories").top_k == 10
    other = MemoryEngine(engine.db.path, None, engine.clock)
    other.knobs.update("memories", {"fusion": "rrf", "top_k": 3})
    other.close()
    assert (
        engine.knobs.get("memories").fusion is Fusion.RRF
        and engine.knobs.get("memories").top_k == 3
    )
    assert engine.recall.recall(CTX, "tomatoes balcony", threshold=0)[0].relevance == pytest.approx(
        1.0
    )


@pytest.mark.parametrize(
    "change, field",
    [
        ({"fusion": "borda"}, "fusion"),
        ({"top_k": 0}, "top_k"),
        ({"weights": {"semantic": 2}}, "weights.semantic"),
        ({"decay_rate": -1}, "decay_rate"),
        ({"topK": 5}, "topK"),
        ({"vector_weight": 0, "text_weight": 0}, "text_weight"),
    ],
)
def test_an_invalid_knob_is_refused_naming_the_field(engine, change, field):
    with pytest.raises(pydantic.ValidationError) as err:
        engine.knobs.update("memories", change)
    assert field in str(err.value)
    # still the defaults
    assert engine.knobs.get("memories") == engine.knobs.get("memories").model_validate({})
    assert engine.db.get_setting("recall.memories") is None


def test_a_partial_weight_change_keeps_the_other_weights(engine):
    knobs = engine.knobs.update("memories", {"weights": {"recency": 0.5}})
    assert (knobs.weights.semantic, knobs.weights.recency, knobs.weights.importance) == (
        0.6,
        0.5,
        0.2,
    )


def test_mmr_keeps_a_near_copy_from_crowding_out_the_rest(engine):
    text = "Alice loves hiking in the alps every summer"
    remember(engine, text, scope_id="alice")
    # the same fact, in her DM partition
    remember(engine, text, scope_id="alice", visibility=Visibility.PRIVATE)
    other = remember(engine, "Alice loves hiking near the lake", scope_id="alice")
    plain = engine.recall.recall(CTX, "Alice loves hiking in the alps", threshold=0, top_k=2)
    assert contents(plain) == {text}
    engine.knobs.update("memories", {"mmr": True})
    diverse = engine.recall.recall(CTX, "Alice loves hiking in the alps", threshold=0, top_k=2)
    assert contents(diverse) == {text, other.content}


# -- reinforcement (RET-5) -------------------------------------------------------------------------------
def test_recall_queues_access_and_flush_applies_it_in_one_batch(engine, clock):
    a = remember(engine, "Alice collects vinyl records", scope_id="alice")
    b = remember(engine, "Alice's favourite band is Portishead", scope_id="alice")
    clock.advance(DAY)
    hits = engine.recall.recall(CTX, "vinyl records", threshold=0)
    engine.recall.recall(CTX, "vinyl", threshold=0, top_k=1)
    assert {h.item.id for h in hits} == {a.id, b.id}
    assert row_of(engine, a.id)["access_count"] == 0  # nothing written on the reply path
    assert engine.recall.flush_access() == 2
    assert (row_of(engine, a.id)["access_count"], row_of(engine, a.id)["last_accessed_at"]) == (
        2,
        clock.now(),
    )
    assert (row_of(engine, b.id)["access_count"], row_of(engine, b.id)["last_accessed_at"]) == (
        1,
        clock.now(),
    )
    assert engine.recall.flush_access() == 0


def test_recall_without_reinforce_queues_nothing(engine):
    a = remember(engine, "Alice collects vinyl records", scope_id="alice")
    engine.recall.recall(CTX, "vinyl", threshold=0, reinforce=False)
    assert engine.recall.flush_access() == 0 and row_of(engine, a.id)["access_count"] == 0


def test_closing_the_engine_flushes_pending_access(tmp_path, embedder, clock):
    engine = MemoryEngine(tmp_path / "m.db", embedder, clock)
    a = remember(engine, "Alice collects vinyl records", scope_id="alice")
    engine.recall.recall(CTX, "vinyl", threshold=0)
    engine.close()
    with MemoryEngine(tmp_path / "m.db", embedder, clock) as again:
        assert row_of(again, a.id)["access_count"] == 1


# -- decay, prune, prune_entities (MAINT-2/3) -------------------------------------------------------------
def test_decay_only_touches_rows_unaccessed_for_a_week_and_not_exempt(engine, clock):
    stale = remember(engine, "Alice tried pottery once", scope_id="alice", importance=5)
    touched = remember(engine, "Alice reads sci-fi novels", scope_id="alice", importance=5)
    guidance = remember(
        engine,
        "Keep replies to Alice short",
        scope_id="alice",
        importance=5,
        kind=FactKind.GUIDANCE,
    )
    behavioral = remember(
        engine, "Avoid puns with Alice", scope_id="alice", importance=5, kind=FactKind.BEHAVIORAL
    )
    profile = remember(
        engine, "Alice is a nurse", scope_id="alice", importance=5, kind=FactKind.PROFILE
    )
    young = None
    clock.advance(3 * DAY)
    engine.recall.note_access([touched.rid])
    engine.recall.flush_access()
    clock.advance(5 * DAY)  # day 8: stale unaccessed 8 days, touched 5 days ago
    young = remember(engine, "Alice started a new job", scope_id="alice", importance=5)
    assert decay(engine) == 1
    assert row_of(engine, stale.id)["importance"] == pytest.approx(4.75)
    for m in (touched, guidance, behavioral, profile, young):
        assert row_of(engine, m.id)["importance"] == 5
    clock.advance(DAY)
    assert decay(engine) == 1 and row_of(engine, stale.id)["importance"] == pytest.approx(
        5 * 0.95**2
    )


def test_prune_soft_forgets_unimportant_unused_old_rows(engine, clock):
    doomed = remember(
        engine, "Alice mentioned the weather was grey", scope_id="alice", importance=1
    )
    used = remember(engine, "Alice mentioned a grey cat outside", scope_id="alice", importance=1)
    kept = remember(engine, "Alice mentioned her grey scarf", scope_id="alice", importance=3)
    engine.recall.note_access([used.rid])
    engine.recall.flush_access()
    clock.advance(8 * DAY)
    decay(engine)  # doomed and used both fall below 1
    assert row_of(engine, doomed.id)["importance"] < 1 and row_of(engine, used.id)["importance"] < 1
    young = remember(engine, "Alice mentioned grey skies again", scope_id="alice", importance=1)
    clock.advance(8 * DAY)
    decay(engine)
    assert row_of(engine, young.id)["importance"] < 1
    assert prune(engine) == 0  # nobody is older than 30 days yet
    clock.advance(15 * DAY)  # day 31
    assert prune(engine) == 1
    # soft: the row stays
    assert row_of(engine, doomed.id)["forgotten"] == 1 and count(engine, "memories") == 4
    assert {row_of(engine, m.id)["forgotten"] for m in (used, kept, young)} == {0}
    assert doomed.content not in contents(engine.recall.recall(CTX, "grey weather", threshold=0))
    assert doomed.content not in contents(engine.memory_rows.listing(CTX.memory_partitions()))


def test_prune_entities_drops_single_mention_entities_unseen_for_ninety_days(engine, clock):
    remember(
        engine,
        "Alice met Gregor at a conference",
        scope_id="alice",
        entities=(EntityRef("Gregor", "person"),),
    )
    remember(
        engine, "Alice works with Priya", scope_id="alice", entities=(EntityRef("Priya", "person"),)
    )
    remember(
        engine,
        "Alice had lunch with Priya",
        scope_id="alice",
        entities=(EntityRef("Priya", "person"),),
    )
    clock.advance(60 * DAY)
    remember(
        engine, "Alice visited Lisbon", scope_id="alice", entities=(EntityRef("Lisbon", "place"),)
    )
    clock.advance(31 * DAY)  # Gregor and Priya unseen 91 days, Lisbon 31
    assert prune_entities(engine) == 1
    assert {n for (n,) in engine.db.execute("SELECT name FROM memory_entities")} == {
        "Priya",
        "Lisbon",
    }
    assert count(engine, "memory_entity_mentions") == 3


# -- search modes (RET-6) --------------------------------------------------------------------------------
@pytest.fixture
def varied(engine, clock):
    rows = {}
    for name, imp, mtype, tags in [
        ("first", 4, MemoryType.SEMANTIC, ("a",)),
        ("second", 9, MemoryType.EPISODIC, ("a", "b")),
        ("third", 6, MemoryType.PROCEDURAL, ("b",)),
        ("fourth", 2, MemoryType.EPISODIC, ()),
    ]:
        rows[name] = remember(
            engine,
            f"Alice's {name} note about gardening",
            scope_id="alice",
            importance=imp,
            type=mtype,
            tags=tags,
        )
        clock.advance(DAY)
    engine.recall.note_access([rows["fourth"].rid] * 3 + [rows["first"].rid])
    engine.recall.flush_access()
    return rows


def _names(memories):
    return [m.content.split()[1] for m in memories]


@pytest.mark.parametrize(
    "order, expected",
    [
        ("recent", ["fourth", "third", "second", "first"]),
        ("important", ["second", "third", "first", "fourth"]),
        ("accessed", ["fourth", "first", "third", "second"]),
        ("oldest", ["first", "second", "third", "fourth"]),
    ],
)
def test_list_orders(varied, engine, order, expected):
    assert _names(engine.memory_rows.listing(CTX.memory_partitions(), order=order)) == expected


def test_list_filters_by_type_tags_and_limit(varied, engine):
    parts = CTX.memory_partitions()
    assert _names(
        engine.memory_rows.listing(parts, RecallFilters(types=(MemoryType.EPISODIC,)))
    ) == ["fourth", "second"]
    assert _names(engine.memory_rows.listing(parts, RecallFilters(tags=("a", "b")))) == ["second"]
    assert _names(
        engine.memory_rows.listing(parts, RecallFilters(tags=("b",)), order="important")
    ) == ["second", "third"]
    assert _names(engine.memory_rows.listing(parts, order="important", limit=2)) == [
        "second",
        "third",
    ]


def test_recall_filters_by_type_and_tags(varied, engine):
    typed = engine.recall.recall(
        CTX, "gardening", threshold=0, filters=RecallFilters(types=(MemoryType.PROCEDURAL,))
    )
    assert [h.item.content for h in typed] == ["Alice's third note about gardening"]
    tagged = engine.recall.recall(
        CTX, "gardening", threshold=0, filters=RecallFilters(tags=("a", "b"))
    )
    assert [h.item.content for h in tagged] == ["Alice's second note about gardening"]


def test_recent_channel_is_filled_with_live_rows(bm25_engine, clock):
    live = remember(bm25_engine, "Alice grew up in Porto", scope_id="alice")
    for i in range(10):
        remember(
            bm25_engine,
            f"Alice is busy with errand number {i}",
            scope_id="alice",
            ttl=clock.now() + 60,
        )
    clock.advance(120)  # the ten newer rows have expired
    hits = bm25_engine.recall.recall(CTX, "what do you know about me", threshold=0)
    assert [h.item.id for h in hits] == [live.id]


def test_search_modes_hybrid_recent_important_typed(engine):
    from memory.errors import InvalidInput
    from memory.models import NewMemory, Scope
    from memory.scopes import RecallContext
    from memory.write.store import RecallFilters

    ctx = RecallContext(platform="t", speaker_id="p1", channel_id="c", is_dm=True)
    add = engine.memories.add
    add(
        NewMemory(
            content="Pat grows tomatoes in the garden",
            subject="garden",
            scope=Scope.USER,
            scope_id="p1",
            importance=3,
        )
    )
    engine.clock.advance(10)
    add(
        NewMemory(
            content="Pat's sister is called Robin",
            subject="sister",
            scope=Scope.USER,
            scope_id="p1",
            importance=9,
        )
    )
    engine.clock.advance(10)
    add(
        NewMemory(
            content="Pat deploys with make release",
            subject="deploy",
            scope=Scope.USER,
            scope_id="p1",
            type=MemoryType.PROCEDURAL,
            importance=5,
        )
    )
    search = engine.recall.search
    assert [m.subject for m in search(ctx, mode="recent")] == ["deploy", "sister", "garden"]
    assert [m.subject for m in search(ctx, mode="important")] == ["sister", "deploy", "garden"]
    assert [
        m.subject
        for m in search(ctx, mode="typed", filters=RecallFilters(types=(MemoryType.PROCEDURAL,)))
    ] == ["deploy"]
    assert search(ctx, "tomatoes garden", mode="hybrid", top_k=1)[0].subject == "garden"
    with pytest.raises(InvalidInput):
        search(ctx, mode="typed")
    with pytest.raises(InvalidInput):
        search(ctx, mode="sideways")

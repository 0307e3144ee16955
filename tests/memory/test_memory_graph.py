"""GRAPH-1/2: entities and relations from memories, strength, traversal, top entities, graph-channel recall."""

from __future__ import annotations

import json

import pytest
from conftest import count, dm_ctx, remember

from memory.clock import DAY
from memory.models import EntityRef, NewMemory, Scope
from memory.recall.retrieval import Channel
from memory.tools import MemoryTools

CTX = dm_ctx("alice")
PARTS = CTX.memory_partitions()


def relations(engine):
    sql = (
        "SELECT a.name AS source, r.relation, b.name AS target, r.strength FROM memory_relations r "
        "JOIN memory_entities a ON a.id = r.source_id JOIN memory_entities b ON b.id = r.target_id"
    )
    return {(r["source"], r["relation"], r["target"]): r["strength"] for r in engine.db.rows(sql)}


def entities(engine):
    return {
        r["name"]: (r["entity_type"], r["mention_count"])
        for r in engine.db.rows("SELECT * FROM memory_entities")
    }


def test_entities_and_relations_come_from_the_memory(engine, clock):
    m = remember(
        engine,
        "Alice works at Acme with Bob",
        scope_id="alice",
        entities=(
            EntityRef("Alice", "person", (("Works At", "Acme"), ("colleague of", "Bob"))),
            EntityRef("Acme", "organization"),
        ),
    )
    assert entities(engine) == {
        "Alice": ("person", 1),
        "Acme": ("organization", 1),
        "Bob": ("concept", 0),
    }
    assert relations(engine) == {
        ("Alice", "works_at", "Acme"): 1,
        ("Alice", "colleague_of", "Bob"): 1,
    }
    sources = engine.db.rows("SELECT memory_rid FROM memory_relation_sources")
    assert [r["memory_rid"] for r in sources] == [m.rid, m.rid]
    row = engine.db.one("SELECT first_seen, last_seen FROM memory_entities WHERE name = 'Alice'")
    assert row == {"first_seen": clock.now(), "last_seen": clock.now()}


@pytest.mark.parametrize(
    "label, stored",
    [
        ("Works At", "works_at"),
        ("  lives   in ", "lives_in"),
        ("LIKES", "likes"),
        ("x" * 80, "x" * 60),
        ("   ", "related_to"),
    ],
)
def test_relation_labels_are_normalised(engine, label, stored):
    remember(
        engine,
        "Alice has some relation to Acme",
        scope_id="alice",
        entities=(EntityRef("Alice", "person", ((label, "Acme"),)),),
    )
    assert list(relations(engine)) == [("Alice", stored, "Acme")]


def test_entity_names_are_matched_case_and_space_insensitively(engine):
    remember(
        engine,
        "Alice Smith likes tea",
        scope_id="alice",
        entities=(EntityRef("Alice  Smith", "person"),),
    )
    remember(
        engine,
        "alice smith rides a bike",
        scope_id="alice",
        entities=(EntityRef(" alice smith ", "person"),),
    )
    assert entities(engine) == {"Alice Smith": ("person", 2)}


def test_unknown_entity_types_become_concept_and_concepts_get_refined(engine):
    remember(
        engine,
        "Alice mentioned Zorb once",
        scope_id="alice",
        entities=(EntityRef("Zorb", "spaceship"),),
    )
    assert entities(engine)["Zorb"] == ("concept", 1)
    remember(
        engine,
        "Zorb is a startup Alice invested in",
        scope_id="alice",
        entities=(EntityRef("Zorb", "organization"),),
    )
    assert entities(engine)["Zorb"] == ("organization", 2)
    remember(
        engine,
        "Zorb also sells hats to Alice",
        scope_id="alice",
        entities=(EntityRef("Zorb", "place"),),
    )
    assert entities(engine)["Zorb"] == ("organization", 3)  # a known type is not overwritten


def test_reassertion_by_another_memory_strengthens_the_relation(engine, clock):
    knows = (EntityRef("Alice", "person", (("knows", "Bob"),)),)
    remember(engine, "Alice knows Bob from school", scope_id="alice", entities=knows)
    clock.advance(DAY)
    remember(engine, "Alice and Bob went hiking together", scope_id="alice", entities=knows)
    assert relations(engine) == {("Alice", "knows", "Bob"): 2}
    assert entities(engine)["Alice"] == ("person", 2)
    assert engine.db.one(
        "SELECT first_seen, last_seen FROM memory_entities WHERE name = 'Alice'"
    ) == {
        "first_seen": clock.now() - DAY,
        "last_seen": clock.now(),
    }


def test_a_duplicate_memory_does_not_strengthen_anything(engine):
    knows = (EntityRef("Alice", "person", (("knows", "Bob"),)),)
    remember(engine, "Alice knows Bob from school", scope_id="alice", entities=knows)
    result = engine.memories.add(
        NewMemory(
            content="Alice knows Bob from school",
            subject="x",
            scope=Scope.USER,
            scope_id="alice",
            entities=knows,
        )
    )
    assert result.status == "duplicate"
    assert relations(engine) == {("Alice", "knows", "Bob"): 1}


@pytest.fixture
def chain(engine):
    """Alice -knows-> Bob -works_at-> Acme -located_in-> Lisbon, each asserted by its own memory."""
    remember(
        engine,
        "Alice knows Bob from school",
        scope_id="alice",
        entities=(EntityRef("Alice", "person", (("knows", "Bob"),)),),
    )
    remember(
        engine,
        "Bob works at Acme",
        scope_id="alice",
        entities=(EntityRef("Bob", "person", (("works at", "Acme"),)),),
    )
    remember(
        engine,
        "Acme is based in Lisbon",
        scope_id="alice",
        entities=(EntityRef("Acme", "organization", (("located in", "Lisbon"),)),),
    )
    return engine


def _edges(walk):
    return {(e["source"], e["relation"], e["target"]) for e in walk["edges"]}


def test_traverse_depth_one_and_two(chain):
    one = chain.graph.traverse("Alice", 1, PARTS)
    assert one["found"] and one["entity"] == "Alice" and one["type"] == "person"
    assert _edges(one) == {("Alice", "knows", "Bob")}
    assert _edges(chain.graph.traverse("Alice", 2, PARTS)) == {
        ("Alice", "knows", "Bob"),
        ("Bob", "works_at", "Acme"),
    }
    assert _edges(chain.graph.traverse("Alice", 3, PARTS)) == {
        ("Alice", "knows", "Bob"),
        ("Bob", "works_at", "Acme"),
        ("Acme", "located_in", "Lisbon"),
    }
    # relations are walked in both directions
    assert _edges(chain.graph.traverse("acme", 1, PARTS)) == {
        ("Bob", "works_at", "Acme"),
        ("Acme", "located_in", "Lisbon"),
    }


def test_traverse_of_an_unknown_entity_is_not_found(chain):
    assert chain.graph.traverse("Mallory", 2, PARTS) == {
        "entity": "Mallory",
        "found": False,
        "edges": [],
    }


def test_memory_graph_tool_defaults_to_depth_two(chain):
    out = json.loads(MemoryTools(chain, CTX).call("memory_graph", json.dumps({"entity": "Alice"})))
    assert _edges(out) == {("Alice", "knows", "Bob"), ("Bob", "works_at", "Acme")}
    assert all(e["strength"] == 1 for e in out["edges"])


def test_top_entities_are_ordered_by_mentions_then_recency(engine, clock):
    for i in range(3):
        remember(
            engine,
            f"Alice note {i} about Bob and Carol",
            scope_id="alice",
            entities=(EntityRef("Bob", "person"), EntityRef("Carol", "person")),
        )
        clock.advance(60)
    remember(
        engine, "Alice note about Dave", scope_id="alice", entities=(EntityRef("Dave", "person"),)
    )
    clock.advance(60)
    remember(
        engine,
        "Alice note about Carol alone",
        scope_id="alice",
        entities=(EntityRef("Carol", "person"),),
    )
    clock.advance(60)
    remember(
        engine, "Alice note about Erin", scope_id="alice", entities=(EntityRef("Erin", "person"),)
    )
    top = engine.graph.top_entities(PARTS, n=5)
    assert [(r.name, r.mentions) for r in top] == [
        ("Carol", 4),
        ("Bob", 3),
        ("Erin", 1),
        ("Dave", 1),
    ]
    assert [r.name for r in engine.graph.top_entities(PARTS, n=2)] == ["Carol", "Bob"]
    assert engine.graph.top_entities((), n=5) == []


def test_graph_neighbours_join_recall_through_links(engine, embedder):
    base = "Alice talked about the old lighthouse keeper and his boat during"
    a, b = base + " winter storms", base + " summer festivals"
    assert 0.7 < embedder.cosine(a, b) <= 0.9
    first = remember(engine, a, subject="winter", scope_id="alice")
    second = remember(engine, b, subject="summer", scope_id="alice")
    assert count(engine, "memory_links", "relation = 'related_to'") == 1
    # only vector, FTS and graph can bring rows in
    engine.knobs.update("memories", {"recent_candidates": 0})
    query = "storms"
    # the second row cannot be found directly
    assert embedder.cosine(query, b) <= 0.0 and "storms" not in b
    direct = engine.recall.recall(CTX, query, threshold=0, channels=frozenset({Channel.FTS}))
    assert [h.item.id for h in direct] == [first.id]
    spread = engine.recall.recall(
        CTX, query, threshold=0, channels=frozenset({Channel.FTS, Channel.GRAPH})
    )
    assert [h.item.id for h in spread] == [first.id, second.id]
    assert spread[1].channels == ("graph",)
    # graph_decay 0.5 of its seed
    assert spread[1].relevance == pytest.approx(0.5 * spread[0].relevance)


def test_graph_reads_ignore_superseded_and_expired_memories(minilm_engine, clock):
    engine = minilm_engine
    old = remember(
        engine,
        "Alice has 2 cats",
        subject="Alice",
        scope_id="alice",
        entities=(EntityRef("Alice", "person", (("owns", "2 cats"),)),),
    )
    new = engine.memories.add(
        NewMemory(
            content="Alice has 3 cats",
            subject="Alice",
            scope=Scope.USER,
            scope_id="alice",
            entities=(EntityRef("Alice", "person", (("owns", "3 cats"),)),),
        )
    )
    assert new.superseded == (old.id,)
    remember(
        engine,
        "Alice is at a conference in Oslo today",
        subject="trip",
        scope_id="alice",
        ttl=clock.now() + 3600,
        entities=(EntityRef("Oslo", "place"),),
    )
    clock.advance(7200)
    assert _edges(engine.graph.traverse("Alice", 1, PARTS)) == {("Alice", "owns", "3 cats")}
    assert {r.name: r.mentions for r in engine.graph.top_entities(PARTS)} == {"Alice": 1}

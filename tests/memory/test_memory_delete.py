"""MEM-5 / SEC-3: deleting a memory, or forgetting a person, leaves nothing derived behind.

Each test reads the SQLite file directly after the delete: the row, its vector, its FTS entry, tags,
graph mentions, relation back-references, memory-to-memory links, orphaned entities and relations,
and the embedding cache.
"""

from __future__ import annotations

import json

import pytest
from conftest import ScriptedCompleter, contents, count, dm_ctx, fts_rids, guild_ctx, remember, say

from memory.clock import DAY
from memory.errors import InvalidInput, NotFound
from memory.models import EntityRef, Scope, Visibility
from memory.storage.embeddings import content_hash
from memory.upkeep.forgetting import forget_person
from memory.upkeep.maintenance import consolidate, decay
from memory.upkeep.transfer import export_person, import_memories

BASE = "Alice talked about the old lighthouse keeper and his boat"
EARLIER, TARGET, LATER = (
    BASE + " during winter storms",
    BASE + " during summer festivals",
    BASE + " during autumn harvests",
)


@pytest.fixture
def linked(engine, embedder):
    """Three related memories (cosine ~0.82: linked related_to) sharing graph structure; the middle one is the victim."""
    assert (
        0.7 < embedder.cosine(EARLIER, TARGET) <= 0.9
        and 0.7 < embedder.cosine(LATER, TARGET) <= 0.9
    )
    knows_bob = EntityRef("Alice", "person", (("knows", "Bob"),))
    earlier = remember(
        engine, EARLIER, subject="lighthouse in winter", tags=("sea",), entities=(knows_bob,)
    )
    target = remember(
        engine,
        TARGET,
        subject="lighthouse in summer",
        tags=("sea", "festival"),
        entities=(
            knows_bob,
            EntityRef("Zorbing", "concept", (("practised_by", "Xavier"),)),
        ),
    )
    later = remember(engine, LATER, subject="lighthouse in autumn", tags=("sea",))
    return earlier, target, later


def test_linked_fixture_really_has_links_in_both_directions(engine, linked):
    earlier, target, later = linked
    links = {
        (s, d)
        for s, d in engine.db.execute(
            "SELECT src_rid, dst_rid FROM memory_links WHERE relation = 'related_to'"
        )
    }
    assert {(target.rid, earlier.rid), (later.rid, target.rid), (later.rid, earlier.rid)} <= links


def test_delete_removes_row_vector_fts_tags_mentions_sources_and_links(engine, linked):
    earlier, target, later = linked
    rid = target.rid
    assert fts_rids(engine, "festivals") == {rid}
    assert count(engine, "memory_vec", "rowid = ?", (rid,)) == 1

    assert engine.memories.delete(target.id) == [target.id]

    assert count(engine, "memories", "rid = ?", (rid,)) == 0
    assert count(engine, "memory_vec", "rowid = ?", (rid,)) == 0
    assert fts_rids(engine, "festivals") == set()
    assert count(engine, "memory_fts_docsize") == 2
    assert count(engine, "memory_tags", "memory_rid = ?", (rid,)) == 0
    assert count(engine, "memory_tags", "tag = 'festival'") == 0
    assert count(engine, "memory_entity_mentions", "memory_rid = ?", (rid,)) == 0
    assert count(engine, "memory_relation_sources", "memory_rid = ?", (rid,)) == 0
    assert count(engine, "memory_links", "src_rid = ? OR dst_rid = ?", (rid, rid)) == 0
    # the link between the two survivors is theirs, not the victim's
    assert (
        count(engine, "memory_links", "src_rid = ? AND dst_rid = ?", (later.rid, earlier.rid)) == 1
    )
    with pytest.raises(NotFound):
        engine.memory_rows.get(target.id)


def test_delete_drops_orphaned_entities_and_relations_and_weakens_shared_ones(engine, linked):
    _, target, _ = linked
    strength = "SELECT r.strength FROM memory_relations r JOIN memory_entities a ON a.id = r.source_id WHERE a.name = ? AND r.relation = ?"
    assert engine.db.scalar(strength, ("Alice", "knows")) == 2
    assert engine.db.scalar("SELECT mention_count FROM memory_entities WHERE name = 'Alice'") == 2

    engine.memories.delete(target.id)

    names = {n for (n,) in engine.db.execute("SELECT name FROM memory_entities")}
    assert names == {"Alice", "Bob"}  # Zorbing and Xavier existed only because of the victim
    assert count(engine, "memory_relations", "relation = 'practised_by'") == 0
    assert engine.db.scalar(strength, ("Alice", "knows")) == 1
    assert engine.db.scalar("SELECT mention_count FROM memory_entities WHERE name = 'Alice'") == 1


def test_delete_removes_the_cached_embedding_of_its_text(engine, linked):
    _, target, _ = linked
    assert count(engine, "embed_cache", "content_hash = ?", (content_hash(TARGET),)) == 1
    engine.memories.delete(target.id)
    assert count(engine, "embed_cache", "content_hash = ?", (content_hash(TARGET),)) == 0
    assert count(engine, "embed_cache") == 2  # the survivors' vectors stay cached


def test_cached_embedding_is_kept_while_another_row_has_the_same_text(engine):
    text = "Alice and Bob both play the cello"
    a = remember(engine, text, scope_id="alice")
    b = remember(engine, text, scope_id="bob")
    engine.memories.delete(a.id)
    assert count(engine, "embed_cache", "content_hash = ?", (content_hash(text),)) == 1
    engine.memories.delete(b.id)
    assert count(engine, "embed_cache", "content_hash = ?", (content_hash(text),)) == 0


def test_deleted_memory_is_not_recalled_through_any_channel(engine, linked):
    earlier, target, later = linked
    ctx = dm_ctx("alice")
    assert target.id in {
        h.item.id for h in engine.recall.recall(ctx, "summer festivals", threshold=0)
    }
    engine.memories.delete(target.id)
    hits = engine.recall.recall(ctx, "summer festivals", threshold=0)
    assert target.id not in {h.item.id for h in hits}
    assert {h.item.id for h in hits} == {earlier.id, later.id}


def test_deleting_a_merged_memory_deletes_its_consolidated_originals(engine, embedder):
    stem = "Alice adopted a small pet from the shelter near her flat in town"
    texts = [stem + " tabby cat", stem + " brown dog", stem + " green parrot"]
    assert min(embedder.cosine(texts[0], t) for t in texts[1:]) >= 0.85
    originals = [
        remember(engine, t, subject=f"pet {i}", entities=(EntityRef(f"Pet{i}"),))
        for i, t in enumerate(texts)
    ]
    report = consolidate(
        engine,
        ScriptedCompleter(
            json.dumps(
                {"subject": "Alice's pets", "content": "Alice adopted a cat, a dog and a parrot"}
            )
        ),
    )
    (merged_id,) = report.new_ids
    assert count(engine, "memories", "consolidated_into = ?", (merged_id,)) == 3

    removed = engine.memories.delete(merged_id)

    assert set(removed) == {merged_id, *(m.id for m in originals)}
    assert count(engine, "memories") == 0
    assert count(engine, "memory_vec") == 0
    assert count(engine, "memory_fts_docsize") == 0
    assert count(engine, "memory_entities") == 0
    assert count(engine, "memory_entity_mentions") == 0
    assert count(engine, "embed_cache") == 0


def test_deleting_an_unknown_id_is_not_found(engine):
    remember(engine, "Alice owns a red kayak")
    with pytest.raises(NotFound):
        engine.memories.delete("00000000-0000-0000-0000-000000000000")
    assert count(engine, "memories") == 1


def test_delete_through_the_tool_reports_what_was_forgotten(engine):
    from memory.tools import MemoryTools

    memory = remember(
        engine, "Alice is allergic to peanuts", scope_id="alice", visibility=Visibility.PRIVATE
    )
    tools = MemoryTools(engine, dm_ctx("alice"))
    tools.call("memory_search", {"query": "peanuts allergy"})
    out = json.loads(tools.call("memory_delete", json.dumps({"id": memory.id})))
    assert out == {"status": "deleted", "id": memory.id, "content": "Alice is allergic to peanuts"}
    assert tools.deleted == ["Alice is allergic to peanuts"]
    assert count(engine, "memories") == 0 and count(engine, "memory_vec") == 0


# -- a person's data: export, forget, import (SEC-3) ----------------------------------------------------
def _summary(engine, participants, text, guild="g1"):
    engine.db.execute(
        "INSERT INTO session_summaries (platform, guild_id, channel_id, modality, participants, text, ended_at, expires_at) "
        "VALUES ('discord', ?, 'voice-1', 'voice', ?, ?, ?, ?)",
        (guild, json.dumps(participants), text, engine.clock.now(), engine.clock.now() + DAY),
    )


@pytest.fixture
def people(engine):
    """Xena's data in every place it can be, next to Yuri's and the guild's, which must survive her forgetting.

    Nobody speaks after Xena in the guild channel: what a later turn keeps of her words is a separate test.
    """
    remember(
        engine,
        "Xena collects vintage typewriters",
        scope_id="xena",
        entities=(EntityRef("Xena", "person", (("collects", "typewriters"),)),),
    )
    remember(
        engine,
        "Xena is nervous about her visa interview",
        scope_id="xena",
        visibility=Visibility.PRIVATE,
    )
    remember(
        engine,
        "Yuri brews his own ginger beer",
        scope_id="yuri",
        entities=(EntityRef("Yuri", "person"),),
    )
    remember(
        engine, "The guild meets every Thursday for board games", scope=Scope.GUILD, scope_id="g1"
    )
    say(engine, "Yuri here, the ginger beer exploded again", author="yuri", guild="g1")
    say(engine, "I found another Olivetti typewriter today", author="xena", guild="g1")
    say(engine, "Can you remind me about the visa interview", author="xena", dm_person="xena")
    say(engine, "Of course, it is on Monday", author="bot", dm_person="xena", role="assistant")
    say(engine, "What should I brew next", author="yuri", dm_person="yuri")
    _summary(engine, ["xena", "yuri"], "Xena and Yuri talked about typewriters and ginger beer")
    _summary(engine, ["yuri"], "Yuri sang alone")
    return engine


def test_export_person_gives_everything_about_them_and_nothing_else(people):
    data = export_person(people, ["xena"])
    json.dumps(data)  # plain JSON data
    assert {m["content"] for m in data["memories"]} == {
        "Xena collects vintage typewriters",
        "Xena is nervous about her visa interview",
    }
    assert {m["content"] for m in data["messages"]} == {
        "I found another Olivetti typewriter today",
        "Can you remind me about the visa interview",
        "Of course, it is on Monday",
    }
    assert [s["text"] for s in data["session_summaries"]] == [
        "Xena and Yuri talked about typewriters and ginger beer"
    ]
    assert not any(
        k in m for m in data["memories"] for k in ("rid", "partition_key", "ptoken", "content_hash")
    )


def test_forget_person_leaves_nothing_about_them(people):
    engine = people
    result = forget_person(engine, ["xena"])
    assert (
        result["memories"],
        result["messages"],
        result["session_summaries"],
        result["extraction_buffer"],
    ) == (2, 3, 1, 0)

    empty = export_person(engine, ["xena"])
    assert empty["memories"] == [] and empty["messages"] == [] and empty["session_summaries"] == []
    for word in ("typewriters", "visa"):
        assert fts_rids(engine, word) == set()
    for word in ("olivetti", "monday", "visa"):
        assert fts_rids(engine, word, "message_fts") == set()
    assert count(engine, "memory_vec") == count(engine, "memories") == 2
    assert count(engine, "message_vec") == count(engine, "messages") == 2
    assert count(engine, "memory_entities", "name IN ('Xena', 'typewriters')") == 0
    assert count(engine, "memory_relations") == 0
    assert (
        count(
            engine,
            "embed_cache",
            "content_hash = ?",
            (content_hash("Xena collects vintage typewriters"),),
        )
        == 0
    )
    assert engine.recall.recall(dm_ctx("xena"), "typewriters visa interview", threshold=0) == []
    assert engine.messages.search(dm_ctx("xena"), "visa interview") == []


def test_forget_person_keeps_everyone_else(people):
    engine = people
    forget_person(engine, ["xena"])
    assert contents(engine.memory_rows.listing(None, limit=50)) == {
        "Yuri brews his own ginger beer",
        "The guild meets every Thursday for board games",
    }
    assert {r["content"] for r in engine.db.rows("SELECT content FROM messages")} == {
        "Yuri here, the ginger beer exploded again",
        "What should I brew next",
    }
    assert [r["text"] for r in engine.db.rows("SELECT text FROM session_summaries")] == [
        "Yuri sang alone"
    ]
    assert contents(engine.messages.search(guild_ctx("g1", "yuri"), "ginger beer")) == {
        "Yuri here, the ginger beer exploded again"
    }
    assert engine.db.scalar("SELECT mention_count FROM memory_entities WHERE name = 'Yuri'") == 1


def test_forget_person_covers_every_linked_id_and_owner_memory(engine):
    remember(
        engine, "Olga runs the server from her basement", scope=Scope.OWNER, scope_id="olga-discord"
    )
    remember(engine, "Olga prefers terse replies on Telegram", scope_id="olga-telegram")
    result = forget_person(engine, ["olga-discord", "olga-telegram"])
    assert result["memories"] == 2
    assert (
        count(engine, "memories")
        == count(engine, "memory_vec")
        == count(engine, "memory_fts_docsize")
        == 0
    )


def test_forget_person_removes_her_words_from_the_context_of_later_turns(engine):
    say(engine, "My secret hobby is competitive zorbing", author="xena", guild="g1")
    engine.clock.advance(1)
    say(engine, "Cool, tell me more about it", author="yuri", guild="g1")
    forget_person(engine, ["xena"])
    assert "zorbing" not in json.dumps(engine.db.rows("SELECT * FROM messages")).lower()
    assert fts_rids(engine, "zorbing", "message_fts") == set()
    assert engine.messages.search(guild_ctx("g1", "yuri"), "zorbing") == []


def test_forget_person_removes_cached_embeddings_of_her_messages(engine):
    say(
        engine,
        "I found another Olivetti typewriter today",
        author="xena",
        guild="g1",
        author_name="Xena",
    )
    assert count(engine, "embed_cache") == 1
    forget_person(engine, ["xena"])
    assert count(engine, "messages") == 0
    assert count(engine, "embed_cache") == 0


def test_forget_person_needs_an_id(engine):
    with pytest.raises(InvalidInput):
        forget_person(engine, [])
    with pytest.raises(InvalidInput):
        export_person(engine, [])


def test_import_memories_runs_every_row_through_the_write_rules(engine):
    counts = import_memories(
        engine,
        [
            {
                "content": "Xena collects vintage typewriters",
                "scope": "user",
                "scope_id": "xena",
                "tags": ["hobby"],
            },
            {"content": "Xena collects vintage typewriters", "scope": "user", "scope_id": "xena"},
            {"content": "Xena's password is hunter22", "scope": "user", "scope_id": "xena"},
            {"content": "no scope at all"},
            {
                "content": "Xena fears spiders",
                "scope": "user",
                "scope_id": "xena",
                "visibility": "private",
                "importance": 7,
            },
        ],
    )
    assert {k: counts[k] for k in ("stored", "duplicate", "rejected")} == {
        "stored": 2,
        "duplicate": 1,
        "rejected": 2,
    }
    assert counts["reasons"] == [
        "memory 3: text contains what looks like a secret (key, token, password or card number); never stored",
        "memory 4: missing field 'scope'",
    ]
    assert contents(engine.memory_rows.listing(None)) == {
        "Xena collects vintage typewriters",
        "Xena fears spiders",
    }
    assert "Xena fears spiders" not in contents(
        engine.recall.recall(guild_ctx("g1", "xena"), "spiders", threshold=0)
    )
    assert "Xena fears spiders" in contents(
        engine.recall.recall(dm_ctx("xena"), "spiders", threshold=0)
    )
    for bad in ({"memories": "not a list"}, {"a": 1}, "text", 3):
        with pytest.raises(InvalidInput, match="not a companion export"):
            import_memories(engine, bad)


def test_export_forget_import_round_trip_restores_memories_in_their_scopes(people):
    engine = people
    data = export_person(engine, ["xena"])
    forget_person(engine, ["xena"])
    counts = import_memories(engine, data)
    assert (
        counts["stored"],
        counts["rejected"],
        counts["messages"],
        counts["session_summaries"],
    ) == (2, 0, 3, 1)
    again = export_person(engine, ["xena"])
    for table in (
        "messages",
        "session_summaries",
    ):  # everything comes back, and a second import adds nothing
        assert sorted(
            r["text" if table == "session_summaries" else "content"] for r in again[table]
        ) == sorted(r["text" if table == "session_summaries" else "content"] for r in data[table])
    assert import_memories(engine, data)["messages"] == 0
    assert contents(engine.recall.recall(dm_ctx("xena"), "typewriters visa", threshold=0)) >= {
        "Xena collects vintage typewriters",
        "Xena is nervous about her visa interview",
    }
    assert "Xena is nervous about her visa interview" not in contents(
        engine.recall.recall(guild_ctx("g1", "xena"), "visa interview", threshold=0)
    )


def test_round_trip_keeps_a_live_memory_whose_importance_decayed_below_one(engine):
    memory = remember(
        engine, "Xena once mentioned she likes rainy Sundays", scope_id="xena", importance=1
    )
    engine.recall.note_access([memory.rid])
    engine.recall.flush_access()  # accessed once, so prune would never soft-forget it
    engine.clock.advance(8 * DAY)
    assert decay(engine) == 1
    assert engine.memory_rows.get(memory.id).importance < 1
    data = export_person(engine, ["xena"])
    forget_person(engine, ["xena"])
    assert import_memories(engine, data)["stored"] == 1


def test_imported_messages_refuse_bad_rows_and_file_a_numeric_author_under_that_person(engine):
    said = {"platform": "discord", "channel_id": 7, "author_id": 42, "role": "user"}
    data = {
        "memories": [],
        "messages": [
            {**said, "id": "m1", "content": "my kite is red", "created_at": "2026-01-02T00:00Z"},
            "not an object",
            {**said, "id": "m3", "created_at": 1.0},  # no words
            {**said, "id": "m4", "content": "kept out", "created_at": "yesterday"},
        ],
    }
    counts = import_memories(engine, data)
    assert counts["messages"] == 1
    assert [r.split(":")[0] for r in counts["reasons"]] == ["message 2", "message 3", "message 4"]
    assert "missing field 'content'" in counts["reasons"][1]
    # a DM message: the person it belongs to is its author, as their id is written everywhere else
    exported = export_person(engine, ["42"])["messages"]
    assert [(m["content"], m["author_id"]) for m in exported] == [("my kite is red", "42")]
    assert import_memories(engine, data)["messages"] == 0

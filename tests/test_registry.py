"""The registry of everything that can carry a person's words (SEC-3), checked against the live schema,
and forgetting checked the way an auditor would: by reading the bytes of the files the store writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import HashEmbedder, dm_ctx, remember, say

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import EntityRef, Visibility
from memory.upkeep.forgetting import forget_memory, forget_person
from memory.upkeep.registry import FILE_REGISTRY, REGISTRY, holder_of
from memory.upkeep.transfer import export_person

WORD = "Zyqxolotl"  # distinctive: no other text in the store shares its letters


def text_tables(engine: MemoryEngine) -> dict[str, list[str]]:
    """Every table of the live schema (shadow tables included) with its TEXT (or untyped) columns."""
    tables = [
        r
        for (r,) in engine.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    out = {}
    for table in tables:
        columns = engine.db.rows(f"PRAGMA table_info({table})")
        texty = [
            c["name"]
            for c in columns
            if c["type"].upper() in ("TEXT", "") or "CHAR" in c["type"].upper()
        ]
        if texty:
            out[table] = texty
    return out


def test_every_table_that_can_hold_text_is_in_the_registry(engine):
    remember(engine, "Alice keeps bees")  # creates the vector tables too
    say(engine, "hello", author="alice", dm_person="alice")
    missing = [t for t in text_tables(engine) if holder_of(t) is None]
    assert missing == [], (
        f"tables with text columns that forgetting and export do not know: {missing}"
    )


def test_the_schema_check_would_catch_a_new_table(engine):
    engine.db.execute("CREATE TABLE journal_lines (id INTEGER PRIMARY KEY, line TEXT)")
    assert "journal_lines" in text_tables(engine) and holder_of("journal_lines") is None


def test_every_registry_entry_names_a_real_table_and_a_way_to_find_rows(engine):
    remember(engine, "Alice keeps bees")
    say(engine, "hello", author="alice", dm_person="alice")
    tables = set(text_tables(engine)) | {
        r for (r,) in engine.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    for holder in REGISTRY:
        assert holder.table in tables, holder.table
        assert holder.how in ("owner", "delete", "derived", "none")
        assert bool(holder.person) == (holder.how in ("owner", "delete")), holder.table
        assert holder.via or holder.how != "derived", holder.table


def test_every_file_holder_is_kept_by_an_engine_part_that_forgetting_can_call(tmp_path):
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), FakeClock(), journal_dir=tmp_path / "memory"
    ) as engine:
        for holder in FILE_REGISTRY:
            assert holder.via == "memories" and callable(getattr(engine, holder.keeper).forget), (
                holder.name
            )
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), FakeClock()
    ) as engine:  # switched off: nothing to call
        assert all(getattr(engine, h.keeper) is None for h in FILE_REGISTRY)


def test_export_lists_every_exported_table_and_parses_as_json(engine):
    remember(engine, "Alice keeps bees", scope_id="alice", visibility=Visibility.PRIVATE)
    data = json.loads(json.dumps(export_person(engine, ["alice"])))
    assert {h.table for h in REGISTRY if h.export} <= set(data)
    assert [m["content"] for m in data["memories"]] == ["Alice keeps bees"]


# -- bytes on disk ---------------------------------------------------------------------------------------
def store_files(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p.name.startswith(path.name)]


def occurrences(path: Path, word: str) -> dict[str, int]:
    pattern = re.compile(word.lower().encode())
    return {
        p.name: len(pattern.findall(p.read_bytes().lower()))
        for p in store_files(path)
        if p.is_file()
    }


def fill(engine: MemoryEngine, person: str) -> None:
    """The word in every place a person's words can be: memories (with entity, tags, history), messages and
    the bot's reply, buffer, session summary, rolling summary, reflection audit."""
    ctx = dm_ctx(person)
    remember(
        engine,
        f"{person} named the cat {WORD}",
        scope_id=person,
        visibility=Visibility.PRIVATE,
        tags=(WORD.lower(),),
        entities=(EntityRef(WORD, "concept", (("pet_of", person),)),),
    )
    remember(engine, f"{person} once had a hamster called {WORD} Senior", scope_id=person)
    mid = say(engine, f"my cat is called {WORD}", author=person, dm_person=person)
    say(engine, f"{WORD} is a lovely name", author="bot", dm_person=person, role="assistant")
    engine.buffer.push(f"discord:dm-{person}", ctx, f"my cat is called {WORD}", message_id=mid)
    engine.summaries.add(
        platform="discord",
        guild_id=None,
        channel_id=f"dm-{person}",
        participants=[person],
        text=f"{person} talked about {WORD}",
    )
    channels = engine.channels
    channels.touch(f"discord:dm-{person}", ctx)
    channels.set_summary(f"discord:dm-{person}", f"Earlier: the cat {WORD}", 0.0)
    audit = engine.reflections.start(
        "micro",
        f"discord:dm-{person}",
        f"{person}: my cat is called {WORD}",
        channel_key=f"discord:dm-{person}",
        people=(person,),
    )
    engine.reflections.finish(audit, facts=[f"{person} named the cat {WORD}"])


def test_forgetting_a_person_leaves_no_byte_of_their_words_in_the_store_files(tmp_path):
    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        for n in range(
            200
        ):  # others' rows around it, so freed pages are reused and merged, not simply dropped
            remember(engine, f"Bob fact number {n} about gardening and tomatoes", scope_id="bob")
        fill(engine, "alice")
        engine.db.execute("ANALYZE")  # index samples (sqlite_stat4) now hold keys too
        engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # the test can fail: the word is on disk before
        assert sum(occurrences(path, WORD).values()) > 0
        forget_person(engine, ["alice"])
    assert occurrences(path, WORD) == {p.name: 0 for p in store_files(path) if p.is_file()}
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:  # and the store still works
        assert engine.db.scalar("PRAGMA integrity_check") == "ok"
        assert engine.db.scalar("SELECT COUNT(*) FROM memories WHERE scope_id = 'bob'") == 200


def test_forgetting_one_memory_removes_its_words_but_keeps_the_rest(tmp_path):
    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        remember(engine, "Alice likes green tea", scope_id="alice")
        mid = say(engine, f"I walk my dog {WORD} daily", author="alice", dm_person="alice")
        from memory.models import NewMemory, Provenance, Scope

        result = engine.memories.add(
            NewMemory(
                content=f"Alice walks her dog {WORD} daily",
                subject="dog",
                scope=Scope.USER,
                scope_id="alice",
                provenance=Provenance(platform="discord", channel_id="dm-alice", sources=(mid,)),
            )
        )
        engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert sum(occurrences(path, WORD).values()) > 0
        done = forget_memory(engine, result.memory.id)
        assert done.messages == 1 and done.contents == [f"Alice walks her dog {WORD} daily"]
    assert sum(occurrences(path, WORD).values()) == 0
    assert sum(occurrences(path, "green tea").values()) > 0


@pytest.mark.parametrize(
    "table",
    [
        "memories",
        "messages",
        "session_summaries",
        "reflections",
        "extraction_buffer",
        "channel_state",
    ],
)
def test_forget_person_empties_every_place_the_person_was_and_only_that(engine, table):
    fill(engine, "alice")
    fill(engine, "bob")
    forget_person(engine, ["alice"])
    rows = json.dumps(engine.db.rows(f"SELECT * FROM {table}"))
    assert "alice" not in rows and "bob" in rows


def test_an_export_writes_times_as_iso_dates_like_the_api_and_imports_back_the_same(
    engine, tmp_path
):
    """Exports said ``created_at: 1764000000.0`` where the dashboard's API says ``2025-11-24T...``."""
    from memory.upkeep.transfer import import_memories

    remember(engine, "Alice keeps bees", scope_id="alice", visibility=Visibility.PRIVATE)
    say(engine, "my bees are called Zyqxolotl", author="alice", dm_person="alice")
    data = json.loads(json.dumps(export_person(engine, ["alice"])))
    assert data["format"] == "companion-export/3"
    times = [
        (row, key)
        for table in ("memories", "messages")
        for row in data[table]
        for key in row
        if key.endswith("_at")
    ]
    assert times and all(
        row[key] is None or re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", row[key])
        for row, key in times
    )
    assert isinstance(data["exported_at"], str)
    with MemoryEngine(tmp_path / "other.db", HashEmbedder(), FakeClock()) as other:
        counts = import_memories(other, data)
        assert (counts["stored"], counts["messages"], counts["reasons"]) == (1, 1, [])
        back = other.db.rows("SELECT created_at FROM messages")
    original = engine.db.rows("SELECT created_at FROM messages WHERE author_id = 'alice'")
    assert back[0]["created_at"] == pytest.approx(original[0]["created_at"])

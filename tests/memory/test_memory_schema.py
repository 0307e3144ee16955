"""MEM-1: the file is migrated on open, versioned, in WAL mode, and a newer file is refused."""

from __future__ import annotations

import pytest
from conftest import HashEmbedder, count, remember

from memory.engine import MemoryEngine
from memory.errors import SchemaError
from memory.storage.migrations import MIGRATIONS

TABLES = {
    "memories",
    "memory_tags",
    "memory_entities",
    "memory_entity_mentions",
    "memory_relations",
    "memory_relation_sources",
    "memory_links",
    "memory_fts",
    "messages",
    "message_fts",
    "session_summaries",
    "reflections",
    "settings",
    "schema_version",
    "embed_cache",
}


def test_a_new_file_has_every_table_and_records_its_migrations(engine):
    names = {
        n
        for (n,) in engine.db.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        )
    }
    assert names >= TABLES
    assert [
        r["name"] for r in engine.db.rows("SELECT name FROM schema_version ORDER BY version")
    ] == [m.name for m in MIGRATIONS]
    assert engine.db.scalar("PRAGMA journal_mode") == "wal"
    assert engine.db.scalar("PRAGMA foreign_keys") == 1


def test_vector_tables_appear_with_the_first_vector(engine):
    assert count(engine, "memory_vec") == 0 and not engine.db.scalar(
        "SELECT 1 FROM sqlite_master WHERE name = 'memory_vec'"
    )
    remember(engine, "Alice keeps a diary", scope_id="alice")
    assert count(engine, "memory_vec") == 1


def test_reopening_keeps_data_and_does_not_migrate_twice(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), clock) as engine:
        memory = remember(engine, "Alice keeps a diary", scope_id="alice")
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), clock) as engine:
        assert engine.memory_rows.get(memory.id).content == "Alice keeps a diary"
        assert count(engine, "schema_version") == len(MIGRATIONS)


def test_a_file_from_a_newer_program_is_refused(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:
        engine.db.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (999, 'm999_future', 'x')"
        )
    with pytest.raises(SchemaError, match="newer than this program"):
        MemoryEngine(tmp_path / "m.db", None, clock)


def test_backup_is_a_complete_copy(engine, tmp_path, clock):
    remember(engine, "Alice keeps a diary", scope_id="alice")
    engine.db.backup_to(tmp_path / "copy.db")
    with MemoryEngine(tmp_path / "copy.db", HashEmbedder(), clock) as copy:
        assert [m.content for m in copy.memory_rows.listing(None)] == ["Alice keeps a diary"]
        assert count(copy, "memory_vec") == 1

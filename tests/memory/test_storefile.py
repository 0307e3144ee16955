"""A store opened on its own (``memory.StoreFile``: the doctor, restore, the upgrade check) answers
with values, changes nothing it only reads, and refuses what is not a store."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from conftest import HashEmbedder, older_store, remember

from memory import StoreFile
from memory.engine import MemoryEngine
from memory.errors import SchemaError


def _store(path: Path, clock, facts: int = 2) -> None:
    with MemoryEngine(path, HashEmbedder(), clock) as engine:
        for i in range(facts):
            remember(engine, f"Alice keeps {i + 2} diaries", scope_id="alice")


def test_a_store_answers_with_values_and_no_rows(tmp_path: Path, clock) -> None:
    _store(tmp_path / "m.db", clock, facts=3)
    with StoreFile(tmp_path / "m.db") as store:
        assert store.quick_check() == "ok"
        assert store.behind == 0
        assert store.memories() == 3
        assert store.get_setting("embedding.dim") == str(HashEmbedder().dim)
        assert store.sight("http://127.0.0.1:9/v1|never-asked") is None
        assert not hasattr(store, "rows")  # the bot reads values of it, never a dict row


def test_an_older_store_is_read_without_being_migrated_until_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    older_store(path)
    before = path.read_bytes()
    with StoreFile(path) as store:
        assert store.behind == 1
    assert path.read_bytes() == before  # a reader wrote nothing
    StoreFile.upgrade(path)
    with StoreFile(path) as store:
        assert store.behind == 0


def test_the_copy_is_a_whole_store_kept_private(tmp_path: Path, clock) -> None:
    _store(tmp_path / "m.db", clock)
    with StoreFile(tmp_path / "m.db") as store:
        store.backup_to(tmp_path / "copy.db")
    assert stat.S_IMODE((tmp_path / "copy.db").stat().st_mode) == 0o600
    with StoreFile(tmp_path / "copy.db") as copy:
        assert (copy.quick_check(), copy.memories()) == ("ok", 2)


def test_what_is_not_a_store_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("Alice's shopping list\n" * 100)
    with pytest.raises(SchemaError, match="not a usable companion store"):
        StoreFile(tmp_path / "notes.db")
    with pytest.raises(FileNotFoundError):
        StoreFile(tmp_path / "missing.db")
    with pytest.raises(IsADirectoryError):
        StoreFile(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]

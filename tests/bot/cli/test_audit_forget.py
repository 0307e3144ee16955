"""``companion audit forget`` (SEC-7, issue 33): after a real forget it reports 0 on every surface and exits 0; a
leftover planted on any one surface is found there (exit 1), and the report never prints the words it looked for."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import numpy as np
import pytest
from conftest import HashEmbedder

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import FactKind, NewMemory, Provenance, Scope, Visibility
from memory.storage.messages import NewMessage

WORD = "Zanzibarro"
PERSON = "telegram:55"


def fill(db: Path) -> None:
    """Alice's DM with the bot, and what was learned from it, journalled beside the store."""
    engine = MemoryEngine(db, HashEmbedder(), FakeClock(), journal_dir=db.parent / "memory")
    try:
        said = engine.messages.add(
            NewMessage(
                "telegram",
                "55",
                PERSON,
                f"my kayak is called {WORD}",
                dm_person_id=PERSON,
                author_name="Alice",
            )
        )
        new = NewMemory(
            content=f"Alice's kayak is called {WORD}",
            subject="kayak",
            scope=Scope.USER,
            scope_id=PERSON,
            visibility=Visibility.PRIVATE,
            kind=FactKind.PROFILE,
            provenance=Provenance(platform="telegram", channel_id="55", sources=(said,)),
        )
        engine.memories.add(new)
        engine.messages.add(
            NewMessage(
                "telegram",
                "66",
                "telegram:66",
                "the weather is fine",
                dm_person_id="telegram:66",
                author_name="Bo",
            )
        )
    finally:
        engine.close()


@pytest.fixture
def forgotten(cli):
    """A store where Alice was forgotten for real, through the CLI."""
    fill(cli.db)
    before = cli("audit", "forget", "--word", WORD, "--json")
    assert before.code == 1 and before.json()["remaining"] > 0  # there was something to forget
    result = cli("memory", "forget-person", "--person", PERSON, "--yes")
    assert result.code == 0, result.err
    return cli


def surfaces(result) -> dict[str, int | None]:
    return {s["surface"]: s["remaining"] for s in result.json()["surfaces"]}


def audit(cli, *extra: str):
    result = cli("audit", "forget", *extra, "--json")
    assert WORD.lower() not in (result.out + result.err).lower()  # counts, never the words
    return result


@pytest.mark.parametrize(
    "target", [("--word", WORD), ("--person", PERSON), ("--word", WORD, "--person", PERSON)]
)
def test_after_a_real_forget_every_surface_reports_zero_and_the_audit_passes(forgotten, target):
    result = audit(forgotten, *target)
    assert result.code == 0, result.out
    found = surfaces(result)
    assert set(found) >= {
        "tables",
        "fts",
        "fts shadow tables",
        "vectors",
        "journals",
        "exports",
        "backups",
        "db file",
        "wal",
    }
    assert all(n == 0 for n in found.values()), found
    text = forgotten("audit", "forget", *target)
    assert text.code == 0 and "nothing remains" in text.out


def engine_on(cli) -> MemoryEngine:
    return MemoryEngine(cli.db, HashEmbedder(), FakeClock())


def test_a_row_left_in_a_table_is_found(forgotten):
    with engine_on(forgotten) as engine:
        engine.db.execute(
            "INSERT INTO settings (key, value) VALUES ('note', ?)", (f"remember {WORD}",)
        )
        engine.memories.add(
            NewMemory(
                content="Alice paddles on Sundays",
                subject="kayak",
                scope=Scope.USER,
                scope_id=PERSON,
            )
        )
    by_word, by_person = audit(forgotten, "--word", WORD), audit(forgotten, "--person", PERSON)
    assert by_word.code == 1 and surfaces(by_word)["tables"] == 1
    assert dict(
        next(s for s in by_word.json()["surfaces"] if s["surface"] == "tables")["where"]
    ) == {"settings": 1}
    assert by_person.code == 1 and surfaces(by_person)["tables"] >= 1


def plant_index_entry(cli) -> None:
    """An index entry whose row is gone: what a delete that skipped the index would leave."""
    with engine_on(cli) as engine:
        engine.db.execute(
            "INSERT INTO memory_fts (rowid, subject, content, tags, ptoken) VALUES (99999, 'kayak', ?, '', '')",
            (f"zzz {WORD}",),
        )


def test_an_entry_left_in_a_full_text_index_is_found(forgotten):
    plant_index_entry(forgotten)
    assert surfaces(audit(forgotten, "--word", WORD))["fts"] == 1
    assert surfaces(audit(forgotten, "--person", PERSON))["fts"] == 1  # an orphan: its row is gone


def test_the_words_left_in_the_full_text_index_s_own_tables_are_found(forgotten):
    plant_index_entry(forgotten)
    result = audit(forgotten, "--word", WORD)
    assert result.code == 1 and surfaces(result)["fts shadow tables"] >= 1


def test_a_vector_left_without_its_row_is_found(forgotten):
    with engine_on(forgotten) as engine:
        vector = np.ones(HashEmbedder().dim, dtype=np.float32)
        engine.db.execute(
            "INSERT INTO memory_vec (rowid, partition_key, embedding) VALUES (99999, 'user|x|private', ?)",
            (vector.tobytes(),),
        )
    assert surfaces(audit(forgotten, "--word", WORD))["vectors"] == 1
    assert surfaces(audit(forgotten, "--person", PERSON))["vectors"] == 1


def test_a_line_left_in_the_journals_is_found(forgotten):
    folder = forgotten.db.parent / "memory" / "dm-telegram-55"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2026-01-02.md").write_text(
        f"- 09:00 [profile] Alice's kayak is called {WORD} <!-- m:abc -->\n", encoding="utf-8"
    )
    assert surfaces(audit(forgotten, "--word", WORD))["journals"] == 1
    assert surfaces(audit(forgotten, "--person", PERSON))["journals"] >= 1


def test_an_export_left_in_the_exports_folder_is_found(forgotten, tmp_path):
    exports = tmp_path / "elsewhere"
    exports.mkdir()
    (exports / "alice.json").write_text(
        json.dumps({"person": PERSON, "memories": [f"kayak {WORD}"]}), encoding="utf-8"
    )
    assert surfaces(audit(forgotten, "--word", WORD, "--exports", str(exports)))["exports"] == 1
    assert surfaces(audit(forgotten, "--person", PERSON, "--exports", str(exports)))["exports"] == 1
    # the default folder holds none
    assert surfaces(audit(forgotten, "--word", WORD))["exports"] == 0


def test_a_backup_left_in_the_backups_folder_is_found(forgotten):
    backups = forgotten.db.parent / "backups"
    backups.mkdir()
    (backups / "store-2026-01-01.db").write_bytes(
        b"SQLite format 3\x00" + f"...{WORD.upper()}...".encode()
    )
    assert surfaces(audit(forgotten, "--word", WORD))["backups"] == 1


def test_words_left_in_the_wal_are_found(forgotten):
    """Another process wrote the words and deleted them; its WAL is not checkpointed yet (it is still open)."""
    writer = apsw.Connection(str(forgotten.db))
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("PRAGMA secure_delete = OFF")
    with writer:
        writer.execute(
            "INSERT INTO settings (key, value) VALUES ('scratch', ?)", (f"scratch {WORD}",)
        )
    with writer:
        writer.execute("DELETE FROM settings WHERE key = 'scratch'")
    try:
        result = audit(forgotten, "--word", WORD)
        assert result.code == 1 and surfaces(result)["wal"] >= 1 and surfaces(result)["tables"] == 0
    finally:
        writer.close()


def test_words_left_in_the_database_file_s_free_space_are_found(forgotten):
    """A delete made without secure_delete leaves the words in a freed cell of the file: no table shows them."""
    writer = apsw.Connection(str(forgotten.db))
    writer.execute("PRAGMA secure_delete = OFF")
    with writer:
        writer.execute(
            "INSERT INTO settings (key, value) VALUES ('scratch', ?)", (f"scratch {WORD}",)
        )
    with writer:
        writer.execute("DELETE FROM settings WHERE key = 'scratch'")
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    writer.close()
    result = audit(forgotten, "--word", WORD)
    assert result.code == 1 and surfaces(result)["db file"] >= 1 and surfaces(result)["tables"] == 0


def test_an_audit_with_nothing_to_look_for_is_refused(forgotten):
    result = forgotten("audit", "forget")
    assert result.code == 2 and "--person" in result.error_line()

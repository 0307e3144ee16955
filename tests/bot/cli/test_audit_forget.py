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
    # there was something to forget: present, never forgotten yet, so not a leftover (issue 44)
    assert sum(s["remaining"] or 0 for s in before.json()["surfaces"]) > 0
    assert before.code == 0 and before.json()["present"][0]["never_forgotten"] is True
    assert cli("audit", "forget", "--person", PERSON).code == 1  # a person's rows: always counted
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


# -- issue 44: every file beside the store, a stray journal, a word never forgotten --------------
def test_the_chat_s_log_beside_the_store_is_looked_in(forgotten):
    """``companion chat`` logs beside the store (a failed turn logs the start of its line there)."""
    import argparse

    from bot.cli.conversation import chat_log_file
    from bot.config import Settings

    log = chat_log_file(
        argparse.Namespace(verbose=False, log_file=None), Settings(db_path=forgotten.db)
    )
    assert log is not None and log.parent == forgotten.db.parent
    log.write_text(f"ERROR console: handling 'my kayak is called {WORD}' failed\n")
    (forgotten.db.parent / "MEMORY.md").write_text(f"- Alice's kayak: {WORD}\n")
    by_word, by_person = audit(forgotten, "--word", WORD), audit(forgotten, "--person", PERSON)
    found = next(s for s in by_word.json()["surfaces"] if s["surface"] == "beside the store")
    assert by_word.code == 1 and found["remaining"] == 2 and found["where"] == {"log": 1, "md": 1}
    assert by_person.code == 0  # the log line names no id of theirs
    text = forgotten("audit", "forget", "--word", WORD)
    assert "beside the store" in text.out and "left something behind" in text.out


def test_a_stray_rollback_journal_is_read_as_a_file_and_never_fails_the_audit(forgotten):
    journal = forgotten.db.with_name(forgotten.db.name + "-journal")
    journal.write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 504)
    clean = audit(forgotten, "--word", WORD)
    assert clean.code == 0, clean.err
    assert surfaces(clean)["rollback journal"] == 0 and surfaces(clean)["shm"] == 0
    journal.write_bytes(b"\x00" * 512 + f"page with {WORD} on it".encode())
    left = audit(forgotten, "--word", WORD)
    assert left.code == 1 and surfaces(left)["rollback journal"] == 1
    assert "this command writes" not in left.err
    assert journal.exists() and forgotten("memory", "list").code == 0  # other readers too
    assert journal.read_bytes().endswith(
        f"{WORD} on it".encode()
    )  # never rolled back, never touched


def test_a_store_in_rollback_mode_with_a_hot_journal_says_why_it_cannot_be_read(forgotten):
    con = apsw.Connection(str(forgotten.db))
    con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    journal = forgotten.db.with_name(forgotten.db.name + "-journal")
    journal.write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + bytes(range(256)) * 3)
    result = forgotten("audit", "forget", "--word", WORD)
    line = result.error_line()
    assert result.code != 0 and "this command writes" not in line
    assert "-journal" in line and "cannot be read without writing" in line


def test_a_word_never_forgotten_is_present_not_left_behind(cli):
    fill(cli.db)
    result = cli("audit", "forget", "--word", WORD)
    assert result.code == 0, result.out
    assert "never forgotten" in result.out and "left something behind" not in result.out
    assert WORD.lower() not in result.out.lower()


def test_a_word_of_a_forgotten_memory_still_in_a_row_is_a_finding(cli):
    """A targeted forget lays a tombstone: the word left in a memory afterwards is left behind."""
    fill(cli.db)
    with engine_on(cli) as engine:
        (kayak,) = [m for m in engine.memory_rows.listing() if WORD in m.content]
    assert cli("memory", "delete", kayak.id, "--yes").code == 0
    with engine_on(cli) as engine:
        engine.db.execute(
            "UPDATE messages SET content = ? WHERE content = 'the weather is fine'",
            (f"kayak {WORD}",),
        )
    result = audit(cli, "--word", WORD)
    assert result.code == 1 and result.json()["present"][0]["forgotten"] is True
    assert "left something behind" in cli("audit", "forget", "--word", WORD).out

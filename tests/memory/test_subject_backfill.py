"""m015 (SEC-5): a store upgraded to ``subject_person_id`` ties to their person only the facts that are certainly
theirs: filed under them, learned from their own messages alone, and with a subject that is one of their names
or "I"/"me". Everything else stays untied (its author still sees it as their own). On SQLite and PostgreSQL."""

from __future__ import annotations

from conftest import HashEmbedder

from memory.engine import MemoryEngine
from memory.models import NewMemory, Provenance, Scope
from memory.storage.messages import NewMessage
from memory.storage.migrations import M015_SUBJECT_PERSON, MIGRATIONS
from memory.storage.pg_migrations import PG_MIGRATIONS

ALICE, BOB = "telegram:55", "telegram:66"


def _said(engine: MemoryEngine, author: str, text: str) -> str:
    return engine.messages.add(
        NewMessage(
            platform="telegram", channel_id="55", author_id=author, content=text, dm_person_id=ALICE
        )
    )


def _fact(engine: MemoryEngine, content: str, subject: str, sources: tuple[str, ...]) -> None:
    engine.memories.add(
        NewMemory(content, subject, Scope.USER, ALICE, provenance=Provenance(sources=sources))
    )


def _run_m015_again(engine: MemoryEngine) -> None:
    """m015's own statements on this engine (later migrations stay as they are)."""
    position = MIGRATIONS.index(M015_SUBJECT_PERSON)
    pg = getattr(engine.db, "pg", None)
    if pg is not None:
        pg.raw.execute(PG_MIGRATIONS[position].sql)
    else:
        engine.db.execute(M015_SUBJECT_PERSON.sql)


def test_the_upgrade_ties_only_a_persons_own_facts_in_their_own_words_to_them(store_url, clock):
    with MemoryEngine(store_url, HashEmbedder(), clock) as engine:
        engine.people.resolve("telegram", "55", "Alice")
        own, bobs = (
            _said(engine, ALICE, "I'm vegetarian and I row"),
            _said(engine, BOB, "Alice rows on Sundays"),
        )
        _fact(engine, "Alice is vegetarian", "Alice", (own,))
        _fact(engine, "Alice rows", "I", (own,))
        _fact(engine, "Dave is moving to Oslo", "Dave", (own,))  # her words, about someone else
        _fact(engine, "Alice rows on Sundays", "Alice", (bobs,))  # about her, in Bob's words
        _fact(engine, "Alice likes tea", "Alice", ())  # no messages to tell by
        engine.db.execute("DROP INDEX memories_subject_person")
        engine.db.execute("ALTER TABLE memories DROP COLUMN subject_person_id")
        _run_m015_again(engine)  # as an upgrade from m014 runs it, with its backfill
        rows = engine.db.rows("SELECT content, subject_person_id FROM memories ORDER BY content")
    assert {r["content"]: r["subject_person_id"] for r in rows} == {
        "Alice is vegetarian": ALICE,
        "Alice likes tea": None,
        "Alice rows": ALICE,
        "Alice rows on Sundays": None,
        "Dave is moving to Oslo": None,
    }

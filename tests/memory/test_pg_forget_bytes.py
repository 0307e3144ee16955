"""SEC-3 on PostgreSQL at the byte level: what `/forget everything` leaves in the server's data directory, and what
the operator's rewrite (``companion store scrub``, ``Database.rewrite``) removes (SCALE-1, issue 25).

A private server in the test's folder (its data directory is the folder, read here file by file) holds Alice's
words among Bob's: memories (subject, content, a vector), DM messages, and one long message PostgreSQL keeps in
the TOAST table (random hex around the marker does not compress, so the marker is stored as written). The marker
is its own lexeme (the english stemmer leaves it whole), so a GIN key holding it is found too; a vector is found
by its float32 bytes. Measured on PostgreSQL 18.3 (pgserver wheel), what holds Alice's words:

    when                                          in base/ (tables, TOAST, indexes)                    in pg_wal/
    written, CHECKPOINT                           memories, messages, TOAST, both GIN (words),         yes
                                                  memory_vec, embed_cache
    forget + its VACUUM (INDEX_CLEANUP ON),       memories 9, messages 2, embed_cache 1 (freed space   yes (70)
    CHECKPOINT                                    not yet reused: VACUUM does not zero it); the GIN
                                                  indexes 4 + 5 (a deleted row's lexeme stays a key)
    rewrite: VACUUM FULL, 2x pg_switch_wal() +    nothing                                              yes (70): the old
    CHECKPOINT                                                                                         segment is renamed
                                                                                                       for reuse, not wiped
    the same with wal_recycle = off               nothing                                              nothing

(counts: occurrences of the marker or of one of Alice's vectors; the rewrite took the database from 10.49 to 10.23
MB.) TOAST and the btree on ``subject`` were clean after the forget's VACUUM in this layout; the table, not the
layout, is what the assertions hold to: after the forget, only the WAL is asserted; after the rewrite, nothing in
base/; with wal_recycle off, nothing at all.

What no command here reaches: WAL archives, base backups and dumps made before, and replicas' own WAL (the
docs/postgresql.md list). What the file system keeps of unlinked files is below PostgreSQL.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import HashEmbedder, remember, say

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import Visibility
from memory.upkeep.forgetting import forget_everything, forget_guild

MARK = "zyqxolotlquixwel"


@pytest.fixture
def server() -> Iterator[Any]:
    """A server of its own: the grep reads only this store's files, and ALTER SYSTEM changes no other test's server.
    (In a temp folder of its own, as tests/pg_support.py does: the server's user must reach it.)"""
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp())
    import pgserver

    with tempfile.TemporaryDirectory(prefix="companion-pg-bytes-") as folder:
        running = pgserver.get_server(folder, cleanup_mode="stop")
        yield running
        running.cleanup()


def holding(folder: Path, needles: list[bytes]) -> dict[str, int]:
    """file (relative to the data directory) -> how many of ``needles`` occur in it, for every file that holds one."""
    found = {}
    for path in (p for p in folder.rglob("*") if p.is_file()):
        try:
            data = path.read_bytes()
        except (
            OSError
        ):  # a file removed while the folder was walked (a WAL segment retired, a temp file)
            continue
        hits = sum(data.count(needle) for needle in needles)
        if hits:
            found[str(path.relative_to(folder))] = hits
    return found


def named(found: dict[str, int], url: str) -> dict[str, int]:
    """The same, with each relation file named by its table or index ("base/16384/16982" -> "memories")."""
    with psycopg.connect(url) as con:
        names = dict(
            con.execute(
                "SELECT pg_relation_filenode(oid)::text, relname FROM pg_class WHERE pg_relation_filenode(oid) <> 0"
            )
        )
    return {
        names.get(Path(f).name.split("_")[0], f) if f.startswith("base/") else f.split("/")[0]: n
        for f, n in found.items()
    }


def checkpoint(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CHECKPOINT")


def plant(engine: MemoryEngine) -> list[bytes]:
    """Alice's words among Bob's (before and after hers, so her rows sit in the middle of pages); what to grep for."""
    for i in range(100):
        remember(
            engine,
            f"Bob keeps bees and grows tomatoes, hive {i}",
            scope_id="bob",
            subject=f"bees {i}",
        )
        say(engine, f"my bees made honey again, jar {i}", author="bob", dm_person="bob")
        if i == 50:
            for j in range(3):
                remember(
                    engine,
                    f"Alice breeds {MARK} finches, pair {j}",
                    subject=f"{MARK} {j}",
                    visibility=Visibility.PRIVATE,
                )
                say(engine, f"I breed {MARK} finches, pair {j}", author="alice", dm_person="alice")
            say(
                engine,
                f"{secrets.token_hex(2000)} {MARK} {secrets.token_hex(2000)}",
                author="alice",
                dm_person="alice",
            )
    vectors = engine.db.execute(
        "SELECT v.embedding FROM memory_vec AS v JOIN memories AS m ON m.rid = v.rid WHERE m.scope_id = 'alice'"
    )
    return [MARK.encode(), *(vector.to_numpy().tobytes() for (vector,) in vectors)]


def test_forget_everything_then_the_rewrite_leave_no_byte_of_the_words_or_vectors_in_the_data_directory(
    server,
):
    folder, url = Path(server.pgdata), server.get_uri()
    engine = MemoryEngine(url, HashEmbedder(), FakeClock())
    try:
        needles = plant(engine)
        assert len(needles) == 4  # the marker and Alice's three memory vectors
        checkpoint(url)
        written = named(holding(folder, needles), url)
        # the test proves something only if every place a word can sit held it first
        assert {
            "memories",
            "messages",
            "memories_words",
            "messages_words",
            "memory_vec",
            "pg_wal",
        } <= written.keys(), written
        assert any(name.startswith("pg_toast_") for name in written), written

        counts = forget_everything(engine, ["alice"])  # what "/forget everything confirm" runs
        assert (counts["memories"], counts["messages"]) == (3, 4)
        assert (
            engine.db.scalar("SELECT COUNT(*) FROM memories WHERE content LIKE ?", (f"%{MARK}%",))
            == 0
        )
        cached = [
            bytes(vector) for (vector,) in engine.db.execute("SELECT vector FROM embed_cache")
        ]
        # no live row keeps a vector
        assert not [v for v in cached if any(needle in v for needle in needles[1:])]
        checkpoint(url)
        forgotten = named(holding(folder, needles), url)
        print("\nafter the forget and its VACUUM:", forgotten)
        # what VACUUM cannot reach: the WAL keeps the writes until its segments are reused
        assert "pg_wal" in forgotten

        recycled = engine.rewrite()
        assert any("wal_recycle" in line for line in recycled.left)
        rewritten = named(holding(folder, needles), url)
        print(
            "after the rewrite (wal_recycle on):",
            rewritten,
            f"{recycled.bytes_before:,} -> {recycled.bytes_after:,} bytes",
        )
        # no table, TOAST or index file holds it
        assert not [name for name in rewritten if name != "pg_wal"], rewritten

        with psycopg.connect(url, autocommit=True) as con:
            con.execute("ALTER SYSTEM SET wal_recycle = off")
            con.execute("SELECT pg_reload_conf()")
        done = engine.rewrite()
        assert not any("wal_recycle" in line for line in done.left)
        assert holding(folder, needles) == {}  # nothing anywhere in the data directory
        # what the operator still owns is said
        assert any("base backups" in line for line in done.left)
    finally:
        engine.close()


def test_a_guild_purge_runs_on_postgresql_and_keeps_the_other_guilds_rows(pg_url):
    engine = MemoryEngine(pg_url, HashEmbedder(), FakeClock())
    try:
        remember(engine, "Bob plays in Glasswyrm", scope_id="bob", guild_id="g1")
        kept = remember(
            engine, "Bob plays chess in the other server", scope_id="bob", guild_id="g2"
        )
        say(engine, f"the {MARK} meets on Fridays", author="bob", guild="g1")
        say(engine, "hello from g2", author="bob", guild="g2")
        # its chats are found with json_extract, rewritten for PostgreSQL
        counts = forget_guild(engine, "g1")
        assert (counts["memories"], counts["messages"]) == (1, 1)
        assert [r for (r,) in engine.db.execute("SELECT id FROM memories")] == [kept.id]
        assert (
            engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE ?", (f"%{MARK}%",))
            == 0
        )
    finally:
        engine.close()

"""``companion store copy``: a store moved SQLite -> PostgreSQL -> SQLite keeps every row, id, link and vector, recalls
the same, resumes after an interruption without duplicates, and a copy it will not make says why and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import HashEmbedder, contents, dm_ctx, fts_rids, guild_ctx, remember, say

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.errors import CopyRefused
from memory.models import EntityRef, Scope, Visibility
from memory.storage import catalog
from memory.upkeep.copy import PROGRESS, VECTOR_TABLES, copy_store, dependency_order
from memory.upkeep.forgetting import forget_memory
from tests.pg_support import fresh_database

QUERIES = [
    (dm_ctx("alice"), "bees honey"),
    (guild_ctx("g1", "bob", "bob"), "chess club"),
    (dm_ctx("owner", owner=True), "server keys"),
]


def make_store(path: Path | str, clock: FakeClock) -> None:
    """Memories in every scope, messages with a reply, people and their links, entities, vectors, a tombstone."""
    with MemoryEngine(path, HashEmbedder(), clock) as eng:
        remember(
            eng,
            "Alice keeps bees and sells honey",
            entities=(EntityRef("Alice", "person", (("keeps", "bees"),)),),
        )
        remember(
            eng,
            "Alice's diary is private",
            visibility=Visibility.PRIVATE,
            tags=("diary", "private"),
        )
        remember(eng, "The chess club meets on Thursdays", scope=Scope.GUILD, scope_id="g1")
        remember(eng, "The server keys are in the drawer", scope=Scope.OWNER, scope_id="owner")
        gone = remember(eng, "Alice once lived in Lisbon")
        forget_memory(eng, gone.id)  # leaves a tombstone (the forget registry's keyed hashes)
        for n in range(7):
            say(eng, f"bees are busy today {n}", author="alice", dm_person="alice")
        say(eng, "the chess club is full", author="bob", guild="g1")
        people = eng.people
        people.resolve("discord", "alice", "Alice")
        people.resolve("telegram", "42", "alice_tg")
        people.set_sharing("discord:alice", True)


def table_rows(url: str, clock: FakeClock) -> dict[str, list[tuple]]:
    """Every row of every table of a store, sorted, derived tables aside: what a copy must keep as it is."""
    with MemoryEngine(url, None, clock) as eng:
        out = {}
        for table in set(catalog.tables(eng.db)) - VECTOR_TABLES:  # compared by ``vectors``
            cols = [c for c in catalog.columns(eng.db, table) if c != "words"]
            rows = eng.db.execute(f"SELECT {', '.join(cols)} FROM {table}")
            out[table] = sorted(
                (tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows),
                key=repr,
            )
        return out


def vectors(url: str, clock: FakeClock) -> dict[int, list[float]]:
    with MemoryEngine(url, None, clock) as eng:
        index = eng.memory_rows.corpus.vectors
        rids = [r for (r,) in eng.db.execute("SELECT rid FROM memories")]
        return {rid: [round(float(x), 5) for x in vec] for rid, vec in index.get(rids).items()}


def recalled(url: str, clock: FakeClock) -> list[list[str]]:
    with MemoryEngine(url, HashEmbedder(), clock) as eng:
        return [
            [h.item.content for h in eng.recall.recall(ctx, text, top_k=3)] for ctx, text in QUERIES
        ]


def test_a_store_goes_to_postgresql_and_back_with_every_row_id_vector_and_the_same_recall(
    tmp_path, pg_url, clock
):
    first, back = tmp_path / "first.db", tmp_path / "back.db"
    make_store(first, clock)
    there = copy_store(str(first), pg_url, batch=3)
    assert there.ok and not there.resumed
    home = copy_store(pg_url, f"sqlite:///{back}", batch=3)
    assert home.ok
    assert {c.table for c in home.counts} >= {
        "memories",
        "messages",
        "identities",
        "tombstones",
        "memory_vec",
        "message_vec",
    }
    assert (
        table_rows(str(back), clock) == table_rows(str(first), clock) == table_rows(pg_url, clock)
    )
    assert vectors(str(back), clock) == vectors(str(first), clock) == vectors(pg_url, clock)
    tops = recalled(str(first), clock)
    assert all(tops) and recalled(str(back), clock) == tops
    assert [top[0] for top in recalled(pg_url, clock)] == [top[0] for top in tops]


def test_the_copied_store_is_searchable_by_words_and_takes_new_rows_after_the_copied_ids(
    tmp_path, pg_url, clock
):
    make_store(tmp_path / "first.db", clock)
    copy_store(str(tmp_path / "first.db"), pg_url)
    copy_store(pg_url, str(tmp_path / "back.db"))
    for url in (pg_url, str(tmp_path / "back.db")):
        with MemoryEngine(url, HashEmbedder(), clock) as eng:
            # derived indexes were made again
            assert fts_rids(eng, "honey") and fts_rids(eng, "busy", "message_fts")
            top = int(eng.db.scalar("SELECT MAX(rid) FROM memories"))
            # the sequence was moved past the copied ids
            assert remember(eng, "Alice learned to knit").rid > top
            assert "Alice learned to knit" in contents(
                eng.recall.recall(dm_ctx("alice"), "knit", top_k=3)
            )


def test_an_interrupted_copy_resumes_where_it_stopped_with_no_row_twice(tmp_path, pg_url, clock):
    make_store(tmp_path / "first.db", clock)
    calls = []

    def stop_after_four(done: int, total: int) -> None:
        calls.append(done)
        if (
            len(calls) == 5
        ):  # the first call reports what was already there; then four batches commit
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(str(tmp_path / "first.db"), pg_url, batch=2, progress=stop_after_four)
    with MemoryEngine(pg_url, None, clock) as eng:
        # part of it is there
        assert 0 < sum(catalog.count(eng.db, t) for t in ("settings", "memories", "messages")) < 30
        assert PROGRESS in catalog.tables(eng.db)
    again = copy_store(str(tmp_path / "first.db"), pg_url, batch=2)
    assert again.ok and again.resumed
    assert table_rows(pg_url, clock) == table_rows(str(tmp_path / "first.db"), clock)
    with MemoryEngine(pg_url, None, clock) as eng:
        assert PROGRESS not in catalog.tables(eng.db)  # a finished copy leaves a plain store


def test_a_copy_into_a_store_that_has_rows_is_refused_and_changes_nothing(tmp_path, pg_url, clock):
    make_store(tmp_path / "first.db", clock)
    with MemoryEngine(pg_url, None, clock) as eng:
        remember(eng, "Bob's own memory, not a copy of anything")
    before = table_rows(pg_url, clock)
    with pytest.raises(CopyRefused, match="DST is not empty"):
        copy_store(str(tmp_path / "first.db"), pg_url)
    assert table_rows(pg_url, clock) == before


def test_a_partial_copy_of_another_store_is_not_taken_for_ours(tmp_path, pg_url, clock):
    make_store(tmp_path / "a.db", clock)
    make_store(tmp_path / "b.db", clock)
    with pytest.raises(KeyboardInterrupt):
        copy_store(
            str(tmp_path / "a.db"), pg_url, batch=1, progress=lambda done, total: _stop_at(done, 3)
        )
    with pytest.raises(CopyRefused, match="unfinished copy of another store"):
        copy_store(str(tmp_path / "b.db"), pg_url)


def refused_before_dst(tmp_path, source: str, reason: str) -> None:
    """Copying ``source`` (a file in ``tmp_path``) is refused for ``reason``, and no destination file is made."""
    with pytest.raises(CopyRefused, match=reason):
        copy_store(str(tmp_path / source), str(tmp_path / "dst.db"))
    assert not (tmp_path / "dst.db").exists()


def _stop_at(done: int, limit: int) -> None:
    if done >= limit:
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    "source, reason",
    [
        ("missing.db", "no store exists there"),
        ("empty.db", "not a companion store"),
        ("foreign.db", "not a companion store"),
        ("garbage.db", "not a usable companion store"),
    ],
)
def test_a_source_that_is_not_a_store_is_refused_and_nothing_is_made(tmp_path, source, reason):
    import apsw

    apsw.Connection(str(tmp_path / "empty.db")).close()
    con = apsw.Connection(str(tmp_path / "foreign.db"))
    con.execute("CREATE TABLE things (a)")
    con.close()
    (tmp_path / "garbage.db").write_bytes(b"not a database at all" * 200)
    refused_before_dst(tmp_path, source, reason)


def test_a_source_from_a_newer_program_is_refused(tmp_path, clock):
    make_store(tmp_path / "new.db", clock)
    with MemoryEngine(tmp_path / "new.db", None, clock) as eng:
        eng.db.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (999, 'm999_future', '')"
        )
    refused_before_dst(tmp_path, "new.db", "newer than this program")


def test_a_store_is_never_copied_onto_itself(tmp_path, pg_url, clock):
    make_store(tmp_path / "m.db", clock)
    (tmp_path / "link.db").symlink_to(tmp_path / "m.db")
    for dst in (
        str(tmp_path / "m.db"),
        f"sqlite:///{tmp_path / 'm.db'}",
        str(tmp_path / "link.db"),
    ):
        with pytest.raises(CopyRefused, match="same store"):
            copy_store(str(tmp_path / "m.db"), dst)
    with pytest.raises(CopyRefused, match="same store"):
        copy_store(pg_url, pg_url.replace("postgres:@", "postgres:another-spelling@", 1))


def test_a_database_where_pgvector_cannot_be_installed_is_refused_before_anything_is_written(
    tmp_path, pg_server, clock
):
    """pgvector is not a trusted extension: a role that is not a superuser cannot install it in its own database."""
    import psycopg

    make_store(tmp_path / "m.db", clock)
    admin = pg_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute("CREATE ROLE plain LOGIN NOSUPERUSER")
        con.execute("CREATE DATABASE plain_db OWNER plain")
    url = _as_role(pg_server.get_uri("plain_db"), "plain")
    with pytest.raises(CopyRefused, match="ask a superuser to run CREATE EXTENSION vector"):
        copy_store(str(tmp_path / "m.db"), url)
    with psycopg.connect(url) as con:
        assert con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone() == (0,)


def _as_role(uri: str, role: str) -> str:
    """The server's URL (postgresql://postgres:@/db?host=...) for another role."""
    assert uri.startswith("postgresql://postgres:@")
    return uri.replace("postgres:@", f"{role}@", 1)


@pytest.mark.parametrize(
    "facts, reason",
    [
        (dict(server_version=120_019), "PostgreSQL 12 is too old"),
        (
            dict(vector_available=None, vector_installed=None),
            "the server has no pgvector extension",
        ),
        (dict(vector_available="0.4.4", vector_installed=None), "pgvector 0.4.4 is too old"),
        (dict(vector_installed="0.4.1"), "pgvector 0.4.1 is too old"),
        (dict(vector_installed=None, superuser=False), "ask a superuser"),
        (dict(), None),
        (dict(vector_installed="0.8.2", superuser=False), None),
    ],
)
def test_the_server_check_says_what_is_missing_or_too_old(facts, reason):
    usual = dict(
        where="postgresql://h/db",
        server_version=180_003,
        vector_available="0.8.2",
        vector_installed=None,
        superuser=True,
        has_store=False,
    )
    found = catalog.refusal(catalog.ServerFacts(**(usual | facts)))
    assert (found is None) if reason is None else (reason in found)


def test_tables_are_copied_after_the_tables_they_reference():
    order = dependency_order(
        [
            "memory_tags",
            "checkins",
            "memories",
            "bulletin_partitions",
            "bulletins",
            "settings",
            "ingest_passages",
            "ingest_files",
        ]
    )
    assert order.index("memories") < min(
        order.index("memory_tags"), order.index("checkins"), order.index("ingest_passages")
    )
    assert order.index("bulletins") < order.index("bulletin_partitions")
    assert order.index("ingest_files") < order.index("ingest_passages")


def test_a_second_postgresql_database_is_a_different_store(pg_server):
    assert catalog.identity(fresh_database(pg_server)) != catalog.identity(
        fresh_database(pg_server)
    )


def test_a_postgresql_database_of_another_program_is_refused_and_left_alone(
    tmp_path, pg_url, clock
):
    import psycopg

    make_store(tmp_path / "m.db", clock)
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE invoices (id int PRIMARY KEY, total numeric)")
    with pytest.raises(CopyRefused, match="tables of another program"):
        copy_store(str(tmp_path / "m.db"), pg_url)
    with psycopg.connect(pg_url) as con:
        tables = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    assert tables == [("invoices",)]


def test_a_source_with_a_table_this_program_does_not_know_is_refused_before_dst_is_made(
    tmp_path, clock
):
    make_store(tmp_path / "m.db", clock)
    with MemoryEngine(tmp_path / "m.db", None, clock) as eng:
        eng.db.execute("CREATE TABLE plugin_notes (id INTEGER PRIMARY KEY, note TEXT)")
    refused_before_dst(tmp_path, "m.db", "plugin_notes")


KILLED_MIDWAY = """
import os, signal, sys
from memory.upkeep.copy import copy_store

def die(done, total):
    if done >= 9:  # a hard kill: no finally, no rollback, no close runs in this process
        os.kill(os.getpid(), signal.SIGKILL)

copy_store(sys.argv[1], sys.argv[2], batch=2, progress=die)
"""


def test_a_copy_killed_with_sigkill_goes_on_when_run_again_and_counts_the_same(
    tmp_path, pg_url, clock
):
    import os
    import subprocess
    import sys

    make_store(tmp_path / "m.db", clock)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_MIDWAY, str(tmp_path / "m.db"), pg_url],
        cwd=root,
        env=os.environ | {"PYTHONPATH": str(root)},
    )
    assert done.returncode == -9
    again = copy_store(str(tmp_path / "m.db"), pg_url, batch=2)
    assert again.resumed and again.ok
    assert table_rows(pg_url, clock) == table_rows(str(tmp_path / "m.db"), clock)
    assert vectors(pg_url, clock) == vectors(str(tmp_path / "m.db"), clock)


def test_a_connection_string_is_not_taken_for_a_file_name(tmp_path, clock):
    make_store(tmp_path / "m.db", clock)
    with pytest.raises(CopyRefused, match="postgresql://"):
        copy_store(str(tmp_path / "m.db"), "host=localhost dbname=companion user=bot")

"""PostgreSQL as the store (SCALE-1): what only that engine promises. The store contract itself runs on both
engines through the ``any_engine`` fixture (test_memory_writes, test_forget_exactly, test_memory_scopes)."""

from __future__ import annotations

import time

import pytest
from conftest import HashEmbedder, contents, dm_ctx, remember

from memory.engine import MemoryEngine
from memory.storage.pg import open_database, to_pg
from memory.upkeep.forgetting import forget_memory


def _until(check, seconds: float = 5.0) -> bool:
    """Polls ``check`` (a notification crosses from the other connection's commit within milliseconds)."""
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_what_one_engine_forgets_the_other_stops_showing_though_its_mirror_had_it_loaded(
    pg_url, clock
):
    first, second = (
        MemoryEngine(pg_url, HashEmbedder(), clock),
        MemoryEngine(pg_url, HashEmbedder(), clock),
    )
    try:
        kept = remember(first, "Alice keeps bees on her roof")
        gone = remember(first, "Alice's bank PIN is hidden under the bees")
        seen = contents(second.recall.recall(dm_ctx("alice"), "bees", top_k=5))
        assert {
            kept.content,
            gone.content,
        } <= seen  # the second process loaded the partition into its mirror
        forget_memory(first, gone.id)
        assert _until(
            lambda: (
                gone.content
                not in contents(second.recall.recall(dm_ctx("alice"), "bees PIN", top_k=5))
            )
        )
        assert kept.content in contents(second.recall.recall(dm_ctx("alice"), "bees", top_k=5))
    finally:
        first.close()
        second.close()


def test_two_engines_on_one_database_migrate_it_once(pg_url, clock):
    first, second = MemoryEngine(pg_url, None, clock), MemoryEngine(pg_url, None, clock)
    try:
        versions = first.db.rows("SELECT version FROM schema_version ORDER BY version")
        assert [r["version"] for r in versions] == list(range(1, len(versions) + 1))
    finally:
        first.close()
        second.close()


def test_a_url_picks_the_engine_and_a_plain_path_or_sqlite_url_stays_sqlite(tmp_path, pg_url):
    assert open_database(str(tmp_path / "a.db")).engine == "sqlite"
    assert open_database(f"sqlite:///{tmp_path / 'b.db'}").engine == "sqlite"
    assert (tmp_path / "b.db").is_file()
    db = open_database(pg_url)
    try:
        assert db.engine == "postgresql"
    finally:
        db.close()


def test_user_text_inside_quotes_never_becomes_a_parameter_or_a_format():
    assert (
        to_pg("SELECT ? || ':' || '?%' FROM t WHERE a = :name")
        == "SELECT %s || ':' || '?%%' FROM t WHERE a = %(name)s"
    )
    assert (
        to_pg("INSERT OR IGNORE INTO t (a) VALUES (?)")
        == "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING"
    )


def test_words_alone_find_a_memory_on_postgresql_and_only_in_the_partitions_the_context_sees(
    pg_url, clock
):
    # no embedder: recall is the tsvector search and recency alone
    eng = MemoryEngine(pg_url, None, clock)
    try:
        remember(eng, "Alice plays the cello on Sundays", scope_id="alice")
        remember(eng, "Bob plays the cello badly", scope_id="bob")
        assert eng.memory_rows.corpus.text_search("cello", dm_ctx("alice").memory_partitions(), 10)
        assert contents(eng.recall.recall(dm_ctx("alice"), "cello", top_k=5)) == {
            "Alice plays the cello on Sundays"
        }
    finally:
        eng.close()


@pytest.fixture
def numbers(pg_url):
    """A PostgreSQL store holding a table ``numbers`` of 1 to 10."""
    db = open_database(pg_url)
    try:
        db.execute("CREATE TABLE numbers (n BIGINT)")
        db.execute("INSERT INTO numbers SELECT generate_series(1, 10)")
        yield db
    finally:
        db.close()


def test_a_query_read_through_a_server_cursor_gives_every_row_once_a_chunk_at_a_time(numbers):
    chunks = list(numbers.chunks("SELECT n FROM numbers WHERE n > ? ORDER BY n", (0,), 3))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert [n for c in chunks for (n,) in c] == list(range(1, 11))
    with (
        numbers.transaction()
    ):  # inside a transaction: a savepoint, and the outer transaction goes on
        assert sum(len(c) for c in numbers.chunks("SELECT n FROM numbers", (), 4)) == 10
        numbers.execute("INSERT INTO numbers VALUES (11)")
    assert numbers.scalar("SELECT count(*) FROM numbers") == 11


def test_a_chunked_read_left_halfway_leaves_no_transaction_open(numbers, pg_url):
    reading = numbers.chunks("SELECT n FROM numbers", (), 2)
    assert len(next(reading)) == 2
    reading.close()  # the mirror's load failing halfway, say
    assert not numbers.con.in_transaction
    # autocommit again: another connection sees it at once
    numbers.execute("INSERT INTO numbers VALUES (11)")
    other = open_database(pg_url)
    try:
        assert other.scalar("SELECT count(*) FROM numbers") == 11
    finally:
        other.close()

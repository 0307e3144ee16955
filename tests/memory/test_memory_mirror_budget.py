"""The vector mirror's memory budget: least-recently-searched partitions are evicted, and what does not
fit is searched through vec0, with the same answers."""

from __future__ import annotations

import numpy as np
import pytest

from bot.composition import open_engine
from bot.config import Settings
from memory.engine import MemoryEngine
from memory.models import NewMemory, Scope
from memory.storage.vectors import MirrorBudget, VectorIndex

ROWS = 100  # rows per person; each person's memories are one partition


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(engine: MemoryEngine, person: str, vectors: np.ndarray) -> tuple[str, list[int]]:
    """``person``'s memories with these vectors: (their partition key, their rowids)."""
    ids = engine.memories.insert_batch(
        [
            (
                NewMemory(
                    content=f"{person} note {i}", subject="notes", scope=Scope.USER, scope_id=person
                ),
                v,
            )
            for i, v in enumerate(vectors)
        ]
    )
    rows = [engine.memory_rows.get(i) for i in ids]
    return rows[0].partition_key, [r.rid for r in rows]


def _partition_bytes(dim: int, rows: int = ROWS) -> int:
    return rows * (dim + 4 + 8)  # int8 row, its scale, its rowid


@pytest.fixture
def people(engine, embedder) -> dict[str, tuple[str, list[int], np.ndarray]]:
    rng = np.random.default_rng(11)
    out = {}
    for person in ("alice", "bob", "carol"):
        vectors = _unit(rng, ROWS, embedder.dim)
        key, rids = _fill(engine, person, vectors)
        out[person] = (key, rids, vectors)
    return out


def _index(engine: MemoryEngine, budget: MirrorBudget) -> VectorIndex:
    return VectorIndex(engine.db, "memory_vec", "memories", budget=budget)


def test_past_the_budget_the_least_recently_searched_partition_is_evicted(engine, embedder, people):
    index = _index(engine, MirrorBudget(2 * _partition_bytes(embedder.dim)))  # room for two people
    alice, bob, carol = (people[p][0] for p in ("alice", "bob", "carol"))
    query = people["alice"][2][0]
    for key in (alice, bob, alice, carol):  # bob is now the least recently searched
        index.search(query, (key,), 5)
    assert index.budget.loaded() == [("memory_vec", alice), ("memory_vec", carol)]
    assert sorted(index.loaded_partitions()) == sorted([alice, carol])
    assert index.budget.used <= index.budget.max_bytes


def test_an_evicted_partition_is_loaded_again_and_answers_as_before(engine, embedder, people):
    index = _index(engine, MirrorBudget(_partition_bytes(embedder.dim)))  # one person at a time
    bob, rids, vectors = people["bob"]
    before = index.search(vectors[7], (bob,), 3)
    index.search(vectors[7], (people["alice"][0],), 3)  # alice pushes bob out
    assert index.loaded_partitions() == [people["alice"][0]]
    after = index.search(vectors[7], (bob,), 3)
    assert index.loaded_partitions() == [bob]
    assert [r for r, _ in after] == [r for r, _ in before]
    assert after[0][0] == rids[7]


def test_a_context_larger_than_the_budget_gets_the_same_answers_through_vec0(
    engine, embedder, people
):
    everyone = tuple(people[p][0] for p in ("alice", "bob", "carol"))
    unlimited = _index(engine, MirrorBudget(None))
    # one of the three fits
    tight = _index(engine, MirrorBudget(_partition_bytes(embedder.dim) + 10))
    rng = np.random.default_rng(12)
    for person in ("alice", "bob", "carol"):
        _, rids, vectors = people[person]
        query = vectors[3] + 0.05 * _unit(rng, 1, embedder.dim)[0]
        want, got = unlimited.search(query, everyone, 10), tight.search(query, everyone, 10)
        assert got[0][0] == rids[3]
        assert [r for r, _ in got] == [r for r, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=0.01)
    # the search kept its own partition, the rest went to vec0
    assert len(tight.loaded_partitions()) == 1

    nothing_fits = _index(engine, MirrorBudget(100))
    key, rids, vectors = people["carol"]
    assert nothing_fits.search(vectors[5], (key,), 1)[0][0] == rids[5]
    assert nothing_fits.loaded_partitions() == []


def test_rows_written_while_a_partition_is_loaded_show_up_in_its_searches(engine, embedder, people):
    # the engine's own index: its writes reach the mirror
    vectors = engine.memory_rows.corpus.vectors
    key, _, stored = people["alice"]
    vectors.search(stored[0], (key,), 1)
    assert key in vectors.loaded_partitions()
    fresh = _unit(np.random.default_rng(13), 50, embedder.dim)
    _, new_rids = _fill(engine, "alice", fresh)
    for rid, v in zip(new_rids[::10], fresh[::10], strict=True):
        assert vectors.search(v, (key,), 1)[0][0] == rid
    # the budget counts the new rows and the spare room made for more
    assert engine.mirror_budget.used >= _partition_bytes(embedder.dim, ROWS + 50)

    engine.memories.delete_rids([new_rids[0]])
    assert new_rids[0] not in {rid for rid, _ in vectors.search(fresh[0], (key,), 5)}


def test_the_budget_comes_from_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_VECTOR_MIRROR_MB", "64")
    settings = Settings(db_path=tmp_path / "m.db", embeddings="none", _env_file=None)
    assert settings.vector_mirror_mb == 64
    engine = open_engine(settings, None)
    try:
        assert engine.mirror_budget.max_bytes == 64 * 1024 * 1024
        assert engine.memory_rows.corpus.vectors.budget is engine.messages.corpus.vectors.budget
    finally:
        engine.close()
    monkeypatch.delenv("COMPANION_VECTOR_MIRROR_MB")
    assert Settings(_env_file=None).vector_mirror_mb == 512


def test_the_shortlist_follows_rows_added_past_the_spare_room_and_rows_removed(
    engine, embedder, people
):
    key, _, stored = people["bob"]
    # sign bits, then int8 re-score
    shortlisted = VectorIndex(engine.db, "memory_vec", "memories", exact_limit=0)
    shortlisted.search(stored[0], (key,), 1)
    rng = np.random.default_rng(14)
    added: list[tuple[int, np.ndarray]] = []
    for n in (300, 900, 700):  # 100 loaded + 1900 more: outgrows the first spare room
        fresh = _unit(rng, n, embedder.dim)
        _, rids = _fill(engine, "bob", fresh)
        shortlisted.mirror_add([(rid, key, v) for rid, v in zip(rids, fresh, strict=True)])
        added += zip(rids, fresh, strict=True)
        for rid, v in added[::97]:
            assert shortlisted.search(v, (key,), 1)[0][0] == rid
    gone_rid, gone_vector = added[5]
    engine.memories.delete_rids([gone_rid])
    shortlisted.mirror_remove([gone_rid])
    assert gone_rid not in {rid for rid, _ in shortlisted.search(gone_vector, (key,), 10)}
    assert shortlisted.search(added[6][1], (key,), 1)[0][0] == added[6][0]


def test_a_rewritten_row_moves_to_the_end_and_is_still_found_by_rowid(engine, embedder, people):
    index = _index(engine, MirrorBudget(None))
    key, rids, stored = people["carol"]
    index.search(stored[0], (key,), 1)
    moved = _unit(np.random.default_rng(15), 1, embedder.dim)[0]
    index.mirror_add([(rids[2], key, moved)])  # rids are no longer in order
    got = index.get([rids[2], rids[40], rids[0]])
    assert np.allclose(got[rids[2]], moved, atol=0.01) and np.allclose(
        got[rids[40]], stored[40], atol=0.01
    )
    assert index.search(moved, (key,), 1)[0][0] == rids[2]


def test_rows_another_process_adds_to_a_loaded_partition_are_found_and_counted(
    engine, embedder, people, tmp_path
):
    """The store grows under a loaded partition through another connection (the CLI, an ingest): the mirror
    notices the commit, drops what it held and loads the partition again, with the new rows, once."""
    vectors = engine.memory_rows.corpus.vectors
    key, _, stored = people["alice"]
    vectors.search(stored[0], (key,), 1)
    before = engine.mirror_budget.used
    other = MemoryEngine(tmp_path / "m.db", embedder, engine.clock)
    try:
        fresh = _unit(np.random.default_rng(21), 40, embedder.dim)
        _, new_rids = _fill(other, "alice", fresh)
    finally:
        other.close()
    for rid, v in zip(new_rids[::8], fresh[::8], strict=True):
        assert vectors.search(v, (key,), 1)[0][0] == rid
    assert vectors.search(stored[0], (key,), 1)[0][0] == people["alice"][1][0]  # the old rows too
    assert engine.mirror_budget.loaded() == [("memory_vec", key)]  # reloaded, not held twice
    assert engine.mirror_budget.used == before + _partition_bytes(embedder.dim, 40)


def test_a_loaded_partition_that_grows_past_the_budget_pushes_out_the_least_recently_searched(
    engine, embedder, people
):
    vectors = engine.memory_rows.corpus.vectors
    vectors.budget.max_bytes = 2 * _partition_bytes(embedder.dim) + 1024  # alice and bob, barely
    alice, bob = people["alice"][0], people["bob"][0]
    vectors.search(people["bob"][2][0], (bob,), 1)
    vectors.search(people["alice"][2][0], (alice,), 1)
    assert sorted(vectors.loaded_partitions()) == sorted([alice, bob])
    fresh = _unit(np.random.default_rng(22), 30, embedder.dim)
    _, new_rids = _fill(engine, "alice", fresh)  # alice's mirror grows by 30 rows (and spare room)
    assert vectors.search(fresh[3], (alice,), 1)[0][0] == new_rids[3]
    assert vectors.loaded_partitions() == [alice]  # bob, searched longest ago, made way
    # alice alone may now hold more than the budget (her spare room for new rows): a search never evicts the
    # partitions it is using, but the next search elsewhere does
    assert vectors.search(people["bob"][2][4], (bob,), 1)[0][0] == people["bob"][1][4]
    assert vectors.loaded_partitions() == [bob]
    assert vectors.budget.used <= vectors.budget.max_bytes


def test_a_budget_of_zero_searches_everything_through_vec0(engine, embedder, people):
    vectors = engine.memory_rows.corpus.vectors
    vectors.budget.max_bytes = 0
    vectors.invalidate()
    for person in ("alice", "bob", "carol"):
        key, rids, stored = people[person]
        assert vectors.search(stored[9], (key,), 1)[0][0] == rids[9]
    assert vectors.loaded_partitions() == [] and vectors.budget.used == 0

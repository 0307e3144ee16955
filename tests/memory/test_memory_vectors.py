"""The vector mirror's shortlist: sign-bit Hamming distance picks candidates that exact cosine then ranks."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import dm_ctx

from memory.models import NewMemory, Scope
from memory.storage.vectors import VectorIndex, hamming, nearest, sign_bits


def _unit(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_hamming_counts_the_dimensions_whose_sign_differs():
    rng = np.random.default_rng(1)
    # 200 dims: the last word is padded
    mat, query = (
        _unit(rng, 50, dim=200),
        _unit(rng, 1, dim=200),
    )
    expected = ((mat > 0) != (query > 0)).sum(axis=1)
    assert np.array_equal(hamming(sign_bits(mat), sign_bits(query)[:, 0]), expected)


def test_nearest_keeps_exactly_the_smallest_distances():
    rng = np.random.default_rng(2)
    dist = rng.integers(0, 40, size=5000).astype(np.uint16)  # many ties at the cut
    picked = nearest(dist, 300)
    assert len(picked) == len(set(picked.tolist())) == 300
    left_out = np.setdiff1d(np.arange(len(dist)), picked)
    assert dist[picked].max() <= dist[left_out].min()
    assert np.array_equal(nearest(dist[:10], 300), np.arange(10))


def test_the_shortlist_holds_the_true_nearest_neighbours():
    rng = np.random.default_rng(3)
    mat = _unit(rng, 30_000)
    query = _unit(rng, 1)[0]
    near = 0.6 * query + 0.4 * _unit(rng, 10)  # ten planted neighbours, cosine ~0.8 with the query
    mat[:10] = near / np.linalg.norm(near, axis=1, keepdims=True)
    shortlist = nearest(hamming(sign_bits(mat), sign_bits(query[None, :])[:, 0]), 200)
    exact_top = np.argsort(-(mat @ query))[:10]
    assert set(exact_top.tolist()) <= set(shortlist.tolist())


def test_shortlist_search_in_the_mirror_agrees_with_the_exact_scan_and_follows_new_rows(
    engine, embedder
):
    rng = np.random.default_rng(4)
    vectors = _unit(rng, 600, dim=embedder.dim)
    engine.memories.insert_batch(
        [
            (
                NewMemory(
                    content=f"note number {i}", subject="notes", scope=Scope.USER, scope_id="alice"
                ),
                v,
            )
            for i, v in enumerate(vectors)
        ]
    )
    exact = engine.memory_rows.corpus.vectors
    shortlisted = VectorIndex(engine.db, "memory_vec", "memories", exact_limit=0)
    parts = dm_ctx("alice").memory_partitions()
    for i in (0, 150, 599):
        query = vectors[i] + 0.1 * _unit(rng, 1, dim=embedder.dim)[0]
        best = shortlisted.search(query, parts, 10)
        assert best[0] == exact.search(query, parts, 1)[0]
        assert (
            engine.db.scalar("SELECT content FROM memories WHERE rid = ?", (best[0][0],))
            == f"note number {i}"
        )

    fresh = _unit(rng, 1, dim=embedder.dim)[0]
    (new_id,) = engine.memories.insert_batch(
        [
            (
                NewMemory(
                    content="the newest note", subject="notes", scope=Scope.USER, scope_id="alice"
                ),
                fresh,
            )
        ]
    )
    shortlisted.mirror_add([(engine.memory_rows.get(new_id).rid, parts[0], fresh)])
    assert shortlisted.search(fresh, parts, 1)[0][0] == engine.memory_rows.get(new_id).rid


def _notes(engine, embedder, n: int, seed: int) -> tuple[np.ndarray, tuple[str, ...]]:
    vectors = _unit(np.random.default_rng(seed), n, dim=embedder.dim)
    engine.memories.insert_batch(
        [
            (
                NewMemory(
                    content=f"note {i} about harbour kites",
                    subject="notes",
                    scope=Scope.USER,
                    scope_id="alice",
                ),
                v,
            )
            for i, v in enumerate(vectors)
        ]
    )
    return vectors, dm_ctx("alice").memory_partitions()


def test_a_scan_beside_another_search_finds_what_it_finds_alone_and_hands_back_both_answers(
    engine, embedder
):
    vectors, parts = _notes(engine, embedder, 300, seed=5)
    # every scan goes to the worker thread
    beside = VectorIndex(engine.db, "memory_vec", "memories", parallel_rows=0)
    caller = threading.get_ident()
    ran_in: list[int] = []

    def words() -> list[tuple[int, float]]:
        ran_in.append(threading.get_ident())
        # the same connection, meanwhile
        return engine.memory_rows.corpus.text_search("harbour kites", parts, 5)

    for i in (0, 299):
        found, text_hits = beside.search_alongside(vectors[i], parts, 10, words)
        assert found == engine.memory_rows.corpus.vectors.search(vectors[i], parts, 10)
        assert text_hits and text_hits == engine.memory_rows.corpus.text_search(
            "harbour kites", parts, 5
        )
    assert ran_in == [caller, caller]  # the database is only ever used from the caller's thread


def test_a_failing_search_beside_the_scan_raises_after_the_scan_has_finished(engine, embedder):
    vectors, parts = _notes(engine, embedder, 50, seed=6)
    beside = VectorIndex(engine.db, "memory_vec", "memories", parallel_rows=0)

    def broken() -> None:
        raise RuntimeError("index gone")

    with pytest.raises(RuntimeError, match="index gone"):
        beside.search_alongside(vectors[0], parts, 5, broken)
    # the worker is free again
    assert beside.search(vectors[0], parts, 1)[0][1] == pytest.approx(1.0, abs=0.02)


def test_hybrid_recall_is_the_same_whether_the_channels_run_together_or_in_turn(engine, embedder):
    _notes(engine, embedder, 200, seed=7)

    def ranked() -> list[tuple[int, float]]:
        hits = engine.recall.recall(
            dm_ctx("alice"), "harbour kites note 17", threshold=0.0, reinforce=False
        )
        return [(h.item.rid, round(h.score, 9)) for h in hits]

    alone = ranked()
    engine.memory_rows.corpus.vectors.parallel_rows = 0
    assert ranked() == alone and alone

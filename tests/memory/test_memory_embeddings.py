"""MEM-4 and RET-4: one dimension per store, reembed for a new model, the embedding cache, failing models."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    FailingEmbedder,
    HashEmbedder,
    WrongShapeEmbedder,
    contents,
    count,
    dm_ctx,
    remember,
    say,
)

from memory.engine import MemoryEngine
from memory.errors import DimensionMismatch, EmbeddingError
from memory.storage.embeddings import content_hash
from memory.upkeep.reembed import reembed

FACTS = [
    "Xena keeps three beehives on the roof",
    "Xena plays the bassoon badly",
    "Xena is learning Icelandic",
]


def _vec_dim(engine: MemoryEngine, table: str) -> int:
    sql = engine.db.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
    return int(sql.split("float[")[1].split("]")[0])


def test_first_embedder_fixes_the_dimension_and_fingerprint(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64), clock) as engine:
        remember(engine, FACTS[0], scope_id="xena")
        assert engine.db.get_setting("embedding.dim") == "64"
        assert engine.db.get_setting("embedding.fingerprint") == "test:hash-bow:64"
        assert _vec_dim(engine, "memory_vec") == 64


def test_a_model_of_another_dimension_is_refused_with_a_helpful_message(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64), clock) as engine:
        remember(engine, FACTS[0], scope_id="xena")
    with pytest.raises(DimensionMismatch) as err:
        MemoryEngine(tmp_path / "m.db", HashEmbedder(32), clock)
    message = str(err.value)
    assert "64" in message and "32" in message and "test:hash-bow:32" in message
    assert "reembed" in message and "--allow-dimension-change" in message
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:  # the store itself is untouched
        assert engine.db.get_setting("embedding.dim") == "64"
        assert count(engine, "memory_vec") == 1


def test_reembed_rebuilds_every_vector_for_a_new_dimension(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64), clock) as engine:
        for fact in FACTS:
            remember(engine, fact, scope_id="xena")
        say(engine, "I repotted the basil today", author="xena", dm_person="xena")
        say(engine, "Nice, basil loves sun", author="bot", dm_person="xena", role="assistant")

    new = HashEmbedder(32, name="hash-small")
    seen = []
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:
        counts = reembed(
            engine,
            new,
            allow_dimension_change=True,
            progress=lambda done, total: seen.append((done, total)),
        )
        assert counts == {"memories": 3, "messages": 2}
        assert seen and seen[-1] == (5, 5) and all(t == 5 for _, t in seen)
        assert engine.db.get_setting("embedding.dim") == "32"
        assert engine.db.get_setting("embedding.fingerprint") == "test:hash-small:32"
        assert _vec_dim(engine, "memory_vec") == _vec_dim(engine, "message_vec") == 32
        assert count(engine, "memory_vec") == 3 and count(engine, "message_vec") == 2
        # every cached vector is the new model's
        assert {
            f for (f,) in engine.db.execute("SELECT DISTINCT fingerprint FROM embed_cache")
        } == {"test:hash-small:32"}
        hits = engine.recall.recall(dm_ctx("xena"), "bassoon", threshold=0)
        assert hits[0].item.content == "Xena plays the bassoon badly"
        assert hits[0].cosine == pytest.approx(
            new.cosine("bassoon", "Xena plays the bassoon badly"), abs=1e-5
        )
        assert "vector" in hits[0].channels

    # the store now belongs to the new model: it opens with it and refuses the old one
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(32, name="hash-small"), clock) as engine:
        assert not engine.embeddings.needs_reindex()
        assert contents(engine.messages.search(dm_ctx("xena"), "basil")) == {
            "I repotted the basil today",
            "Nice, basil loves sun",
        }
    with pytest.raises(DimensionMismatch):
        MemoryEngine(tmp_path / "m.db", HashEmbedder(64), clock)


def test_reembed_without_permission_refuses_a_dimension_change_and_keeps_the_vectors(
    tmp_path, clock
):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64), clock) as engine:
        remember(engine, FACTS[0], scope_id="xena")
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:
        with pytest.raises(DimensionMismatch, match="allow-dimension-change"):
            reembed(engine, HashEmbedder(32))
        assert count(engine, "memory_vec") == 1 and _vec_dim(engine, "memory_vec") == 64
        assert engine.db.get_setting("embedding.dim") == "64"


def test_reembed_fills_vectors_for_rows_stored_while_embeddings_were_off(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:
        for fact in FACTS:
            remember(engine, fact, scope_id="xena")
        assert count(engine, "memory_vec") == 0
        counts = reembed(engine, HashEmbedder(64))
        assert counts == {"memories": 3, "messages": 0}
        assert count(engine, "memory_vec") == 3
        assert (
            "vector" in engine.recall.recall(dm_ctx("xena"), "Icelandic", threshold=0)[0].channels
        )


def test_same_dimension_new_model_needs_reindex(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64, name="model-a"), clock) as engine:
        assert not engine.embeddings.needs_reindex()
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64, name="model-b"), clock) as engine:
        assert engine.embeddings.needs_reindex()
        reembed(engine, engine.embeddings.embedder)
        assert not engine.embeddings.needs_reindex()
    with MemoryEngine(tmp_path / "m.db", None, clock) as engine:
        assert not engine.embeddings.needs_reindex()  # nothing configured, nothing to compare


# -- the embedding cache (hash before you embed) -------------------------------------------------------------
def test_the_same_text_is_embedded_once(tmp_path, clock):
    embedder = HashEmbedder()
    text = "Xena and Yuri both love hot springs"
    with MemoryEngine(tmp_path / "m.db", embedder, clock) as engine:
        remember(engine, text, scope_id="xena")
        # another partition: stored again, not embedded again
        remember(engine, text, scope_id="yuri")
        say(engine, text, author="xena", dm_person="xena", author_name="")
        assert embedder.texts.count(text) == 1
        assert count(engine, "embed_cache", "content_hash = ?", (content_hash(text),)) == 1
        assert count(engine, "memory_vec") == 2 and count(engine, "message_vec") == 1
    with MemoryEngine(tmp_path / "m.db", embedder, clock) as engine:  # the cache lives in the file
        remember(engine, text, scope_id="zed")
    assert embedder.texts.count(text) == 1


def test_cached_vector_equals_a_fresh_one(engine, embedder):
    remember(engine, FACTS[1], scope_id="xena")
    blob = engine.db.scalar(
        "SELECT vector FROM embed_cache WHERE content_hash = ?", (content_hash(FACTS[1]),)
    )
    np.testing.assert_allclose(
        np.frombuffer(blob, dtype=np.float32), embedder.vector(FACTS[1]), atol=1e-6
    )


# -- a failing or broken model (RET-4) --------------------------------------------------------------------------
def test_a_failing_embedder_still_stores_and_recalls_by_bm25(tmp_path, clock):
    broken = FailingEmbedder()
    with MemoryEngine(tmp_path / "m.db", broken, clock) as engine:
        memory = remember(engine, FACTS[2], scope_id="xena")
        say(engine, "Icelandic grammar is hard", author="xena", dm_person="xena")
        assert broken.calls  # it was tried
        assert count(engine, "memories") == 1 and count(engine, "memory_vec") == 0
        hits = engine.recall.recall(dm_ctx("xena"), "learning Icelandic", threshold=0)
        assert [h.item.id for h in hits] == [memory.id]
        assert hits[0].cosine is None and "fts" in hits[0].channels and hits[0].relevance == 1.0
        assert contents(engine.messages.search(dm_ctx("xena"), "Icelandic grammar")) == {
            "Icelandic grammar is hard"
        }
        with pytest.raises(EmbeddingError, match="unreachable"):
            engine.embeddings.embed(["anything"])
    # once the model is back, reembed gives the rows their vectors
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), clock) as engine:
        reembed(engine, engine.embeddings.embedder)
        assert count(engine, "memory_vec") == 1 and count(engine, "message_vec") == 1


def test_an_embedder_returning_the_wrong_shape_is_a_dimension_mismatch(tmp_path, clock):
    with MemoryEngine(tmp_path / "m.db", WrongShapeEmbedder(64), clock) as engine:
        with pytest.raises(DimensionMismatch, match=r"\(1, 63\).*\(1, 64\)"):
            engine.embeddings.embed(["Xena keeps bees"])
        assert count(engine, "embed_cache") == 0  # a bad vector is never cached
        remember(engine, "Xena keeps bees on the roof", scope_id="xena")  # stored without a vector
        assert count(engine, "memory_vec") == 0
        assert contents(engine.recall.recall(dm_ctx("xena"), "bees", threshold=0)) == {
            "Xena keeps bees on the roof"
        }


def test_non_finite_vectors_are_refused(tmp_path, clock):
    class NaNEmbedder(HashEmbedder):
        def embed(self, texts):
            return np.full((len(texts), self.dim), np.nan, dtype=np.float32)

    with (
        MemoryEngine(tmp_path / "m.db", NaNEmbedder(), clock) as engine,
        pytest.raises(EmbeddingError, match="non-finite"),
    ):
        engine.embeddings.embed(["Xena"])


def test_embeddings_off_means_no_vectors_and_bm25_recall(bm25_engine):
    remember(bm25_engine, FACTS[0], scope_id="xena")
    remember(bm25_engine, FACTS[1], scope_id="xena")
    assert not bm25_engine.embeddings.available
    assert count(bm25_engine, "memory_vec") == 0
    hits = bm25_engine.recall.recall(dm_ctx("xena"), "beehives roof")
    # default threshold 0.5 keeps only the text match
    assert [h.item.content for h in hits] == [FACTS[0]]
    assert bm25_engine.embeddings.embed_query("anything") is None
    with pytest.raises(EmbeddingError, match="disabled"):
        bm25_engine.embeddings.embed(["x"])


def test_the_same_text_twice_in_one_batch_is_embedded_once(engine, embedder):
    vectors = engine.embeddings.embed(["ok", "ok", "sounds good", "ok"])
    assert vectors.shape == (4, embedder.dim)
    assert embedder.texts.count("ok") == 1


# -- the vector mirror and the FTS channel as independent failure domains --------------------------------------
def test_vector_search_sees_rows_committed_by_another_connection(tmp_path, clock):
    from memory.recall.retrieval import Channel

    vector_only = frozenset({Channel.VECTOR})
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), clock) as bot:
        remember(bot, FACTS[0], scope_id="xena")
        assert contents(
            bot.recall.recall(dm_ctx("xena"), "beehives", threshold=0, channels=vector_only)
        ) == {FACTS[0]}
        assert (
            contents(
                bot.recall.recall(dm_ctx("xena"), "bassoon", threshold=0, channels=vector_only)
            )
            == set()
        )
        with MemoryEngine(
            tmp_path / "m.db", HashEmbedder(), clock
        ) as cli:  # e.g. `companion memory add`
            added = remember(cli, FACTS[1], scope_id="xena")
        assert FACTS[1] in contents(
            bot.recall.recall(dm_ctx("xena"), "bassoon", threshold=0, channels=vector_only)
        )
        with MemoryEngine(tmp_path / "m.db", HashEmbedder(), clock) as cli:
            cli.memories.delete(added.id)
        assert FACTS[1] not in contents(
            bot.recall.recall(dm_ctx("xena"), "bassoon", threshold=0, channels=vector_only)
        )


def test_recall_falls_back_to_vectors_when_the_fts_index_is_broken(engine):
    for fact in FACTS:
        remember(engine, fact, scope_id="xena")
    engine.db.execute("DROP TABLE memory_fts")  # a damaged index
    hits = engine.recall.recall(dm_ctx("xena"), "bassoon", threshold=0)
    assert hits[0].item.content == "Xena plays the bassoon badly"
    assert all("fts" not in h.channels for h in hits) and hits[0].text_score == 0.0

"""Rebuild every vector for a new embedding model (MEM-4): ScalyClaw could only wipe the file."""

from __future__ import annotations

from collections.abc import Callable

from ..engine import MemoryEngine
from ..errors import DimensionMismatch
from ..protocols import Embedder
from ..storage.embeddings import content_hash

BATCH = 256


def reembed(
    engine: MemoryEngine,
    embedder: Embedder,
    *,
    allow_dimension_change: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Embed every memory and message again with ``embedder``; returns how many rows each table got.

    Open the engine with ``embedder=None`` for this, so that a dimension change is made here, on
    purpose, instead of being refused at open.
    """
    db = engine.db
    stored_dim = engine.embeddings.stored_dim()
    if stored_dim is not None and stored_dim != embedder.dim and not allow_dimension_change:
        raise DimensionMismatch(
            f"the store holds {stored_dim}-dimensional vectors and {embedder.fingerprint} makes {embedder.dim}; "
            "pass --allow-dimension-change to drop and rebuild them all"
        )
    corpora = (engine.memory_rows.corpus, engine.messages.corpus)
    with db.transaction():
        for corpus in corpora:
            corpus.vectors.drop()
        engine.embeddings.clear_cache()
        engine.embeddings.switch(embedder)
    total = sum(int(db.scalar(f"SELECT COUNT(*) FROM {c.table}")) for c in corpora)
    done, counts = 0, {}
    for corpus in corpora:
        rows = db.rows(f"SELECT * FROM {corpus.table} ORDER BY rid")
        for i in range(0, len(rows), BATCH):
            batch = rows[i : i + BATCH]
            vectors = engine.embeddings.embed([corpus.search_text(r) for r in batch])
            with db.transaction():
                # issue 33: a row forgotten (by another process) while the model embedded gets no vector back,
                # and the vector just cached for its words goes too
                there = _still_there(engine, corpus.table, [r["rid"] for r in batch])
                corpus.vectors.write_many(
                    [
                        (r["rid"], r["partition_key"], vectors[j])
                        for j, r in enumerate(batch)
                        if r["rid"] in there
                    ]
                )
                for gone in {
                    content_hash(corpus.search_text(r)) for r in batch if r["rid"] not in there
                }:
                    engine.embeddings.forget_hash(gone)
            done += len(batch)
            if progress:
                progress(done, total)
        corpus.vectors.invalidate()
        counts[corpus.name] = len(rows)
    return counts


def _still_there(engine: MemoryEngine, table: str, rids: list[int]) -> set[int]:
    """The rows of ``rids`` still stored (read in the write transaction that writes their vectors)."""
    marks = ", ".join("?" * len(rids))
    return {
        rid for (rid,) in engine.db.execute(f"SELECT rid FROM {table} WHERE rid IN ({marks})", rids)
    }

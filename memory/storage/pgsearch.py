"""Words and vectors on PostgreSQL: the two search channels whose SQLite forms (FTS5, vec0) have no translation.

Words: each searchable table has a generated ``words`` tsvector (``memory.storage.pg_migrations``) with a GIN index;
a query is the OR of ``plainto_tsquery`` of each term our FTS5 tokenizer finds (user text never becomes
tsquery syntax), ranked by ``ts_rank_cd`` within the partitions a context sees. Scores are negated, so
"more negative is better" holds as it does for FTS5's ``bm25()``.

Vectors: a pgvector table ``{table}(rid, partition_key, embedding vector(dim))``, searched exactly (ordered by
cosine distance within a partition, which the partition index makes a small scan) or, once built, through an
HNSW index (``companion bench`` measures both). The in-process mirror of ``memory.storage.vectors`` works unchanged
above it: it loads partitions from this table and reloads when another process's commit is heard.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

import numpy as np

from .db import Database
from .fts import FtsQueryBuilder
from .vectors import LOAD_CHUNK, VectorIndex

CANDIDATE_CAP = 2000  # rows ranked at most per query: a word in every row would otherwise rank the partition
# the leak check asks whether a word is common in the store (held by more than ~200 rows): counting on past this
# would walk the whole posting list of a common word for nothing
DF_CAP = 1000
ROWS_TTL_S = 60.0  # the table's row count, cached: a count(*) of a million rows takes tens of milliseconds


class PgWords:
    """Full-text search of one table's ``words`` column, within partitions."""

    def __init__(self, db: Database, table: str, terms: FtsQueryBuilder) -> None:
        self.db, self.table, self.terms = db, table, terms
        self._rows: tuple[float, int] = (-ROWS_TTL_S, 0)  # (when counted, rows)

    def query(self, text: str) -> tuple[str, tuple[str, ...]] | None:
        """(tsquery SQL, its parameters): the OR of each searchable word; None when there is none."""
        words = tuple(raw for raw, _ in self.terms.terms(text))
        if not words:
            return None
        return " || ".join("plainto_tsquery('english', ?)" for _ in words), words

    def search(self, text: str, partitions: tuple[str, ...], limit: int) -> list[tuple[int, float]]:
        """(rid, -rank) best first, like FTS5's bm25 (more negative is better)."""
        found = self.query(text)
        if found is None or not partitions:
            return []
        q, params = found
        marks = ", ".join("?" for _ in partitions)
        sql = (
            f"SELECT rid, -ts_rank_cd(words, q) AS score FROM {self.table}, (SELECT {q}) AS query(q) "
            f"WHERE partition_key IN ({marks}) AND words @@ q ORDER BY score, rid DESC LIMIT ?"
        )
        return [(rid, float(score)) for rid, score in self.db.execute(sql, (*params, *partitions, min(limit, CANDIDATE_CAP)))]

    # -- the leak check's questions (memory.recall.leaks), answered from the GIN index ---------------------
    def holders(self, words: dict[str, str]) -> dict[int, set[str]]:
        """rid -> which of ``words`` (our stem -> the word as written) the row's ``words`` column holds."""
        sql = f"SELECT rid FROM {self.table} WHERE words @@ plainto_tsquery('english', ?)"
        found: dict[int, set[str]] = {}
        for stem, raw in words.items():
            for (rid,) in self.db.execute(sql, (raw,)):
                found.setdefault(rid, set()).add(stem)
        return found

    def doc_freq(self, raw: str) -> tuple[int, int]:
        """(rows holding the word, counted up to ``DF_CAP``; rows in the table, cached for ``ROWS_TTL_S``)."""
        sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {self.table} WHERE words @@ plainto_tsquery('english', ?) LIMIT ?) AS held"
        return int(self.db.scalar(sql, (raw, DF_CAP))), self._row_count()

    def _row_count(self) -> int:
        stamp, count = self._rows
        if time.monotonic() - stamp > ROWS_TTL_S:
            count = int(self.db.scalar(f"SELECT COUNT(*) FROM {self.table}"))
            self._rows = (time.monotonic(), count)
        return count

    def has_word(self, raw: str, partitions: tuple[str, ...], where: str = "", params: tuple[Any, ...] = ()) -> bool:
        """Does a row of ``partitions`` that passes ``where`` (our conditions on alias ``t``) hold the word ``raw``?"""
        cond = where and f" AND ({where})"
        sql = (
            f"SELECT 1 FROM {self.table} AS t WHERE t.words @@ plainto_tsquery('english', ?) "
            f"AND t.partition_key IN ({', '.join('?' for _ in partitions)}){cond} LIMIT 1"
        )
        return self.db.scalar(sql, (raw, *partitions, *params)) is not None


VECTOR_TABLE_LOCK = 7_325_002  # advisory lock id (memory.storage.pg takes 7_325_001 to migrate)


class PgVectorIndex(VectorIndex):
    """``VectorIndex`` over a pgvector table; the mirror, budget and scan above it are the SQLite ones."""

    def _exists(self) -> bool:
        return bool(self.db.scalar("SELECT to_regclass(?) IS NOT NULL", (self.table,)))

    def _read_dim(self) -> int:
        return int(
            self.db.scalar(f"SELECT atttypmod FROM pg_attribute WHERE attrelid = '{self.table}'::regclass AND attname = 'embedding'")
        )

    def ensure(self, dim: int) -> None:
        # checked each time: a rolled-back transaction takes the new table with it (DDL is transactional here)
        if self.dim is None or not self._exists():
            with self.db.transaction():
                # two processes meeting their first vector at once: one creates the table, the other waits for its
                # commit and finds it (without the lock the second failed on a duplicate type, losing its job's write)
                self.db.execute("SELECT pg_advisory_xact_lock(?)", (VECTOR_TABLE_LOCK,))
                self._create(dim)
            self.dim = dim

    def _create(self, dim: int) -> None:
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            f"(rid BIGINT PRIMARY KEY, partition_key TEXT NOT NULL, embedding vector({dim}) NOT NULL)"
        )
        self.db.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_partition ON {self.table} (partition_key)")
        self.db.execute(f"DROP TRIGGER IF EXISTS {self.table}_notify ON {self.table}")
        self.db.execute(
            f"CREATE TRIGGER {self.table}_notify AFTER INSERT OR UPDATE OR DELETE ON {self.table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION companion_notify()"
        )

    def build_hnsw(self) -> None:
        """An HNSW index (cosine) over every vector: approximate, for a search that is not by partition."""
        self.db.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw ON {self.table} USING hnsw (embedding vector_cosine_ops)")

    def write(self, rid: int, partition_key: str, vector: np.ndarray) -> None:
        self.ensure(len(vector))
        self.db.execute(
            f"INSERT INTO {self.table} (rid, partition_key, embedding) VALUES (?, ?, ?) "
            "ON CONFLICT (rid) DO UPDATE SET partition_key = excluded.partition_key, embedding = excluded.embedding",
            (rid, partition_key, np.asarray(vector, dtype=np.float32)),
        )

    def write_many(self, rows: list[tuple[int, str, np.ndarray]]) -> None:
        if not rows:
            return
        self.ensure(len(rows[0][2]))
        self.db.con.executemany(
            f"INSERT INTO {self.table} (rid, partition_key, embedding) VALUES (?, ?, ?)",
            [(rid, key, np.asarray(v, dtype=np.float32)) for rid, key, v in rows],
        )

    def delete(self, rids: list[int]) -> None:
        if self.dim is None or not rids:
            return
        self.db.execute(f"DELETE FROM {self.table} WHERE rid = ANY(?)", (list(rids),))

    def _vec0_get(self, rids: list[int]) -> dict[int, np.ndarray]:
        if not rids:
            return {}
        sql = f"SELECT rid, embedding FROM {self.table} WHERE rid = ANY(?)"
        return {rid: _array(vec) for rid, vec in self.db.execute(sql, (list(rids),))}

    def _search_vec0(self, query: np.ndarray, partitions: tuple[str, ...], k: int) -> list[tuple[int, float]]:
        q = np.asarray(query, dtype=np.float32)
        sql = f"SELECT rid, embedding <=> ? AS distance FROM {self.table} WHERE partition_key = ANY(?) ORDER BY distance LIMIT ?"
        return [(rid, 1.0 - float(dist)) for rid, dist in self.db.execute(sql, (q, list(partitions), k))]

    def _chunks(self, key: str, dim: int) -> Iterator[tuple[list[int], np.ndarray]]:
        cursor: Any = iter(self.db.execute(f"SELECT rid, embedding FROM {self.table} WHERE partition_key = ? ORDER BY rid", (key,)))
        while chunk := list(islice(cursor, LOAD_CHUNK)):
            rids = [rid for rid, _ in chunk]
            yield rids, np.stack([_array(v) for _, v in chunk]).reshape(len(rids), dim)


def _array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (the adapter gives a ``Vector``; older ones gave numpy arrays)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


@functools.cache
def tokenizer_db() -> Database:
    """An in-memory SQLite store whose FTS5 tokenizer splits and stems query words the way recall always has."""
    return Database(":memory:")

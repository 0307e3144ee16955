"""Words and vectors on PostgreSQL: the two search channels whose SQLite forms (FTS5, vec0) have no translation.

Words: each searchable table has a generated ``words`` tsvector (``memory.storage.pg_migrations``) with a GIN index;
a query is the OR of ``plainto_tsquery`` of each term our FTS5 tokenizer finds (user text never becomes
tsquery syntax), ranked within the partitions a context sees by FTS5's BM25 formula computed in SQL (``PgWords``).
Scores are negated, so "more negative is better" holds as it does for FTS5's ``bm25()``.

Vectors: a pgvector table ``{table}(rid, partition_key, embedding vector(dim))``, searched exactly (ordered by
cosine distance within a partition, which the partition index makes a small scan) or, once built, through an
HNSW index (``companion bench`` measures both). The in-process mirror of ``memory.storage.vectors`` works unchanged
above it: it loads partitions from this table and reloads when another process's commit is heard.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .db import Database
from .fts import BM25_K1, FtsQueryBuilder, _idf
from .pg import PgDatabase
from .vectors import LOAD_CHUNK, VectorIndex

# rows scored by BM25 at most per query, the best by ts_rank_cd (PostgreSQL's own rank, in C): a word in every row would
# otherwise score the partition (at 10k rows, load 11, words p50/p95 ms: the newest 2000 matches 7.8/18.2, 500 3.7/12.7).
# Chosen by ts_rank_cd rather than by age, so a cap that binds keeps relevant rows (LoCoMo dev: unchanged, it never binds)
CANDIDATE_CAP = 500
BM25_B = 0.75  # FTS5's bm25() constants (k1 is memory.storage.fts.BM25_K1)
# FTS5's column weights (memory.storage.corpus) by the tsvector weight each column got (memory.storage.pg_migrations)
WEIGHTS = {
    "memories": {"A": 2.0, "B": 1.0, "C": 1.0, "D": 0.0},
    "messages": {"A": 1.0, "B": 0.5, "C": 0.3, "D": 0.0},
}
STATS_TTL_S = 60.0  # row count and mean length: one count a minute (at 100k rows a few ms)
DF_TTL_S = 600.0  # a word's document frequency, as long as FTS5's builder keeps its own
KNOWN_WORDS = 50_000  # words whose frequency is cached, at most (a few MB)
RARE_SPLIT_ROWS = (
    20_000  # above this, candidates come from the rare words only (when the query has one)
)
RARE_SHARE = 0.05  # a word in more than this share of the rows is common for that split
# the leak check asks whether a word is common in the store (held by more than ~200 rows): counting on past this
# would walk the whole posting list of a common word for nothing
DF_CAP = 1000


class PgWords:
    """Full-text search of one table's ``words`` column, within partitions, ranked by BM25 computed in SQL.

    ``ts_rank_cd`` (PostgreSQL's own ranking) knows no document frequency: a name said in every turn counts as
    much as the one rare word that finds the answer. On the LoCoMo dev set it ranked 7 points R@5 below FTS5's
    ``bm25()``. So the score here is FTS5's formula: idf from each word's document frequency in the whole table
    (counted through the GIN index, cached), term frequency summed over the columns with FTS5's weights (the
    tsvector weight of each position says its column), and the row's length as its number of lexemes (FTS5
    counts tokens; close, and cheap to read from the tsvector).
    """

    def __init__(self, db: Database, table: str, terms: FtsQueryBuilder) -> None:
        self.db, self.table, self.terms = db, table, terms
        self.weights = WEIGHTS[table]
        # (when, rows, mean lexemes a row)
        self._stats: tuple[float, int, float] = (
            -STATS_TTL_S,
            0,
            1.0,
        )
        self._known: dict[
            str, tuple[float, tuple[str, ...], int]
        ] = {}  # word -> (when, its lexemes, rows holding it)

    def query(self, text: str) -> tuple[str, tuple[str, ...]] | None:
        """(tsquery SQL, its parameters): the OR of each searchable word; None when there is none."""
        words = tuple(raw for raw, _ in self.terms.terms(text))
        if not words:
            return None
        return _any_of(words), words

    def search(self, text: str, partitions: tuple[str, ...], limit: int) -> list[tuple[int, float]]:
        """(rid, -bm25) best first, like FTS5's bm25 (more negative is better)."""
        words = tuple(dict.fromkeys(raw for raw, _ in self.terms.terms(text)))
        if not words or not partitions:
            return []
        rows, mean = self._table_stats()
        known = self._words(words)
        idf: dict[str, float] = {}
        for lexemes, df in known.values():
            for lexeme in (
                lexemes
            ):  # a hyphenated word has several lexemes: each counts with the word's frequency
                idf[lexeme] = max(idf.get(lexeme, 0.0), _idf(rows, df))
        if not idf:
            return []
        wanted = self._candidate_words(known, rows) or words
        return self._ranked(wanted, partitions, idf, mean, limit)

    def _candidate_words(
        self, known: dict[str, tuple[tuple[str, ...], int]], rows: int
    ) -> tuple[str, ...]:
        """In a big table, the rows to score are those holding a rare word, when the query has one: a row that holds
        only words found in a twentieth of the store scores below almost any row holding a rare one, and there
        can be tens of thousands of them. Empty: score every row that matches."""
        if rows <= RARE_SPLIT_ROWS:
            return ()
        return tuple(
            word for word, (lexemes, df) in known.items() if lexemes and df <= rows * RARE_SHARE
        )

    def _ranked(
        self,
        words: tuple[str, ...],
        partitions: tuple[str, ...],
        idf: dict[str, float],
        mean: float,
        limit: int,
    ) -> list[tuple[int, float]]:
        w, k1 = self.weights, BM25_K1
        tf = f"CASE w WHEN 'A' THEN {w['A']} WHEN 'B' THEN {w['B']} WHEN 'C' THEN {w['C']} ELSE {w['D']} END"
        norm = f"{k1} * (1 - {BM25_B} + {BM25_B} * length(c.words) / {max(mean, 1.0):.6f})"
        sql = (
            f"SELECT c.rid, -SUM(q.idf * f.tf * {k1 + 1} / (f.tf + {norm})) AS score "
            f"FROM (SELECT rid, words FROM {self.table}, (SELECT {_any_of(words)}) AS query(q) "
            f"WHERE partition_key IN ({', '.join('?' for _ in partitions)}) AND words @@ q "
            "ORDER BY ts_rank_cd(words, q) DESC, rid DESC LIMIT ?) AS c "
            f"CROSS JOIN LATERAL (SELECT u.lexeme, SUM({tf}) AS tf FROM unnest(c.words) AS u, unnest(u.weights) AS w "
            "WHERE u.lexeme = ANY(?::text[]) GROUP BY u.lexeme) AS f "
            "JOIN unnest(?::text[], ?::float8[]) AS q(lexeme, idf) ON q.lexeme = f.lexeme "
            "GROUP BY c.rid ORDER BY score, c.rid DESC LIMIT ?"
        )
        lexemes = list(idf)
        params = (
            *words,
            *partitions,
            CANDIDATE_CAP,
            lexemes,
            lexemes,
            [idf[x] for x in lexemes],
            limit,
        )
        return [(rid, float(score)) for rid, score in self.db.execute(sql, params)]

    def _table_stats(self) -> tuple[int, float]:
        when, rows, mean = self._stats
        if time.monotonic() - when > STATS_TTL_S:
            found = self.db.one(
                f"SELECT count(*) AS n, avg(length(words)) AS mean FROM {self.table}"
            )
            rows, mean = (
                int(found["n"] or 0) if found else 0,
                float(found["mean"] or 1.0) if found else 1.0,
            )
            self._stats = (time.monotonic(), rows, mean)
        return rows, mean

    def _words(self, words: tuple[str, ...]) -> dict[str, tuple[tuple[str, ...], int]]:
        """Each query word's lexemes (none for a stop word) and how many rows hold it (counted through the GIN index);
        the words not cached are asked in one round trip."""
        now = time.monotonic()
        if (
            len(self._known) > KNOWN_WORDS
        ):  # a long-running bot meets new words for ever: start over, not grow
            self._known.clear()
        missing = [
            word
            for word in words
            if word not in self._known or now - self._known[word][0] > DF_TTL_S
        ]
        if missing:
            sql = (
                "SELECT w, tsvector_to_array(to_tsvector('english', w)), "
                f"(SELECT count(*) FROM {self.table} WHERE words @@ plainto_tsquery('english', w)) FROM unnest(?::text[]) AS w"
            )
            for word, lexemes, df in self.db.execute(sql, (missing,)):
                self._known[word] = (now, tuple(lexemes or ()), int(df or 0))
        return {word: self._known[word][1:] for word in words}

    # -- the leak check's questions (memory.recall.leaks), answered from the GIN index ---------------------
    def holders(self, words: dict[str, str], cap: int | None = None) -> dict[int, set[str]]:
        """rid -> which of ``words`` (our stem -> the word as written) the row's ``words`` column holds; with
        ``cap``, a word held by more rows than that is left out."""
        sql = f"SELECT rid FROM {self.table} WHERE words @@ plainto_tsquery('english', ?)"
        sql += "" if cap is None else f" LIMIT {int(cap) + 1}"
        found: dict[int, set[str]] = {}
        for stem, raw in words.items():
            rids = [rid for (rid,) in self.db.execute(sql, (raw,))]
            if cap is not None and len(rids) > cap:
                continue
            for rid in rids:
                found.setdefault(rid, set()).add(stem)
        return found

    def doc_freq(self, raw: str) -> tuple[int, int]:
        """(rows holding the word, counted up to ``DF_CAP``; rows in the table, cached for ``STATS_TTL_S``)."""
        sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {self.table} WHERE words @@ plainto_tsquery('english', ?) LIMIT ?) AS held"
        return int(self.db.scalar(sql, (raw, DF_CAP))), self._table_stats()[0]

    def has_word(
        self, raw: str, partitions: tuple[str, ...], where: str = "", params: tuple[Any, ...] = ()
    ) -> bool:
        """Does a row of ``partitions`` that passes ``where`` (our conditions on alias ``t``) hold the word ``raw``?"""
        cond = where and f" AND ({where})"
        sql = (
            f"SELECT 1 FROM {self.table} AS t WHERE t.words @@ plainto_tsquery('english', ?) "
            f"AND t.partition_key IN ({', '.join('?' for _ in partitions)}){cond} LIMIT 1"
        )
        return self.db.scalar(sql, (raw, *partitions, *params)) is not None


def _any_of(words: tuple[str, ...]) -> str:
    """The OR of each word's ``plainto_tsquery``: user text is only ever a parameter, never tsquery syntax."""
    return " || ".join("plainto_tsquery('english', ?)" for _ in words)


VECTOR_TABLE_LOCK = 7_325_002  # advisory lock id (memory.storage.pg takes 7_325_001 to migrate)


class PgVectorIndex(VectorIndex):
    """``VectorIndex`` over a pgvector table; the mirror, budget and scan above it are the SQLite ones."""

    def _exists(self) -> bool:
        return bool(self.db.scalar("SELECT to_regclass(?) IS NOT NULL", (self.table,)))

    def _read_dim(self) -> int:
        return int(
            self.db.scalar(
                f"SELECT atttypmod FROM pg_attribute WHERE attrelid = '{self.table}'::regclass AND attname = 'embedding'"
            )
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
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {self.table}_partition ON {self.table} (partition_key)"
        )
        self.db.execute(f"DROP TRIGGER IF EXISTS {self.table}_notify ON {self.table}")
        self.db.execute(
            f"CREATE TRIGGER {self.table}_notify AFTER INSERT OR UPDATE OR DELETE ON {self.table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION companion_notify()"
        )

    def build_hnsw(self) -> None:
        """An HNSW index (cosine) over every vector: approximate, for a search that is not by partition."""
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw ON {self.table} USING hnsw (embedding vector_cosine_ops)"
        )

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

    def _search_vec0(
        self, query: np.ndarray, partitions: tuple[str, ...], k: int
    ) -> list[tuple[int, float]]:
        q = np.asarray(query, dtype=np.float32)
        sql = f"SELECT rid, embedding <=> ? AS distance FROM {self.table} WHERE partition_key = ANY(?) ORDER BY distance LIMIT ?"
        return [
            (rid, 1.0 - float(dist)) for rid, dist in self.db.execute(sql, (q, list(partitions), k))
        ]

    def _chunks(self, key: str, dim: int) -> Iterator[tuple[list[int], np.ndarray]]:
        # a chunk is quantized (``VectorIndex._load``) before the next is read: the client never holds the partition's floats
        assert isinstance(self.db, PgDatabase)
        sql = f"SELECT rid, embedding FROM {self.table} WHERE partition_key = ? ORDER BY rid"
        for chunk in self.db.chunks(sql, (key,), LOAD_CHUNK):
            rids = [rid for rid, _ in chunk]
            yield rids, np.stack([_array(v) for _, v in chunk]).reshape(len(rids), dim)


def _array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (the adapter gives a ``Vector``; older ones gave numpy arrays)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


@functools.cache
def tokenizer_db() -> Database:
    """An in-memory SQLite store whose FTS5 tokenizer splits and stems query words the way recall always has."""
    return Database(":memory:")

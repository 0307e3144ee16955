"""The two searchable collections, memories and conversation messages, behind one shape (RET-7).

The retrieval core (``memory.recall.retrieval``) only speaks to a ``Corpus``: which rows a context may see,
which are live, how old and how important a row is, and who its graph neighbours are. So one ranking
improvement serves both the memory recall and the conversation search.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ..models import DECAY_EXEMPT_VALUES, Memory, StoredMessage
from ..scopes import partition_token, placeholders
from . import fts
from .db import Database
from .fts import FtsQueryBuilder
from .pgsearch import PgWords, tokenizer_db
from .vectors import VectorIndex

BROAD_SHARE = 0.3
Order = tuple[tuple[str, bool], ...]  # (column, descending) pairs
# What a corpus's row becomes once it leaves storage: a memory, or a conversation message.
Found = TypeVar("Found", bound=Memory | StoredMessage)


@dataclass(frozen=True, slots=True)
class Filter:
    """Extra SQL conditions on the corpus table (aliased ``t``), built by our code, never from user text."""

    sql: str = ""
    params: tuple[Any, ...] = ()

    def __and__(self, other: Filter) -> Filter:
        parts = [p for p in (self.sql, other.sql) if p]
        return Filter(" AND ".join(f"({p})" for p in parts), self.params + other.params)


UNION_PARTITIONS = 100  # partitions asked in one statement by ``Corpus._per_partition``


@dataclass(slots=True)
class Corpus(Generic[Found]):
    name: str
    table: str
    fts_table: str
    bm25: str
    db: Database
    vectors: VectorIndex
    fts: FtsQueryBuilder = field(init=False)
    # PostgreSQL's full-text search, else None (FTS5)
    words: PgWords | None = field(init=False, default=None)
    _counts: tuple[float, dict[str, int]] = field(init=False, default=(0.0, {}))
    FTS_COLUMNS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        if (
            self.db.engine == "postgresql"
        ):  # FTS5's tokenizer still finds the terms; PostgreSQL ranks the rows
            self.fts = FtsQueryBuilder(tokenizer_db(), self.fts_table)
            self.words = PgWords(self.db, self.table, self.fts)
        else:
            self.fts = FtsQueryBuilder(self.db, self.fts_table)

    # -- what differs between the corpora ---------------------------------------------------------
    def value(self, row: dict[str, Any]) -> Found:
        """The row as the typed value it stands for: the one place a found row is converted."""
        raise NotImplementedError

    def live(self, now: float) -> Filter:
        return Filter()

    def age_anchor(self, row: dict[str, Any]) -> float:
        return row["created_at"]

    def importance(self, row: dict[str, Any]) -> float:
        return 0.5

    def decay_exempt(self, row: dict[str, Any]) -> bool:
        return False

    def neighbours(self, rids: list[int], partitions: tuple[str, ...]) -> list[tuple[int, int]]:
        """(seed, neighbour) pairs: the rows one graph hop from each seed."""
        return []

    def search_text(self, row: dict[str, Any]) -> str:
        """The text that is embedded for a row."""
        return row["content"]

    def previous(self, rows: dict[int, dict[str, Any]]) -> dict[int, int]:
        """rid -> the row that came just before it (messages: the turn it answers); {} where order means nothing."""
        return {}

    def author(self, row: dict[str, Any]) -> str:
        """Who wrote the row (a person id), "" where rows have no author."""
        return ""

    def speaker(self, row: dict[str, Any]) -> str:
        """Who wrote the row, if the corpus knows ('' for memories)."""
        return ""

    def by_assistant(self, row: dict[str, Any]) -> bool:
        """The bot's own reply (messages); memories have no author."""
        return False

    def created(self, row: dict[str, Any]) -> float | None:
        return row.get("created_at")

    def content(self, row: dict[str, Any]) -> str:
        return row.get("content") or ""

    def accesses(self, row: dict[str, Any]) -> int:
        """How often the row was recalled (memories); 0 where nothing is counted."""
        return row.get("access_count", 0)

    # -- shared queries ----------------------------------------------------------------------------
    def index_text(self, rids: list[int]) -> None:
        """Add new rows to the FTS index in one statement; call it last in the write transaction.

        FTS5 writes its pending terms out as a new index segment at every statement savepoint, so
        indexing row by row (or before other writes of the same transaction) fragments the index.
        """
        if (
            rids and self.words is None
        ):  # PostgreSQL: the row's generated tsvector column indexes itself
            cols = ", ".join(self.FTS_COLUMNS)
            self.db.execute(
                f"INSERT INTO {self.fts_table} (rowid, {cols}) SELECT rid, {cols} FROM {self.table} "
                "WHERE rid IN (SELECT value FROM json_each(?))",
                (json.dumps(rids),),
            )

    def move_partition(self, old: str, new: str, **columns: Any) -> int:
        """Re-file every row of partition ``old`` under ``new`` (and set ``columns``), vectors included
        (linking two accounts moves one person's rows onto the other). Inside the caller's transaction."""
        rids = [
            r
            for (r,) in self.db.execute(
                f"SELECT rid FROM {self.table} WHERE partition_key = ?", (old,)
            )
        ]
        if not rids:
            return 0
        vectors = self.vectors.get(rids)
        sets = "".join(f", {name} = ?" for name in columns)  # our own column names, never user text
        self.db.execute(
            f"UPDATE {self.table} SET partition_key = ?, ptoken = ?{sets} WHERE partition_key = ?",
            (new, partition_token(new), *columns.values(), old),
        )
        self.vectors.delete(list(vectors))
        self.vectors.write_many([(rid, new, v) for rid, v in vectors.items()])
        self.vectors.invalidate()
        return len(rids)

    def fetch(
        self, rids: list[int], partitions: tuple[str, ...], where: Filter
    ) -> dict[int, dict[str, Any]]:
        """The rows among ``rids`` that sit in the given partitions and pass ``where``."""
        if not rids or not partitions:
            return {}
        found: dict[int, dict[str, Any]] = {}
        cond = where.sql and f" AND ({where.sql})"
        for i in range(0, len(rids), 400):
            chunk = rids[i : i + 400]
            sql = (
                f"SELECT * FROM {self.table} AS t WHERE t.rid IN ({placeholders(chunk)}) "
                f"AND +t.partition_key IN ({placeholders(partitions)}){cond}"  # '+': look rows up by rid, not scan a partition
            )
            for row in self.db.rows(sql, (*chunk, *partitions, *where.params)):
                found[row["rid"]] = row
        return found

    def ordered(
        self, partitions: tuple[str, ...], where: Filter, order: Order, limit: int
    ) -> list[dict[str, Any]]:
        """Rows in the partitions by a fixed order (our own columns, never user text).

        One indexed ``ORDER BY ... LIMIT`` per partition, merged here: a single query over an IN-list
        of partitions would sort every row of every partition first.
        """
        return self.ordered_many([(partitions, limit)], where, order)[0]

    def ordered_many(
        self, groups: list[tuple[tuple[str, ...], int]], where: Filter, order: Order
    ) -> list[list[dict[str, Any]]]:
        """``ordered`` for each (partitions, limit) of ``groups``, in one statement: each partition is read once, to the
        largest limit of a group holding it, and each group keeps its best ``limit`` of its partitions' rows (a turn
        lists each person's facts: one round trip to a PostgreSQL server rather than one a person)."""
        limits: dict[str, int] = {}
        for partitions, limit in groups:
            for key in partitions:
                limits[key] = max(limits.get(key, 0), limit)
        cond = where.sql and f" AND ({where.sql})"
        sql_order = ", ".join(f"t.{column} {'DESC' if desc else 'ASC'}" for column, desc in order)
        each = f"SELECT * FROM {self.table} AS t WHERE t.partition_key = ?{cond} ORDER BY {sql_order} LIMIT ?"
        keys = tuple(key for key, limit in limits.items() if limit > 0)
        rows = self._union(each, [(key, *where.params, limits[key]) for key in keys])
        for column, desc in reversed(order):  # stable sorts, last key first
            rows.sort(key=lambda r: r[column], reverse=desc)
        return [_within(rows, frozenset(partitions), limit) for partitions, limit in groups]

    def newest(self, partitions: tuple[str, ...], where: Filter, limit: int) -> list[int]:
        """rids of the newest rows across partitions: one indexed query per partition, merged here."""
        if not partitions:
            return []
        cond = where.sql and f" AND ({where.sql})"
        each = f"SELECT t.created_at, t.rid FROM {self.table} AS t WHERE t.partition_key = ?{cond} ORDER BY t.created_at DESC LIMIT ?"
        found = [
            (row["created_at"], row["rid"])
            for row in self._per_partition(each, partitions, (*where.params, limit))
        ]
        return [rid for _, rid in sorted(found, reverse=True)[:limit]]

    def _per_partition(
        self, each: str, partitions: tuple[str, ...], params: tuple[Any, ...]
    ) -> list[dict[str, Any]]:
        """The rows of ``each`` (a query on one partition: its key, then ``params``) for every partition, asked as
        one statement: a UNION ALL of the per-partition queries, each still one indexed ORDER BY ... LIMIT. One round
        trip, not one a partition: on PostgreSQL each is a trip to the server (a turn made about 47; 30 were these).
        At most ``UNION_PARTITIONS`` a statement (SQLite allows 500 terms in a compound SELECT)."""
        return self._union(each, [(key, *params) for key in partitions])

    def _union(self, each: str, params: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        """The rows of ``each`` run with each parameter tuple of ``params``, as UNION ALL statements."""
        rows: list[dict[str, Any]] = []
        for i in range(0, len(params), UNION_PARTITIONS):
            chunk = params[i : i + UNION_PARTITIONS]
            sql = " UNION ALL ".join(f"SELECT * FROM ({each}) AS p{n}" for n in range(len(chunk)))
            rows.extend(self.db.rows(sql, tuple(value for values in chunk for value in values)))
        return rows

    def share(self, partitions: tuple[str, ...]) -> float:
        """Roughly what fraction of all rows these partitions hold (counts cached for a minute)."""
        stamp, counts = self._counts
        if time.monotonic() - stamp > 60:
            counts = dict(
                self.db.execute(
                    f"SELECT partition_key, COUNT(*) FROM {self.table} GROUP BY partition_key"
                )
            )
            self._counts = (time.monotonic(), counts)
        total = sum(counts.values())
        return sum(counts.get(p, 0) for p in partitions) / total if total else 1.0

    def text_search(
        self, text: str, partitions: tuple[str, ...], limit: int
    ) -> list[tuple[int, float]]:
        """(rid, bm25) best first; bm25 is negative, more negative is better. [] when nothing to search.

        A context that sees a small part of the store filters inside MATCH by partition token (an AND on
        one more posting list); one that sees most of it is faster unfiltered with a wider limit, the
        rows it may not see being dropped when they are fetched.
        """
        if self.words is not None:
            return self.words.search(text, partitions, limit)
        share = self.share(partitions)
        if share >= BROAD_SHARE:
            query, limit = self.fts.query(text), int(limit / share) + 1
        else:
            query = self.fts.query(text, tuple(partition_token(p) for p in partitions))
        if query is None:
            return []
        if not query.common:
            return self._ranked(query.expr, limit)
        # rows matching a rare term (or two common ones), all of them, scored as the plain query scores them;
        # then the rows of the common terms that could outscore the last of those, the newest COMMON_ROWS
        # (memory.storage.fts: rare terms first)
        found = self._ranked(query.expr, limit, query.rare) if query.rare is not None else []
        floor = -found[-1][1] if len(found) == limit else 0.0
        threats = query.threats(floor)
        if threats is None:
            return found
        since = self._newest(threats)
        if (
            since is None
        ):  # few enough rows: all scored, in one query, as the plain query scores them
            return self._ranked(query.expr, limit, query.widened(floor))
        newest = self._ranked(query.expr, limit, threats, since)
        return sorted(
            {rid: score for rid, score in found + newest}.items(), key=lambda hit: hit[1]
        )[:limit]

    def keys(self, rids: Iterable[int], where: Filter) -> dict[int, tuple[str, str]]:
        """rid -> (id, partition key) of the rows among ``rids`` that pass ``where`` (on alias ``t``)."""
        found: dict[int, tuple[str, str]] = {}
        cond, wanted = where.sql and f" AND ({where.sql})", list(rids)
        for i in range(0, len(wanted), 400):
            chunk = wanted[i : i + 400]
            sql = f"SELECT t.rid, t.id, t.partition_key FROM {self.table} AS t WHERE t.rid IN ({placeholders(chunk)}){cond}"
            found.update(
                {
                    rid: (row_id, key)
                    for rid, row_id, key in self.db.execute(sql, (*chunk, *where.params))
                }
            )
        return found

    # -- which rows hold a word (the leak check, memory.recall.leaks) -------------------------------
    def holders(
        self, words: dict[str, str], columns: tuple[str, ...], cap: int | None = None
    ) -> dict[int, set[str]]:
        """rid -> which of ``words`` (stem -> the word as written) the row's ``columns`` hold, read off the index;
        with ``cap``, a word held by more rows than that is left out (its walk stops there).

        On PostgreSQL the ``words`` column is the index and already covers exactly the searchable columns
        (``memory.storage.pg_migrations``); the word is matched as PostgreSQL stems it, the answer keyed by our stem.
        """
        if self.words is not None:
            return self.words.holders(words, cap)
        return self.fts.holders(words, columns, cap)

    def doc_freq(self, stem: str, raw: str) -> tuple[int, int]:
        """(rows holding the word, rows indexed); on PostgreSQL the first is counted up to ``pgsearch.DF_CAP``."""
        return self.words.doc_freq(raw) if self.words is not None else self.fts.doc_freq(stem)

    def has_word(self, raw: str, partitions: tuple[str, ...], where: Filter) -> bool:
        """Does a row of ``partitions`` that passes ``where`` hold the word ``raw`` (as the index stems it)?"""
        if not partitions:
            return False
        if self.words is not None:
            return self.words.has_word(raw, partitions, where.sql, where.params)
        tokens = " OR ".join(partition_token(p) for p in partitions)
        t, cond = self.fts_table, where.sql and f" AND ({where.sql})"
        sql = f"SELECT 1 FROM {t} JOIN {self.table} AS t ON t.rid = {t}.rowid WHERE {t} MATCH ?{cond} LIMIT 1"
        word = '"' + raw.replace('"', '""') + '"'  # a word, never FTS5 syntax
        return self.db.scalar(sql, (f"{word} AND ptoken : ({tokens})", *where.params)) is not None

    def _newest(self, expr: str) -> int | None:
        """The rowid from which on ``COMMON_ROWS`` rows match ``expr`` (None: fewer match in all). A walk
        down the posting lists, nothing scored."""
        t = self.fts_table
        sql = f"SELECT rowid FROM {t} WHERE {t} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
        return self.db.scalar(sql, (expr, fts.COMMON_ROWS - 1))

    def _ranked(
        self, expr: str, limit: int, among: str | None = None, since: int | None = None
    ) -> list[tuple[int, float]]:
        """The best ``limit`` rows for ``expr`` by BM25; with ``among``, only rows that also match it are scored,
        with ``since``, only rows from that rowid on. (``+rowid``: the other MATCH filters the rows as they
        stream, it does not drive a lookup per row.)"""
        t, among = self.fts_table, None if among == expr else among
        newer = "" if since is None else " AND rowid >= :since"
        cond = (
            f" AND +rowid IN (SELECT rowid FROM {t} WHERE {t} MATCH :among{newer})"
            if among is not None
            else ""
        )
        sql = f"SELECT rowid, {self.bm25} AS score FROM {t} WHERE {t} MATCH :expr{newer}{cond} ORDER BY score LIMIT :limit"
        params = (
            {"expr": expr, "limit": limit}
            | ({} if among is None else {"among": among})
            | ({} if since is None else {"since": since})
        )
        return [(rid, score) for rid, score in self.db.execute(sql, params)]


def live_memories(alias: str, now: float) -> Filter:
    """Rows recall may return: not forgotten, merged away, superseded or expired. Graph reads use it too."""
    a = alias
    return Filter(
        f"{a}.forgotten = 0 AND {a}.consolidated_into IS NULL AND {a}.superseded_by IS NULL AND ({a}.ttl IS NULL OR {a}.ttl > ?)",
        (now,),
    )


class MemoryCorpus(Corpus[Memory]):
    FTS_COLUMNS = ("subject", "content", "tags", "ptoken")

    def __init__(self, db: Database, vectors: VectorIndex) -> None:
        super().__init__(
            "memories",
            "memories",
            "memory_fts",
            "bm25(memory_fts, 2.0, 1.0, 1.0, 0.0)",
            db,
            vectors,
        )

    def value(self, row: dict[str, Any]) -> Memory:
        return Memory.from_row(row)

    def live(self, now: float) -> Filter:
        return live_memories("t", now)

    def age_anchor(self, row: dict[str, Any]) -> float:
        return max(row["updated_at"], row["last_accessed_at"] or 0.0)

    def importance(self, row: dict[str, Any]) -> float:
        return max(0.0, min(1.0, row["importance"] / 10.0))

    def decay_exempt(self, row: dict[str, Any]) -> bool:
        return row["kind"] in DECAY_EXEMPT_VALUES

    def neighbours(self, rids: list[int], partitions: tuple[str, ...]) -> list[tuple[int, int]]:
        if not rids:
            return []
        marks = placeholders(rids)
        sql = (
            f"SELECT src_rid, dst_rid FROM memory_links WHERE src_rid IN ({marks}) AND relation != 'updates' "
            f"UNION SELECT dst_rid, src_rid FROM memory_links WHERE dst_rid IN ({marks}) AND relation != 'updates'"
        )
        return list(self.db.execute(sql, (*rids, *rids)))


class MessageCorpus(Corpus[StoredMessage]):
    FTS_COLUMNS = ("content", "author_name", "context", "ptoken")

    def __init__(self, db: Database, vectors: VectorIndex) -> None:
        super().__init__(
            "messages",
            "messages",
            "message_fts",
            "bm25(message_fts, 1.0, 0.5, 0.3, 0.0)",
            db,
            vectors,
        )

    def value(self, row: dict[str, Any]) -> StoredMessage:
        return StoredMessage.from_row(row)

    def search_text(self, row: dict[str, Any]) -> str:
        """Who said it is part of what a turn means ("Caroline: I went to the support group")."""
        return (
            f"{row['author_name']}: {row['content']}" if row.get("author_name") else row["content"]
        )

    def previous(self, rows: dict[int, dict[str, Any]]) -> dict[int, int]:
        return {rid: row["prev_rid"] for rid, row in rows.items() if row.get("prev_rid")}

    def author(self, row: dict[str, Any]) -> str:
        return row.get("author_id") or ""

    def speaker(self, row: dict[str, Any]) -> str:
        return row.get("author_name") or ""

    def by_assistant(self, row: dict[str, Any]) -> bool:
        return row.get("role") == "assistant"

    def last_reply(self, platform: str, channel_id: str, since: float) -> str:
        """The bot's last reply in a channel since ``since`` ("" when none)."""
        row = self.db.one(
            "SELECT content FROM messages WHERE platform = ? AND channel_id = ? "
            "AND created_at >= ? AND role = 'assistant' ORDER BY created_at DESC LIMIT 1",
            (platform, channel_id, since),
        )
        return str(row["content"] or "") if row else ""

    def neighbours(self, rids: list[int], partitions: tuple[str, ...]) -> list[tuple[int, int]]:
        """A message's graph neighbours are the turns just before and after it in the same channel."""
        found: list[tuple[int, int]] = []
        for rid in rids:
            row = self.db.one(
                "SELECT platform, channel_id, created_at FROM messages WHERE rid = ?", (rid,)
            )
            if row is None:
                continue
            for op, order in (("<", "DESC"), (">", "ASC")):
                sql = (
                    f"SELECT rid FROM messages WHERE platform = ? AND channel_id = ? AND "
                    f"(created_at {op} ? OR (created_at = ? AND rid {op} ?)) ORDER BY created_at {order}, rid {order} LIMIT 1"
                )
                params = (
                    row["platform"],
                    row["channel_id"],
                    row["created_at"],
                    row["created_at"],
                    rid,
                )
                found.extend((rid, r) for (r,) in self.db.execute(sql, params))
        return found


def _within(
    rows: list[dict[str, Any]], partitions: frozenset[str], limit: int
) -> list[dict[str, Any]]:
    """The first ``limit`` of ``rows`` that are in ``partitions``."""
    return [r for r in rows if r["partition_key"] in partitions][: max(limit, 0)]

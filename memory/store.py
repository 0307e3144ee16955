"""Memories: write (safety, dedup, supersession, links, graph), read, recall, reinforce, delete.

Write rules (WRITE-1/2/5): the best vector match in the same partition decides what a new fact is.
    same text, or cosine >= 0.92 with the same words    a duplicate: nothing stored, the existing row returned
    cosine > 0.9 and the same subject                    an update: stored, linked ``updates``, old row superseded
    cosine > 0.7, same subject, the judge says conflict  linked ``contradicts``, old row superseded
    cosine > 0.7                                         stored and linked ``related_to``
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .clock import DAY, Clock
from .corpus import Filter, MemoryCorpus, Order
from .db import Database
from .embeddings import EmbeddingService, ModelMismatch, content_hash
from .errors import EmbeddingError, InvalidInput, NotFound, NotYours
from .graph import Graph
from .knobs import KnobStore, Weights
from .models import (
    DECAY_EXEMPT_VALUES,
    EntityRef,
    FactKind,
    Memory,
    MemoryType,
    NewMemory,
    Provenance,
    Scope,
    Visibility,
    normalise_tags,
)
from .retrieval import ALL_CHANNELS, Channel, Hit, Retriever
from .safety import check_memory, contains_secret, looks_like_injection, normalise_text
from .scopes import RecallContext, may_change, memory_partition, partition_token, placeholders
from .tombstones import Tombstones

if TYPE_CHECKING:
    from .journals import Journals

log = logging.getLogger(__name__)

DEDUP_THRESHOLD = 0.92
UPDATE_THRESHOLD = 0.90
RELATED_THRESHOLD = 0.70

LIST_ORDERS: dict[str, Order] = {
    "recent": (("updated_at", True),),
    "important": (("importance", True), ("updated_at", True)),
    "accessed": (("access_count", True), ("updated_at", True)),
    "oldest": (("created_at", False),),
}

# Given (old content, new content), True when the new one contradicts the old (an LLM judge in the bot).
ContradictionJudge = Callable[[str, str], bool]


@dataclass(frozen=True, slots=True)
class WriteResult:
    status: str  # "stored" | "duplicate"
    memory: Memory
    superseded: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    contradicted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecallFilters:
    types: tuple[MemoryType, ...] = ()
    kinds: tuple[FactKind, ...] = ()
    tags: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    scope_ids: tuple[str, ...] = ()

    def to_filter(self) -> Filter:
        where = Filter()
        for column, values in (("type", self.types), ("kind", self.kinds), ("subject", self.subjects), ("scope_id", self.scope_ids)):
            if values:
                where = where & Filter(f"t.{column} IN ({placeholders(values)})", tuple(str(v) for v in values))
        for tag in self.tags:  # all tags must match
            where = where & Filter("EXISTS (SELECT 1 FROM memory_tags g WHERE g.memory_rid = t.rid AND g.tag = ?)", (tag,))
        return where


@dataclass(slots=True)
class _Reinforcement:
    pending: dict[int, int] = field(default_factory=dict)


class MemoryStore:
    def __init__(
        self, db: Database, embeddings: EmbeddingService, graph: Graph, knobs: KnobStore, clock: Clock, corpus: MemoryCorpus
    ) -> None:
        self.db = db
        self.embeddings = embeddings
        self.graph = graph
        self.knobs = knobs
        self.clock = clock
        self.corpus = corpus
        self.retriever = Retriever(corpus, embeddings, clock)
        self._reinforce = _Reinforcement()
        self.judge: ContradictionJudge | None = None
        self.journal: Journals | None = None  # the Markdown layer (MAINT-6): told of every write and delete
        # SEC-5: what was forgotten; a fact stored again (said again, or stated outright) lifts its tombstone
        self.tombstones = Tombstones(db, clock)

    # -- writes ------------------------------------------------------------------------------------
    def add(self, new: NewMemory, *, contradicts: frozenset[str] | None = None) -> WriteResult:
        """Store a memory by the write rules. ``contradicts``: ids an outside judge already found contradicted
        (the bot asks its model without holding the store); None asks ``self.judge``, if any."""
        new = _prepared(new)
        content = new.content
        key = _partition(new)
        exact = self._exact_duplicate(key, content)
        if exact is not None:
            return WriteResult("duplicate", self._said_again(exact, new.provenance))
        vector = self._vector(content)
        neighbours = self._neighbours(vector, key)
        if neighbours and neighbours[0][1] >= DEDUP_THRESHOLD and _same_words(neighbours[0][0].content, content):
            return WriteResult("duplicate", self._said_again(neighbours[0][0], new.provenance))
        updates, related, contradicted = self._classify(new, neighbours, contradicts)
        with self.db.transaction():
            rid, memory_id = self._insert(new, key)
            if vector is not None:
                self.corpus.vectors.write(rid, key, vector)
            self._link(rid, updates, related, contradicted)
            self.graph.attach(rid, new.entities)
            self.corpus.index_text([rid])
        if vector is not None:
            self.corpus.vectors.mirror_add([(rid, key, vector)])
        stored = self.get(memory_id)
        self.tombstones.lift([stored])
        if self.journal is not None:
            self.journal.stored([stored])
        return WriteResult("stored", stored, tuple(m.id for m in updates), tuple(m.id for m in related), tuple(m.id for m in contradicted))

    def _said_again(self, known: Memory, said: Provenance) -> Memory:
        """A duplicate's messages become sources of the fact it repeats: a targeted forget then removes the
        repeat from history too, instead of leaving it for conversation_search and the next reflection."""
        new = tuple(s for s in said.sources if s not in known.provenance.sources)
        if not new:
            return known
        self.set_provenance(known.rid, replace(known.provenance, sources=known.provenance.sources + new))
        return self.get(known.id)

    def _insert(self, new: NewMemory, key: str) -> tuple[int, str]:
        now = self.clock.now()
        memory_id = str(uuid.uuid4())
        self.db.execute(
            "INSERT INTO memories (id, type, kind, subject, content, tags, source, importance, scope, scope_id, visibility, "
            "partition_key, ptoken, content_hash, ttl, valid_from, valid_to, provenance, created_at, updated_at, guild_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                new.type.value,
                new.kind.value,
                new.subject,
                new.content,
                ",".join(new.tags),
                new.source.value,
                new.importance,
                new.scope.value,
                new.scope_id,
                _visibility(new).value,
                key,
                partition_token(key),
                content_hash(new.content),
                new.ttl,
                new.valid_from or now,
                new.valid_to,
                new.provenance.to_json(),
                now,
                now,
                _home_guild(new),
            ),
        )
        rid = int(self.db.con.last_insert_rowid())
        self.db.con.executemany("INSERT OR IGNORE INTO memory_tags (memory_rid, tag) VALUES (?, ?)", [(rid, t) for t in new.tags])
        return rid, memory_id

    def _exact_duplicate(self, key: str, content: str) -> Memory | None:
        row = self.db.one(
            "SELECT * FROM memories AS t WHERE t.partition_key = ? AND t.content_hash = ? AND " + self.corpus.live(self.clock.now()).sql,
            (key, content_hash(content), self.clock.now()),
        )
        return Memory.from_row(row) if row else None

    def _vector(self, content: str) -> np.ndarray | None:
        if not self.embeddings.available:
            return None
        try:
            return self.embeddings.embed([content])[0]
        except ModelMismatch:
            raise  # another vector space than the store's: refuse the write rather than store it unsearchable
        except EmbeddingError:
            # RET-4: a failing embedder must not lose the memory; it is stored for BM25 and reembed fixes it later.
            log.exception("embedding failed; storing the memory without a vector")
            return None

    def _neighbours(self, vector: np.ndarray | None, key: str) -> list[tuple[Memory, float]]:
        if vector is None:
            return []
        hits = self.corpus.vectors.search(vector, (key,), 8)
        rows = self.corpus.fetch([rid for rid, _ in hits], (key,), self.corpus.live(self.clock.now()))
        return [(Memory.from_row(rows[rid]), sim) for rid, sim in hits if rid in rows]

    def to_judge(self, new: NewMemory) -> list[Memory]:
        """The stored facts a contradiction judge should compare ``new`` with: same subject, related, not an update."""
        new = _prepared(new)
        neighbours = self._neighbours(self._vector(new.content), _partition(new))
        return [
            old
            for old, sim in neighbours
            if RELATED_THRESHOLD < sim <= UPDATE_THRESHOLD and _subject_key(old.subject) == _subject_key(new.subject)
        ]

    def _classify(self, new: NewMemory, neighbours: list[tuple[Memory, float]], judged: frozenset[str] | None = None):
        updates, related, contradicted = [], [], []
        for old, sim in neighbours:
            same_subject = _subject_key(old.subject) == _subject_key(new.subject)
            if sim > UPDATE_THRESHOLD and same_subject:
                updates.append(old)
            elif sim > RELATED_THRESHOLD:
                if same_subject and ((old.id in judged) if judged is not None else self._contradicts(old.content, new.content)):
                    contradicted.append(old)
                else:
                    related.append(old)
        return updates, related, contradicted

    def _contradicts(self, old: str, new: str) -> bool:
        if self.judge is None:
            return False
        try:
            return bool(self.judge(old, new))
        except Exception:
            log.exception("contradiction judge failed; linking as related")
            return False

    def _link(self, rid: int, updates: list[Memory], related: list[Memory], contradicted: list[Memory]) -> None:
        now = self.clock.now()
        rows = [(rid, m.rid, "updates", now) for m in updates] + [(rid, m.rid, "related_to", now) for m in related]
        rows += [(rid, m.rid, "contradicts", now) for m in contradicted]
        self.db.con.executemany("INSERT OR IGNORE INTO memory_links (src_rid, dst_rid, relation, created_at) VALUES (?, ?, ?, ?)", rows)
        new_id = self.db.scalar("SELECT id FROM memories WHERE rid = ?", (rid,))
        for old in updates + contradicted:  # kept for history, no longer recalled
            self.db.execute("UPDATE memories SET superseded_by = ?, valid_to = ? WHERE rid = ?", (new_id, now, old.rid))

    def insert_batch(self, items: list[tuple[NewMemory, np.ndarray | None]]) -> list[str]:
        """Trusted bulk load (file ingest, benchmarks): safety filters apply, dedup and linking do not."""
        ids, rids, vec_rows = [], [], []
        with self.db.transaction():
            for new, vector in items:
                new = _prepared(new)
                key = _partition(new)
                rid, memory_id = self._insert(new, key)
                ids.append(memory_id)
                rids.append(rid)
                if new.entities:
                    self.graph.attach(rid, new.entities)
                if vector is not None:
                    vec_rows.append((rid, key, vector))
            self.corpus.vectors.write_many(vec_rows)
            self.corpus.index_text(rids)
        self.corpus.vectors.mirror_add(vec_rows)
        if self.journal is not None or self.tombstones.any():
            stored = self.by_rids(rids)
            self.tombstones.lift(stored)
            if self.journal is not None:
                self.journal.stored(stored)
        return ids

    def insert_merged(self, new: NewMemory, originals: list[Memory]) -> Memory:
        """Consolidation's write: the merged row, its vector, the originals marked and their graph relinked."""
        new = _prepared(new)
        key = _partition(new)
        vector = self._vector(new.content)
        with self.db.transaction():
            rid, memory_id = self._insert(new, key)
            if vector is not None:
                self.corpus.vectors.write(rid, key, vector)
            old = [m.rid for m in originals]
            self.db.execute(f"UPDATE memories SET consolidated_into = ? WHERE rid IN ({placeholders(old)})", (memory_id, *old))
            self.graph.relink(old, rid)
            self.corpus.index_text([rid])
        if vector is not None:
            self.corpus.vectors.mirror_add([(rid, key, vector)])
        merged = self.get(memory_id)
        self.tombstones.lift([merged])
        if self.journal is not None:
            self.journal.stored([merged])
        return merged

    def supersede(self, new_id: str, old_ids: list[str]) -> None:
        """Mark ``old_ids`` as replaced by ``new_id`` (linked ``updates``, kept for history, no longer recalled):
        for a writer that knows what replaced what, such as a re-ingested file whose passage changed."""
        new = self.get(new_id)
        old = [m for m in (self.get(i) for i in dict.fromkeys(old_ids)) if m.id != new_id and m.superseded_by is None]
        with self.db.transaction():
            self._link(new.rid, old, [], [])
        if self.journal is not None and old:
            self.journal.touched({m.partition_key for m in old})  # no new line; the snapshot drops the replaced ones

    def update(
        self,
        memory_id: str,
        *,
        subject: str | None = None,
        content: str | None = None,
        tags: Any = None,
        importance: float | None = None,
        kind: FactKind | None = None,
        memory_type: MemoryType | None = None,
    ) -> Memory:
        """Change a memory in place: no copy of its old words is kept (a history row would keep them)."""
        old = self.get(memory_id)
        new_kind = kind or old.kind
        new_type = memory_type or old.type
        if subject is None and content is not None and old.subject == old.content[:60]:
            subject = ""  # a subject made from the old words (none was given) is made again from the new ones
        subject, text = check_memory(
            subject if subject is not None else old.subject, content if content is not None else old.content, new_kind
        )
        new_tags = normalise_tags(tags) if tags is not None else old.tags
        new_importance = _importance(importance) if importance is not None else old.importance
        vector = self._vector(text) if text != old.content else None
        key = old.partition_key
        with self.db.transaction():
            self.db.execute(
                "UPDATE memories SET subject = ?, content = ?, tags = ?, importance = ?, kind = ?, type = ?, content_hash = ?, "
                "updated_at = ? WHERE rid = ?",
                (
                    subject,
                    text,
                    ",".join(new_tags),
                    new_importance,
                    new_kind.value,
                    new_type.value,
                    content_hash(text),
                    self.clock.now(),
                    old.rid,
                ),
            )
            self.db.execute("DELETE FROM memory_tags WHERE memory_rid = ?", (old.rid,))
            self.db.con.executemany("INSERT INTO memory_tags (memory_rid, tag) VALUES (?, ?)", [(old.rid, t) for t in new_tags])
            if vector is not None:
                self.corpus.vectors.write(old.rid, key, vector)
            if text != old.content:
                self.embeddings.forget_hash(content_hash(old.content))
        if vector is not None:
            self.corpus.vectors.mirror_add([(old.rid, key, vector)])
        updated = self.get(memory_id)
        self.tombstones.lift([updated])
        if self.journal is not None:
            self.journal.changed(updated)
        return updated

    def delete(self, memory_id: str) -> list[str]:
        """Delete a memory and everything derived from it (MEM-5, SEC-3). Returns every id removed.

        Its history goes with it: the versions it superseded and the rows merged into it say the same
        thing in older words, so keeping them (or reviving one as current) would undo the forget.
        """
        return self.delete_rids(self.lineage([self.get(memory_id).rid]))

    def lineage(self, rids: list[int]) -> list[int]:
        """The rows and, transitively, every row they superseded or were consolidated from."""
        found, frontier = dict.fromkeys(rids), list(rids)
        while frontier:
            marks = placeholders(frontier)
            older = [
                r
                for (r,) in self.db.execute(
                    f"SELECT o.rid FROM memories o JOIN memories n ON n.id IN (o.superseded_by, o.consolidated_into) "
                    f"WHERE n.rid IN ({marks})",
                    frontier,
                )
            ]
            frontier = [r for r in older if r not in found]
            found.update(dict.fromkeys(frontier))
        return list(found)

    def delete_rids(self, rids: list[int]) -> list[str]:
        if not rids:
            return []
        marks = placeholders(rids)
        rows = self.db.rows(f"SELECT id, content_hash, partition_key, created_at FROM memories WHERE rid IN ({marks})", rids)
        with self.db.transaction():
            touched = self.graph.detach(rids)
            self.corpus.vectors.delete(rids)
            self.db.execute(f"DELETE FROM memories WHERE rid IN ({marks})", rids)
            ids = [r["id"] for r in rows]
            self.graph.cleanup(touched)
            for row in rows:
                self.embeddings.forget_hash(row["content_hash"])
        self.corpus.vectors.mirror_remove(rids)
        if self.journal is not None:  # derived files (memory.registry.FILE_REGISTRY) lose the lines at once
            self.journal.removed([(r["id"], r["partition_key"], r["created_at"]) for r in rows])
        return ids

    # -- reads -------------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        row = self.db.one("SELECT * FROM memories WHERE id = ?", (str(memory_id),))
        if row is None:
            raise NotFound(f"no memory with id {memory_id!r}")
        return Memory.from_row(row)

    def partitions_of(self, person_id: str) -> list[str]:
        """Every user-scope partition holding memories about this person (their DMs' and each server's)."""
        return [
            k for (k,) in self.db.execute("SELECT DISTINCT partition_key FROM memories WHERE scope_id = ? AND scope = 'user'", (person_id,))
        ]

    def move_person(self, source: str, target: str) -> None:
        """Linking: every memory about ``source`` becomes one about ``target``, in the matching partitions."""
        rows = self.db.rows(
            "SELECT DISTINCT partition_key, scope, visibility, guild_id FROM memories WHERE scope_id = ? AND scope IN ('user', 'owner')",
            (source,),
        )
        for row in rows:
            new = memory_partition(Scope(row["scope"]), target, Visibility(row["visibility"]), row["guild_id"])
            self.corpus.move_partition(row["partition_key"], new, scope_id=target)
            if self.journal is not None:  # both scopes' snapshots change (the lines stay where they were written)
                self.journal.touched([row["partition_key"], new])

    # -- upkeep (MAINT-1, MAINT-2) ------------------------------------------------------------------
    def consolidation_groups(self) -> list[tuple[str, MemoryType]]:
        """(partition, type) pairs holding live memories: consolidation never merges across them."""
        live = self.corpus.live(self.clock.now())
        rows = self.db.execute(f"SELECT DISTINCT partition_key, type FROM memories t WHERE {live.sql}", live.params)
        return [(key, MemoryType(kind)) for key, kind in rows]

    def decay(self, *, unaccessed_days: float, factor: float) -> int:
        """Importance x ``factor`` for rows not accessed for ``unaccessed_days`` (exempt kinds keep theirs)."""
        with self.db.transaction():
            self.db.execute(
                "UPDATE memories SET importance = importance * ? WHERE forgotten = 0 AND kind NOT IN "
                f"({placeholders(DECAY_EXEMPT_VALUES)}) "
                "AND COALESCE(last_accessed_at, created_at) < ?",
                (factor, *DECAY_EXEMPT_VALUES, self.clock.now() - unaccessed_days * DAY),
            )
            return self.db.con.changes()

    def prune(self, *, below: float, older_than_days: float) -> int:
        """Soft-forget: the row stays for the audit trail but is never recalled again."""
        now = self.clock.now()
        with self.db.transaction():
            self.db.execute(
                f"UPDATE memories SET forgotten = 1, updated_at = ? WHERE forgotten = 0 AND importance < ? AND access_count = 0 "
                f"AND created_at < ? AND kind NOT IN ({placeholders(DECAY_EXEMPT_VALUES)})",
                (now, below, now - older_than_days * DAY, *DECAY_EXEMPT_VALUES),
            )
            return self.db.con.changes()

    def partitions(self) -> tuple[str, ...]:
        """Every partition that holds a memory (the operator's view of the whole store)."""
        return tuple(k for (k,) in self.db.execute("SELECT DISTINCT partition_key FROM memories ORDER BY 1"))

    def ids_starting(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids that begin with ``prefix`` (the CLI accepts the first characters of an id)."""
        return [i for (i,) in self.db.execute("SELECT id FROM memories WHERE id >= ? AND id < ? LIMIT ?", (prefix, prefix + "~", limit))]

    def count(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM memories"))

    # -- the operator's views (the dashboard: every partition, owner scope included) ---------------------
    def page(self, where: Filter, limit: int, offset: int) -> tuple[list[Memory], int]:
        """One page of live memories matching ``where`` (on alias ``t``), newest change first, and how many match."""
        total = self.count_live(where)
        where = self.corpus.live(self.clock.now()) & where
        rows = self.db.rows(
            f"SELECT * FROM memories AS t WHERE {where.sql} ORDER BY t.updated_at DESC, t.rid DESC LIMIT ? OFFSET ?",
            (*where.params, limit, offset),
        )
        return [Memory.from_row(r) for r in rows], total

    def count_live(self, where: Filter) -> int:
        """How many live memories match ``where`` (on alias ``t``)."""
        where = self.corpus.live(self.clock.now()) & where
        return int(self.db.scalar(f"SELECT COUNT(*) FROM memories AS t WHERE {where.sql}", where.params))

    def personal_scope_ids(self) -> list[str]:
        """Whose user or owner memories the store holds (a CLI-added "alice" included)."""
        return [p for (p,) in self.db.execute("SELECT DISTINCT scope_id FROM memories WHERE scope IN ('user', 'owner')")]

    def count_personal(self, person_id: str) -> int:
        return self.count_live(Filter("t.scope IN ('user', 'owner') AND t.scope_id = ?", (person_id,)))

    def guild_counts(self) -> dict[str, int]:
        """Live memories per guild: its lore and what people said there."""
        live = self.corpus.live(self.clock.now())
        rows = self.db.execute(
            "SELECT g, COUNT(*) FROM (SELECT CASE WHEN t.scope = 'guild' THEN t.scope_id ELSE t.guild_id END AS g FROM memories AS t "
            f"WHERE {live.sql}) WHERE g IS NOT NULL GROUP BY g",
            live.params,
        )
        return {g: int(n) for g, n in rows}

    def in_written_order(self, batch: int = 1_000) -> Iterator[list[Memory]]:
        """Every memory row, history included, in the order written, a batch at a time (rebuilding the journals)."""
        after = 0
        while rows := self.db.rows("SELECT * FROM memories WHERE rid > ? ORDER BY rid LIMIT ?", (after, batch)):
            yield [Memory.from_row(r) for r in rows]
            after = rows[-1]["rid"]

    def by_rids(self, rids: list[int]) -> list[Memory]:
        found: list[Memory] = []
        for i in range(0, len(rids), 400):
            chunk = rids[i : i + 400]
            found += [Memory.from_row(r) for r in self.db.rows(f"SELECT * FROM memories WHERE rid IN ({placeholders(chunk)})", chunk)]
        return found

    def learned_from(self, message_ids: list[str]) -> list[Memory]:
        """Memories whose provenance names any of these stored messages as a source."""
        if not message_ids:
            return []
        rows = self.db.rows(
            "SELECT * FROM memories WHERE EXISTS (SELECT 1 FROM json_each(memories.provenance, '$.sources') "
            "WHERE value IN (SELECT value FROM json_each(?))) ORDER BY rid",
            (json.dumps(message_ids),),
        )
        return [Memory.from_row(r) for r in rows]

    def set_provenance(self, rid: int, provenance: Provenance) -> None:
        self.db.execute("UPDATE memories SET provenance = ? WHERE rid = ?", (provenance.to_json(), rid))

    def get_visible(self, memory_id: str, ctx: RecallContext) -> Memory:
        """A memory by id, but only if the context may see it: the model cannot reach past its scope by id."""
        memory = self.get(memory_id)
        if memory.partition_key not in ctx.memory_partitions():
            raise NotFound(f"no memory with id {memory_id!r}")
        return memory

    def get_changeable(self, memory_id: str, ctx: RecallContext) -> Memory:
        """A memory the speaker may update or delete (SEC-1): visible here, and theirs (or lore they administer)."""
        memory = self.get_visible(memory_id, ctx)
        if not may_change(ctx, memory.scope, memory.scope_id):
            raise NotYours(
                f"memory {memory_id!r} is not yours to change: only the person it is about"
                + (" or this server's admins" if memory.scope is Scope.GUILD else "")
                + " can change it"
            )
        return memory

    def list_memories(
        self,
        partitions: tuple[str, ...] | None = None,
        filters: RecallFilters = RecallFilters(),
        *,
        order: str = "recent",
        limit: int = 20,
        include_inactive: bool = False,
    ) -> list[Memory]:
        where = filters.to_filter()
        if not include_inactive:
            where = self.corpus.live(self.clock.now()) & where
        if order not in LIST_ORDERS:
            raise InvalidInput(f"order must be one of {', '.join(LIST_ORDERS)}, not {order!r}")
        if partitions is None:
            cond = where.sql and f"WHERE {where.sql}"
            sql_order = ", ".join(f"t.{c} {'DESC' if d else 'ASC'}" for c, d in LIST_ORDERS[order])
            rows = self.db.rows(f"SELECT * FROM memories AS t {cond} ORDER BY {sql_order} LIMIT ?", (*where.params, limit))
        else:
            rows = self.corpus.ordered(partitions, where, LIST_ORDERS[order], limit)
        return [Memory.from_row(r) for r in rows]

    def recall(
        self,
        ctx: RecallContext,
        query: str,
        *,
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
        weights: Weights | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        threshold: float | None = None,
        reinforce: bool = True,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit]:
        """Hybrid recall of what this context may see (the one path the bot, the tools and the CLI use)."""
        hits = self.retriever.search(
            query,
            ctx.memory_partitions(),
            self.knobs.get("memories"),
            where=filters.to_filter(),
            top_k=top_k,
            weights=weights,
            channels=channels,
            threshold=threshold,
            query_vector=query_vector,
            zone=ctx.tz,
        )
        if reinforce:
            self.note_access([h.row["rid"] for h in hits])
        return hits

    def search(
        self,
        ctx: RecallContext,
        query: str = "",
        *,
        mode: str = "hybrid",
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
        order: str = "recent",
    ) -> list[Memory]:
        """RET-6 search modes: ``hybrid`` ranks by meaning and words; ``recent`` and ``important`` are plain
        orderings of what the context may see; ``typed`` needs ``filters.types`` and sorts by ``order``."""
        limit = top_k or self.knobs.get("memories").top_k
        if mode == "hybrid":
            return [Memory.from_row(h.row) for h in self.recall(ctx, query, filters=filters, top_k=limit)]
        if mode == "typed" and not filters.types:
            raise InvalidInput("the typed search mode needs at least one memory type")
        if mode not in ("recent", "important", "typed"):
            raise InvalidInput(f"search mode must be hybrid, recent, important or typed, not {mode!r}")
        return self.list_memories(ctx.memory_partitions(), filters, order=mode if mode != "typed" else order, limit=limit)

    # -- reinforcement (RET-5) ------------------------------------------------------------------------
    def note_access(self, rids: list[int]) -> None:
        for rid in rids:
            self._reinforce.pending[rid] = self._reinforce.pending.get(rid, 0) + 1

    def flush_access(self) -> int:
        """Apply the queued access bumps in one statement batch; called off the reply path."""
        pending, self._reinforce.pending = self._reinforce.pending, {}
        if not pending:
            return 0
        now = self.clock.now()
        with self.db.transaction():
            self.db.con.executemany(
                "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? WHERE rid = ?",
                [(count, now, rid) for rid, count in pending.items()],
            )
        return len(pending)

    def stats(self) -> dict[str, Any]:
        counts = (
            self.db.one(
                "SELECT COUNT(*) AS total, SUM(forgotten = 0 AND consolidated_into IS NULL AND superseded_by IS NULL) AS "
                "active FROM memories"
            )
            or {}
        )
        return {
            "memories": counts.get("total") or 0,
            "active": counts.get("active") or 0,
            "embedding": self.embeddings.fingerprint,
            "dimension": self.embeddings.stored_dim(),
        }


def _prepared(new: NewMemory) -> NewMemory:
    """Every write path's first step: safety filters and normalisation (WRITE-6), importance bounds, clean tags
    and entity names (they reach the prompt too, so they pass the same filter)."""
    subject, content = check_memory(new.subject, new.content, new.kind)
    return replace(
        new,
        subject=subject,
        content=content,
        importance=_importance(new.importance),
        tags=clean_tags(new.tags),
        entities=clean_entities(new.entities),
    )


def _unsafe(text: str) -> bool:
    return looks_like_injection(text) or contains_secret(text)


def clean_tags(tags: object) -> tuple[str, ...]:
    return tuple(t for t in normalise_tags(tags) if not _unsafe(t))


def clean_entities(entities: tuple[EntityRef, ...]) -> tuple[EntityRef, ...]:
    """Entity names go into the prompt's "Known entities": normalised, and dropped when they read like an
    instruction or carry a secret (an attacker's "SYSTEM OVERRIDE: ..." is not a place or a person)."""
    out = []
    for ref in entities:
        name = normalise_text(ref.name)[:120]
        if not name or _unsafe(name):
            continue
        relations = tuple(
            (normalise_text(r)[:60], normalise_text(t)[:120]) for r, t in ref.relations if normalise_text(t) and not _unsafe(f"{r} {t}")
        )
        out.append(EntityRef(name, ref.type, relations))
    return tuple(out)


def _partition(new: NewMemory) -> str:
    return memory_partition(new.scope, new.scope_id, new.visibility, _home_guild(new))


def _home_guild(new: NewMemory) -> str | None:
    """Only a public user fact is tied to the server it was said in; lore's guild is its scope id."""
    return new.guild_id if new.scope is Scope.USER and new.visibility is Visibility.PUBLIC else None


def _importance(value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number from 1 to 10, not {value!r}") from None
    if not 1 <= number <= 10:
        raise InvalidInput(f"importance must be from 1 to 10, not {number:g}")
    return number


def _visibility(new: NewMemory) -> Visibility:
    return Visibility.PRIVATE if new.scope.value == "owner" else (Visibility.PUBLIC if new.scope.value == "guild" else new.visibility)


def _subject_key(subject: str) -> str:
    return " ".join(re.findall(r"\w+", subject.lower()))


def _same_words(a: str, b: str) -> bool:
    """Near-identical wording: a changed number or name makes the new fact an update, not a duplicate."""
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.8


def dump_json(memory: Memory) -> str:
    return json.dumps(memory.as_dict(), ensure_ascii=False)

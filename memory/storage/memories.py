"""The memories aggregate's repository: the one module whose SQL names ``memories``, ``memory_tags`` or
``memory_links`` (besides the corpus plumbing, the forget registry and the migrations, declared in
``tests/test_architecture.py``). It takes and returns typed values: ``Memory`` rows, ``RecallFilters``
and ``MemoryQuery`` filters that it turns into SQL itself, never SQL fragments from a caller.

What to write and when (dedup, supersession, the judge, tombstones, journals) is ``memory.write.store``'s
write policy above it; ranking is ``memory.recall.recall``. A second storage engine implements this class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..clock import DAY, Clock
from ..errors import InvalidInput, NotFound
from ..models import (
    DECAY_EXEMPT_VALUES,
    FactKind,
    Memory,
    MemoryType,
    NewMemory,
    Provenance,
    Scope,
    Visibility,
)
from ..scopes import partition_token, placeholders
from .corpus import Filter, MemoryCorpus, Order
from .db import Database
from .embeddings import content_hash

LIST_ORDERS: dict[str, Order] = {
    "recent": (("updated_at", True),),
    "important": (("importance", True), ("updated_at", True)),
    "accessed": (("access_count", True), ("updated_at", True)),
    "oldest": (("created_at", False),),
}


@dataclass(frozen=True, slots=True)
class RecallFilters:
    """Which memories a recall or a listing keeps: each field empty means "any"; tags must all match."""

    types: tuple[MemoryType, ...] = ()
    kinds: tuple[FactKind, ...] = ()
    tags: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    scope_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    """The operator's listing (the dashboard): every partition, these conditions, one page."""

    scope: Scope | None = None
    person: str | None = None  # scope_id of a user or owner memory
    guild: str | None = None  # guild lore, and what people said in that guild
    type: MemoryType | None = None
    kind: FactKind | None = None
    tags: tuple[str, ...] = ()  # all must match
    text: str = ""  # substring of content or subject, case-insensitive
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True, slots=True)
class Removed:
    """What a delete took away, for the caller's bookkeeping (embedding cache, journals)."""

    id: str
    content_hash: str
    partition_key: str
    created_at: float


@dataclass(frozen=True, slots=True)
class PersonPartition:
    """One partition of memories about a person, with what it takes to file them under someone else."""

    partition_key: str
    scope: Scope
    visibility: Visibility
    guild_id: str | None


def filters_sql(filters: RecallFilters) -> Filter:
    """The filters as conditions on alias ``t`` (what the corpus and the retriever take)."""
    where = Filter()
    for column, values in (
        ("type", filters.types),
        ("kind", filters.kinds),
        ("subject", filters.subjects),
        ("scope_id", filters.scope_ids),
    ):
        if values:
            where = where & Filter(
                f"t.{column} IN ({placeholders(values)})", tuple(str(v) for v in values)
            )
    for tag in filters.tags:  # all tags must match
        where = where & Filter(
            "EXISTS (SELECT 1 FROM memory_tags g WHERE g.memory_rid = t.rid AND g.tag = ?)", (tag,)
        )
    return where


def _query_sql(query: MemoryQuery) -> Filter:
    # type, kind and tags as recall filters them; the rest is the listing's own
    types = (query.type,) if query.type is not None else ()
    kinds = (query.kind,) if query.kind is not None else ()
    where = filters_sql(RecallFilters(types=types, kinds=kinds, tags=query.tags))
    if query.scope is not None:
        where = where & Filter("t.scope = ?", (query.scope.value,))
    if query.person:
        where = where & _personal(query.person)
    if query.guild:
        where = where & Filter(
            "(t.scope = 'guild' AND t.scope_id = ?) OR t.guild_id = ?", (query.guild, query.guild)
        )
    if query.text:  # a plain substring match: user text never becomes SQL or FTS syntax
        text = "instr(lower(t.content), lower(?)) > 0 OR instr(lower(t.subject), lower(?)) > 0"
        where = where & Filter(text, (query.text, query.text))
    return where


def _personal(person_id: str) -> Filter:
    return Filter("t.scope IN ('user', 'owner') AND t.scope_id = ?", (person_id,))


def count_memories(db: Database) -> int:
    """Every memory row in a store file opened on its own (the doctor opens one read-only, with no engine)."""
    return int(db.scalar("SELECT COUNT(*) FROM memories"))


class MemoryRepository:
    """Rows of the memories aggregate. Writes run inside the caller's transaction unless they say otherwise."""

    def __init__(self, db: Database, corpus: MemoryCorpus, clock: Clock) -> None:
        self.db = db
        self.corpus = corpus
        self.clock = clock

    # -- writes ------------------------------------------------------------------------------------
    def insert(
        self, new: NewMemory, key: str, visibility: Visibility, guild_id: str | None, memory_id: str
    ) -> int:
        """Store ``new`` (already checked) in partition ``key`` as ``memory_id``, with its tags; returns its rid.

        :param visibility: the visibility the write policy settled on (owner memory is always private).
        :param guild_id: the home guild of a public user fact, else None.
        """
        now = self.clock.now()
        columns = (
            "id, type, kind, subject, content, tags, source, importance, scope, scope_id, visibility, partition_key, ptoken, "
            "content_hash, ttl, valid_from, valid_to, provenance, created_at, updated_at, guild_id, subject_person_id"
        )
        values = (
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
            visibility.value,
            key,
            partition_token(key),
            content_hash(new.content),
            new.ttl,
            new.valid_from or now,
            new.valid_to,
            new.provenance.to_json(),
            now,
            now,
            guild_id,
            new.subject_person_id,
        )
        self.db.execute(f"INSERT INTO memories ({columns}) VALUES ({placeholders(values)})", values)
        rid = int(self.db.con.last_insert_rowid())
        self.db.con.executemany(
            "INSERT OR IGNORE INTO memory_tags (memory_rid, tag) VALUES (?, ?)",
            [(rid, t) for t in new.tags],
        )
        return rid

    def link(
        self, rid: int, updates: list[Memory], related: list[Memory], contradicted: list[Memory]
    ) -> None:
        """Link row ``rid`` to older facts; the ones it updates or contradicts are superseded (kept, not recalled)."""
        now = self.clock.now()
        # The older facts were read before this write transaction began; another writer may have deleted one
        # since (a forget in the dashboard, a second bot): a link to it would fail the whole write with a FOREIGN
        # KEY error (issue 31). Inside the transaction the rows still there are the ones linked; the rest are not.
        # rid: SQLite reuses a max rowid
        there = self._present([m.rid for m in (*updates, *related, *contradicted)]) - {rid}
        updates, related, contradicted = (
            [m for m in group if m.rid in there] for group in (updates, related, contradicted)
        )
        rows = [(rid, m.rid, "updates", now) for m in updates] + [
            (rid, m.rid, "related_to", now) for m in related
        ]
        rows += [(rid, m.rid, "contradicts", now) for m in contradicted]
        self.db.con.executemany(
            "INSERT OR IGNORE INTO memory_links (src_rid, dst_rid, relation, created_at) VALUES (?, ?, ?, ?)",
            rows,
        )
        new_id = self.db.scalar("SELECT id FROM memories WHERE rid = ?", (rid,))
        for old in updates + contradicted:
            self.db.execute(
                "UPDATE memories SET superseded_by = ?, valid_to = ? WHERE rid = ?",
                (new_id, now, old.rid),
            )

    def _present(self, rids: list[int]) -> set[int]:
        if not rids:
            return set()
        return {
            r
            for (r,) in self.db.execute(
                f"SELECT rid FROM memories WHERE rid IN ({placeholders(rids)})", tuple(rids)
            )
        }

    def mark_consolidated(self, rids: list[int], into_id: str) -> None:
        """The rows ``rids`` were merged into memory ``into_id`` (kept for history, no longer recalled)."""
        self.db.execute(
            f"UPDATE memories SET consolidated_into = ? WHERE rid IN ({placeholders(rids)})",
            (into_id, *rids),
        )

    def rewrite(self, old: Memory, changed: Memory) -> None:
        """Overwrite row ``old`` with ``changed``'s subject, content, tags, importance, kind and type (no history kept)."""
        self.db.execute(
            "UPDATE memories SET subject = ?, content = ?, tags = ?, importance = ?, kind = ?, type = ?, content_hash = ?, "
            "updated_at = ? WHERE rid = ?",
            (
                changed.subject,
                changed.content,
                ",".join(changed.tags),
                changed.importance,
                changed.kind.value,
                changed.type.value,
                content_hash(changed.content),
                self.clock.now(),
                old.rid,
            ),
        )
        self.db.execute("DELETE FROM memory_tags WHERE memory_rid = ?", (old.rid,))
        self.db.con.executemany(
            "INSERT INTO memory_tags (memory_rid, tag) VALUES (?, ?)",
            [(old.rid, t) for t in changed.tags],
        )

    def removable(self, rids: list[int]) -> list[Removed]:
        """What deleting ``rids`` would take away (read before the delete, outside its transaction)."""
        sql = f"SELECT id, content_hash, partition_key, created_at FROM memories WHERE rid IN ({placeholders(rids)})"
        return [
            Removed(r["id"], r["content_hash"], r["partition_key"], r["created_at"])
            for r in self.db.rows(sql, rids)
        ]

    def delete(self, rids: list[int]) -> None:
        """Delete the rows (their tags and links go by foreign key); inside the caller's transaction."""
        self.db.execute(f"DELETE FROM memories WHERE rid IN ({placeholders(rids)})", rids)

    def sourced_from(self, message_ids: list[str]) -> list[tuple[int, Provenance]]:
        """(rid, provenance) of the memories learned from any of these stored messages."""
        if not message_ids:
            return []
        rows = self.db.rows(
            "SELECT rid, provenance FROM memories WHERE EXISTS (SELECT 1 FROM json_each(memories.provenance, '$.sources') "
            f"WHERE value IN ({placeholders(message_ids)}))",
            message_ids,
        )
        return [(r["rid"], Provenance.from_json(r["provenance"])) for r in rows]

    def set_provenance(self, rid: int, provenance: Provenance) -> None:
        """Replace row ``rid``'s provenance (which messages and files it was learned from)."""
        self.db.execute(
            "UPDATE memories SET provenance = ? WHERE rid = ?", (provenance.to_json(), rid)
        )

    def add_access(self, counts: dict[int, int]) -> None:
        """Reinforcement: each rid was recalled ``count`` more times, now. One transaction."""
        now = self.clock.now()
        with self.db.transaction():
            self.db.con.executemany(
                "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? WHERE rid = ?",
                [(count, now, rid) for rid, count in counts.items()],
            )

    # -- reads -------------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        """The memory with this id, history rows included. :raises NotFound: no such id."""
        row = self.db.one("SELECT * FROM memories WHERE id = ?", (str(memory_id),))
        if row is None:
            raise NotFound(f"no memory with id {memory_id!r}")
        return Memory.from_row(row)

    def by_rids(self, rids: list[int]) -> list[Memory]:
        """The memories with these row ids (any order; missing ones are left out)."""
        found: list[Memory] = []
        for i in range(0, len(rids), 400):
            chunk = rids[i : i + 400]
            found += [
                Memory.from_row(r)
                for r in self.db.rows(
                    f"SELECT * FROM memories WHERE rid IN ({placeholders(chunk)})", chunk
                )
            ]
        return found

    def rids_by_id(self, memory_ids: list[str]) -> list[int]:
        """Row ids of the memories with these ids (missing ones are left out)."""
        rows = self.db.execute(
            "SELECT rid FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(memory_ids),),
        )
        return [int(r) for (r,) in rows]

    def live_with_hash(self, key: str, content: str) -> Memory | None:
        """A live memory in partition ``key`` with exactly this content, if any."""
        live = self.corpus.live(self.clock.now())
        row = self.db.one(
            f"SELECT * FROM memories AS t WHERE t.partition_key = ? AND t.content_hash = ? AND {live.sql}",
            (key, content_hash(content), *live.params),
        )
        return Memory.from_row(row) if row else None

    def lineage(self, rids: list[int], same: Callable[[str, str], bool] | None = None) -> list[int]:
        """The rows and, transitively, every row they superseded or were consolidated from.
        ``same(older, newer)``, if given, says whether a superseded row is the same fact as the row
        that superseded it: one that is not is left out, with what it superseded."""
        found, frontier = dict.fromkeys(rids), list(rids)
        while frontier:
            sql = (
                "SELECT o.rid, o.content, n.content, o.superseded_by = n.id FROM memories o "
                "JOIN memories n ON n.id IN (o.superseded_by, o.consolidated_into) "
                f"WHERE n.rid IN ({placeholders(frontier)})"
            )
            frontier = [
                rid
                for rid, older, newer, superseded in self.db.execute(sql, frontier)
                if rid not in found and not (superseded and same and not same(older, newer))
            ]
            found.update(dict.fromkeys(frontier))
        return list(found)

    def release_superseded(self, rids: list[int]) -> list[str]:
        """The rows these superseded that are not among them are current again (their successor
        goes, and they are another fact); inside the caller's transaction. Returns their partition
        keys."""
        marks = placeholders(rids)
        where = (
            f"superseded_by IN (SELECT id FROM memories WHERE rid IN ({marks})) "
            f"AND rid NOT IN ({marks})"
        )
        params = (*rids, *rids)
        keys = [
            k
            for (k,) in self.db.execute(f"SELECT partition_key FROM memories WHERE {where}", params)
        ]
        if keys:
            sql = f"UPDATE memories SET superseded_by = NULL, valid_to = NULL WHERE {where}"
            self.db.execute(sql, params)
        return sorted(set(keys))

    def listing(
        self,
        partitions: tuple[str, ...] | None = None,
        filters: RecallFilters = RecallFilters(),
        order: str = "recent",
        limit: int = 20,
        include_inactive: bool = False,
    ) -> list[Memory]:
        """Memories in ``partitions`` (None: all of them) passing ``filters``, by a named order of ``LIST_ORDERS``.

        :param include_inactive: also forgotten, merged, superseded and expired rows.
        :raises InvalidInput: an unknown order.
        """
        if order not in LIST_ORDERS:
            raise InvalidInput(f"order must be one of {', '.join(LIST_ORDERS)}, not {order!r}")
        where = filters_sql(filters)
        if not include_inactive:
            where = self.corpus.live(self.clock.now()) & where
        if partitions is not None:
            rows = self.corpus.ordered(partitions, where, LIST_ORDERS[order], limit)
            return [Memory.from_row(r) for r in rows]
        cond = where.sql and f"WHERE {where.sql}"
        sql_order = ", ".join(f"t.{c} {'DESC' if d else 'ASC'}" for c, d in LIST_ORDERS[order])
        rows = self.db.rows(
            f"SELECT * FROM memories AS t {cond} ORDER BY {sql_order} LIMIT ?",
            (*where.params, limit),
        )
        return [Memory.from_row(r) for r in rows]

    def listing_many(
        self, groups: list[tuple[tuple[str, ...], int]], filters: RecallFilters, order: str
    ) -> list[list[Memory]]:
        """``listing`` of live memories for each (partitions, limit) of ``groups``, asked in one statement.

        :raises InvalidInput: an unknown order.
        """
        if order not in LIST_ORDERS:
            raise InvalidInput(f"order must be one of {', '.join(LIST_ORDERS)}, not {order!r}")
        where = self.corpus.live(self.clock.now()) & filters_sql(filters)
        return [
            [Memory.from_row(r) for r in rows]
            for rows in self.corpus.ordered_many(groups, where, LIST_ORDERS[order])
        ]

    def partitions(self) -> tuple[str, ...]:
        """Every partition that holds a memory (the operator's view of the whole store)."""
        return tuple(
            k for (k,) in self.db.execute("SELECT DISTINCT partition_key FROM memories ORDER BY 1")
        )

    def partitions_of(self, person_id: str) -> list[str]:
        """Every user-scope partition holding memories about this person (their DMs' and each server's)."""
        sql = "SELECT DISTINCT partition_key FROM memories WHERE scope_id = ? AND scope = 'user'"
        return [k for (k,) in self.db.execute(sql, (person_id,))]

    def told_about(self, person_id: str, limit: int) -> list[Memory]:
        """Live public facts others said in a server about this person, by identity (``subject_person_id``,
        SEC-5): never lore, the owner's memory or anyone's DM-private facts."""
        where = self.corpus.live(self.clock.now()) & Filter(
            "t.subject_person_id = ? AND t.scope = 'user' AND t.visibility = 'public' AND t.scope_id != ?",
            (person_id, person_id),
        )
        sql = f"SELECT * FROM memories AS t WHERE {where.sql} ORDER BY t.updated_at DESC LIMIT ?"
        return [Memory.from_row(r) for r in self.db.rows(sql, (*where.params, limit))]

    def rebind_subject(self, source: str, target: str) -> None:
        """Linking (CHAN-4): facts about ``source`` are about ``target`` from now on."""
        self.db.execute(
            "UPDATE memories SET subject_person_id = ? WHERE subject_person_id = ?",
            (target, source),
        )

    def personal_partitions(self, person_id: str) -> list[PersonPartition]:
        """The user- and owner-scope partitions about this person, with what placed them there."""
        sql = "SELECT DISTINCT partition_key, scope, visibility, guild_id FROM memories WHERE scope_id = ? AND scope IN ('user', 'owner')"
        rows = self.db.rows(sql, (person_id,))
        return [
            PersonPartition(
                r["partition_key"], Scope(r["scope"]), Visibility(r["visibility"]), r["guild_id"]
            )
            for r in rows
        ]

    def ids_starting(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids that begin with ``prefix`` (the CLI accepts the first characters of an id)."""
        sql = "SELECT id FROM memories WHERE id >= ? AND id < ? LIMIT ?"
        return [i for (i,) in self.db.execute(sql, (prefix, prefix + "~", limit))]

    def count(self) -> int:
        """Every memory row, history included."""
        return count_memories(self.db)

    def count_active(self) -> int:
        """Rows neither forgotten, merged away nor superseded (expiry aside)."""
        sql = "SELECT COUNT(*) FROM memories WHERE forgotten = 0 AND consolidated_into IS NULL AND superseded_by IS NULL"
        return int(self.db.scalar(sql))

    def count_in(self, partitions: tuple[str, ...]) -> int:
        """Every row, history included, in these partitions."""
        sql = f"SELECT COUNT(*) FROM memories WHERE partition_key IN ({placeholders(partitions)})"
        return int(self.db.scalar(sql, partitions)) if partitions else 0

    def in_written_order(self, batch: int = 1_000) -> Iterator[list[Memory]]:
        """Every memory row, history included, in the order written, a batch at a time (rebuilding the journals)."""
        after = 0
        while rows := self.db.rows(
            "SELECT * FROM memories WHERE rid > ? ORDER BY rid LIMIT ?", (after, batch)
        ):
            yield [Memory.from_row(r) for r in rows]
            after = rows[-1]["rid"]

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

    # -- upkeep ------------------------------------------------------------------------------------
    def consolidation_groups(self) -> list[tuple[str, MemoryType]]:
        """(partition, type) pairs holding live memories: consolidation never merges across them."""
        live = self.corpus.live(self.clock.now())
        rows = self.db.execute(
            f"SELECT DISTINCT partition_key, type FROM memories t WHERE {live.sql}", live.params
        )
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

    def adjust_importance(self, rids: list[int], delta: float) -> int:
        """Importance moved by ``delta`` within 0..10 (ORCH-12: a reaction on a reply that used these rows)."""
        self.db.execute(
            "UPDATE memories SET importance = MIN(10.0, MAX(0.0, importance + ?)) WHERE rid IN (SELECT value FROM json_each(?))",
            (delta, json.dumps(rids)),
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

    # -- the operator's views (the dashboard: every partition, owner scope included) ---------------------
    def page(self, query: MemoryQuery, limit: int, offset: int) -> tuple[list[Memory], int]:
        """One page of live memories matching ``query``, newest change first, and how many match in all."""
        where = self.corpus.live(self.clock.now()) & _query_sql(query)
        total = int(
            self.db.scalar(f"SELECT COUNT(*) FROM memories AS t WHERE {where.sql}", where.params)
        )
        rows = self.db.rows(
            f"SELECT * FROM memories AS t WHERE {where.sql} ORDER BY t.updated_at DESC, t.rid DESC LIMIT ? OFFSET ?",
            (*where.params, limit, offset),
        )
        return [Memory.from_row(r) for r in rows], total

    def count_personal(self, person_id: str) -> int:
        """Live user and owner memories about this person."""
        where = self.corpus.live(self.clock.now()) & _personal(person_id)
        return int(
            self.db.scalar(f"SELECT COUNT(*) FROM memories AS t WHERE {where.sql}", where.params)
        )

    def personal_scope_ids(self) -> list[str]:
        """Whose user or owner memories the store holds (a CLI-added "alice" included)."""
        return [
            p
            for (p,) in self.db.execute(
                "SELECT DISTINCT scope_id FROM memories WHERE scope IN ('user', 'owner')"
            )
        ]

    def guild_counts(self) -> dict[str, int]:
        """Live memories per guild: its lore and what people said there."""
        live = self.corpus.live(self.clock.now())
        rows = self.db.execute(
            "SELECT g, COUNT(*) FROM (SELECT CASE WHEN t.scope = 'guild' THEN t.scope_id ELSE t.guild_id END AS g FROM memories AS t "
            f"WHERE {live.sql}) WHERE g IS NOT NULL GROUP BY g",
            live.params,
        )
        return {g: int(n) for g, n in rows}

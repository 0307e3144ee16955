"""Memories' write policy: what a new fact is, given what is stored (safety, dedup, supersession, links,
graph, tombstones, journals), above the rows in ``memory.storage.memories`` and recall in ``memory.recall.recall``.

Write rules (WRITE-1/2/5): the best vector match in the same partition decides what a new fact is.
    same text, or cosine >= 0.92 with the same words    a duplicate: nothing stored, the existing row returned
    cosine > 0.9 and the same subject                    an update: stored, linked ``updates``, old row superseded
    cosine > 0.7, same subject, judged a contradiction   linked ``contradicts``, old row superseded
    cosine > 0.7                                         stored and linked ``related_to``
Two distinct facts (``memory.write.versions``: other days or dates, or other numbers in other
words: "Alice ran 5 km on Monday", "Alice ran 7 km on Tuesday") are never a duplicate, an update or
a contradiction of each other, only related. Forgetting a fact takes its older versions
(``versions``), never a distinct fact chained to it (by a store before issue 44): that one is
current again.

A contradiction is judged one way: ``to_judge`` gathers the candidates, the caller asks its model (async,
off the memory thread: a job's ``memory.jobs.base.WriteFacts`` asks the extraction model), and ``add``
applies the verdict (``contradicts``). The store never calls a model itself.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EmbeddingError, InvalidInput, NotFound, NotYours
from ..models import (
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
from ..safety import check_memory, contains_secret, looks_like_injection, normalise_text
from ..scopes import RecallContext, may_change, memory_partition
from ..storage.embeddings import EmbeddingService, ModelMismatch, content_hash
from ..storage.graph import Graph
from ..storage.memories import LIST_ORDERS, MemoryQuery, MemoryRepository, RecallFilters
from .tombstones import Tombstones
from .versions import distinct

if TYPE_CHECKING:
    from ..storage.journals import Journals

log = logging.getLogger(__name__)

__all__ = ["LIST_ORDERS", "MemoryQuery", "MemoryStore", "RecallFilters", "WriteResult"]

DEDUP_THRESHOLD = 0.92
UPDATE_THRESHOLD = 0.90
RELATED_THRESHOLD = 0.70


@dataclass(frozen=True, slots=True)
class WriteResult:
    status: str  # "stored" | "duplicate"
    memory: Memory
    superseded: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    contradicted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What the CLI's ``stats`` and ``restore`` report of the memories (``MemoryStore.stats``)."""

    memories: int
    active: int
    embedding: str | None
    dimension: int | None


class MemoryStore:
    """The memories aggregate's writes, by the rules above. Reads go to their owners: rows to
    ``MemoryRepository`` (``engine.memory_rows``), ranking and reinforcement to ``MemoryRecall`` (``engine.recall``)."""

    def __init__(
        self,
        rows: MemoryRepository,
        embeddings: EmbeddingService,
        graph: Graph,
        tombstones: Tombstones,
        journal: Journals | None = None,
    ) -> None:
        """:param rows: the repository.
        :param embeddings: vectors for new facts. :param graph: entities of each fact.
        :param tombstones: forgotten facts (SEC-5: a fact stored again lifts its tombstone).
        :param journal: the Markdown layer (MAINT-6), told of every write and delete; None: switched off."""
        self.rows = rows
        self.embeddings = embeddings
        self.graph = graph
        self.tombstones = tombstones
        self.journal = journal

    # -- writes ------------------------------------------------------------------------------------
    def add(self, new: NewMemory, *, contradicts: frozenset[str] = frozenset()) -> WriteResult:
        """Store a memory by the write rules.

        :param new: the fact; safety filters and normalisation apply first.
        :param contradicts: ids among ``to_judge(new)`` that a judge found contradicted by ``new``.
        :raises InvalidInput: unsafe or malformed input. :raises ModelMismatch: the embedder changed.
        """
        new = _prepared(new)
        key = _partition(new)
        exact = self.rows.live_with_hash(key, new.content)
        if exact is not None:
            return WriteResult("duplicate", self._said_again(exact, new.provenance))
        vector = self._vector(new.content)
        neighbours = self._neighbours(vector, key)
        if (
            neighbours
            and neighbours[0][1] >= DEDUP_THRESHOLD
            and _same_words(neighbours[0][0].content, new.content)
            and not distinct(neighbours[0][0].content, new.content)
        ):
            return WriteResult("duplicate", self._said_again(neighbours[0][0], new.provenance))
        updates, related, contradicted = _classify(new, neighbours, contradicts)
        with self.rows.db.transaction():
            rid, memory_id = self._insert(new, key)
            if vector is not None:
                self.rows.corpus.vectors.write(rid, key, vector)
            self.rows.link(rid, updates, related, contradicted)
            self.graph.attach(rid, new.entities)
            self.rows.corpus.index_text([rid])
        if vector is not None:
            self.rows.corpus.vectors.mirror_add([(rid, key, vector)])
        stored = self._written(memory_id)
        return WriteResult("stored", stored, _ids(updates), _ids(related), _ids(contradicted))

    def _written(self, memory_id: str) -> Memory:
        """A row just written: its tombstone lifted, the journal told."""
        stored = self.rows.get(memory_id)
        self.tombstones.lift([stored])
        if self.journal is not None:
            self.journal.stored([stored])
        return stored

    def _said_again(self, known: Memory, said: Provenance) -> Memory:
        """A duplicate's messages become sources of the fact it repeats: a targeted forget then removes the
        repeat from history too, instead of leaving it for conversation_search and the next reflection."""
        new = tuple(s for s in said.sources if s not in known.provenance.sources)
        if not new:
            return known
        self.rows.set_provenance(
            known.rid, replace(known.provenance, sources=known.provenance.sources + new)
        )
        return self.rows.get(known.id)

    def _insert(self, new: NewMemory, key: str) -> tuple[int, str]:
        memory_id = str(uuid.uuid4())
        return self.rows.insert(new, key, _visibility(new), _home_guild(new), memory_id), memory_id

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
        hits = self.rows.corpus.vectors.search(vector, (key,), 8)
        rows = self.rows.corpus.fetch(
            [rid for rid, _ in hits], (key,), self.rows.corpus.live(self.rows.clock.now())
        )
        return [(Memory.from_row(rows[rid]), sim) for rid, sim in hits if rid in rows]

    def to_judge(self, new: NewMemory) -> list[Memory]:
        """The stored facts a contradiction judge should compare ``new`` with: same subject, related, not an update."""
        new = _prepared(new)
        neighbours = self._neighbours(self._vector(new.content), _partition(new))
        return [
            old
            for old, sim in neighbours
            if RELATED_THRESHOLD < sim <= UPDATE_THRESHOLD
            and _subject_key(old.subject) == _subject_key(new.subject)
            and not distinct(old.content, new.content)
        ]

    def insert_batch(self, items: list[tuple[NewMemory, np.ndarray | None]]) -> list[str]:
        """Trusted bulk load (file ingest, benchmarks): safety filters apply, dedup and linking do not.

        :param items: each fact with its vector (None: stored for full-text search only). Returns the new ids.
        """
        ids, rids, vec_rows = [], [], []
        with self.rows.db.transaction():
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
            self.rows.corpus.vectors.write_many(vec_rows)
            self.rows.corpus.index_text(rids)
        self.rows.corpus.vectors.mirror_add(vec_rows)
        if self.journal is not None or self.tombstones.any():
            stored = self.rows.by_rids(rids)
            self.tombstones.lift(stored)
            if self.journal is not None:
                self.journal.stored(stored)
        return ids

    def insert_merged(self, new: NewMemory, originals: list[Memory]) -> Memory:
        """Consolidation's write: the merged row, its vector, the originals marked and their graph relinked."""
        new = _prepared(new)
        key = _partition(new)
        vector = self._vector(new.content)
        with self.rows.db.transaction():
            rid, memory_id = self._insert(new, key)
            if vector is not None:
                self.rows.corpus.vectors.write(rid, key, vector)
            old = [m.rid for m in originals]
            self.rows.mark_consolidated(old, memory_id)
            self.graph.relink(old, rid)
            self.rows.corpus.index_text([rid])
        if vector is not None:
            self.rows.corpus.vectors.mirror_add([(rid, key, vector)])
        return self._written(memory_id)

    def supersede(self, new_id: str, old_ids: list[str]) -> None:
        """Mark ``old_ids`` as replaced by ``new_id`` (linked ``updates``, kept for history, no longer recalled):
        for a writer that knows what replaced what, such as a re-ingested file whose passage changed."""
        new = self.rows.get(new_id)
        old = [
            m
            for m in (self.rows.get(i) for i in dict.fromkeys(old_ids))
            if m.id != new_id and m.superseded_by is None
        ]
        with self.rows.db.transaction():
            self.rows.link(new.rid, old, [], [])
        if self.journal is not None and old:
            # no new line; the snapshot drops the replaced ones
            self.journal.touched({m.partition_key for m in old})

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
        """Change a memory in place: no copy of its old words is kept (a history row would keep them).
        Each parameter left None keeps the stored value; the same safety filters as ``add`` apply.

        :raises NotFound: no such id. :raises InvalidInput: unsafe words or a bad importance.
        """
        old = self.rows.get(memory_id)
        new_kind = kind or old.kind
        if subject is None and content is not None and old.subject == old.content[:60]:
            subject = ""  # a subject made from the old words (none was given) is made again from the new ones
        subject, text = check_memory(
            subject if subject is not None else old.subject,
            content if content is not None else old.content,
            new_kind,
        )
        changed = replace(
            old,
            subject=subject,
            content=text,
            tags=normalise_tags(tags) if tags is not None else old.tags,
            importance=_importance(importance) if importance is not None else old.importance,
            kind=new_kind,
            type=memory_type or old.type,
        )
        self._rewrite(old, changed)
        return self._changed(memory_id)

    def _rewrite(self, old: Memory, changed: Memory) -> None:
        vector = self._vector(changed.content) if changed.content != old.content else None
        with self.rows.db.transaction():
            self.rows.rewrite(old, changed)
            if vector is not None:
                self.rows.corpus.vectors.write(old.rid, old.partition_key, vector)
            if changed.content != old.content:
                self.embeddings.forget_hash(content_hash(old.content))
        if vector is not None:
            self.rows.corpus.vectors.mirror_add([(old.rid, old.partition_key, vector)])

    def _changed(self, memory_id: str) -> Memory:
        updated = self.rows.get(memory_id)
        self.tombstones.lift([updated])
        if self.journal is not None:
            self.journal.changed(updated)
        return updated

    def delete(self, memory_id: str) -> list[str]:
        """Delete a memory and everything derived from it (MEM-5, SEC-3). Returns every id removed.

        Its history goes with it: the versions it superseded and the rows merged into it say the same
        thing in older words, so keeping them (or reviving one as current) would undo the forget.
        """
        return self.delete_rids(self.versions([self.rows.get(memory_id).rid]))

    def versions(self, rids: list[int]) -> list[int]:
        """These rows and, transitively, the older versions of the same facts (superseded or
        merged); a distinct fact chained to one (``memory.write.versions``) is not one of them."""
        return self.rows.lineage(rids, same=lambda older, newer: not distinct(older, newer))

    def delete_rids(self, rids: list[int]) -> list[str]:
        """Delete these rows, their vectors, graph mentions and cached embeddings; returns their
        ids. A row they superseded that is not deleted with them is current again."""
        if not rids:
            return []
        removed = self.rows.removable(rids)
        with self.rows.db.transaction():
            released = self.rows.release_superseded(rids)
            touched = self.graph.detach(rids)
            self.rows.corpus.vectors.delete(rids)
            self.rows.delete(rids)
            self.graph.cleanup(touched)
            for row in removed:
                self.embeddings.forget_hash(row.content_hash)
        self.rows.corpus.vectors.mirror_remove(rids)
        if (
            self.journal is not None
        ):  # derived files (memory.upkeep.registry.FILE_REGISTRY) lose the lines at once
            self.journal.removed([(r.id, r.partition_key, r.created_at) for r in removed])
            if released:
                self.journal.touched(released)
        return [r.id for r in removed]

    def move_person(self, source: str, target: str) -> None:
        """Linking: every memory about ``source`` becomes one about ``target``, in the matching partitions."""
        self.rows.rebind_subject(source, target)
        for part in self.rows.personal_partitions(source):
            new = memory_partition(part.scope, target, part.visibility, part.guild_id)
            self.rows.corpus.move_partition(part.partition_key, new, scope_id=target)
            if (
                self.journal is not None
            ):  # both scopes' snapshots change (the lines stay where they were written)
                self.journal.touched([part.partition_key, new])

    # -- reads that apply a write rule -----------------------------------------------------------------
    def get_visible(self, memory_id: str, ctx: RecallContext) -> Memory:
        """A memory by id, but only if the context may see it: the model cannot reach past its scope by id."""
        memory = self.rows.get(memory_id)
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

    def stats(self) -> StoreStats:
        """Rows, active rows, and the embedding space (the CLI's ``stats``)."""
        return StoreStats(
            self.rows.count(),
            self.rows.count_active(),
            self.embeddings.fingerprint,
            self.embeddings.stored_dim(),
        )


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
            (normalise_text(r)[:60], normalise_text(t)[:120])
            for r, t in ref.relations
            if normalise_text(t) and not _unsafe(f"{r} {t}")
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
    return (
        Visibility.PRIVATE
        if new.scope.value == "owner"
        else (Visibility.PUBLIC if new.scope.value == "guild" else new.visibility)
    )


def _classify(
    new: NewMemory, neighbours: list[tuple[Memory, float]], contradicts: frozenset[str]
) -> tuple[list[Memory], list[Memory], list[Memory]]:
    """Split the neighbours into the facts ``new`` updates, is related to, and (as judged)
    contradicts; a distinct fact is only ever related."""
    updates: list[Memory] = []
    related: list[Memory] = []
    contradicted: list[Memory] = []
    for old, sim in neighbours:
        same_subject = _subject_key(old.subject) == _subject_key(new.subject)
        same_subject = same_subject and not distinct(old.content, new.content)
        if sim > UPDATE_THRESHOLD and same_subject:
            updates.append(old)
        elif sim > RELATED_THRESHOLD:
            (contradicted if same_subject and old.id in contradicts else related).append(old)
    return updates, related, contradicted


def _ids(memories: list[Memory]) -> tuple[str, ...]:
    return tuple(m.id for m in memories)


def _subject_key(subject: str) -> str:
    return " ".join(re.findall(r"\w+", subject.lower()))


def _same_words(a: str, b: str) -> bool:
    """Near-identical wording: a changed number or name makes the new fact an update, not a duplicate."""
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.8

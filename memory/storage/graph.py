"""The entity graph (GRAPH-1/2): entities, mentions and directed relations with a memory back-reference.

A relation's strength is the number of memories that asserted it, so forgetting a memory weakens or
removes exactly what it added, and an entity that nothing mentions any more disappears with it (SEC-3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..clock import DAY, Clock
from ..models import Entity, EntityRef
from ..scopes import placeholders
from .corpus import Filter, live_memories
from .db import Database

ENTITY_TYPES = ("person", "project", "technology", "place", "organization", "concept")


def entity_key(name: str) -> str:
    return " ".join(name.lower().split())


@dataclass(frozen=True, slots=True)
class EntityCount:
    """An entity and how many memories the asking context may see mention it."""

    name: str
    entity_type: str
    mentions: int


class Graph:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def attach(self, memory_rid: int, entities: tuple[EntityRef, ...]) -> None:
        """Record mentions and relations a memory asserts (inside the caller's transaction)."""
        for ref in entities:
            source = self._upsert(ref.name, ref.type)
            self.db.execute(
                "INSERT OR IGNORE INTO memory_entity_mentions (memory_rid, entity_id) VALUES (?, ?)",
                (memory_rid, source),
            )
            for relation, target_name in ref.relations:
                target = self._upsert(target_name, "concept", count=False)
                self._assert(source, relation, target, memory_rid)
        self._recount(self._entities_of(memory_rid))

    def detach(self, memory_rids: list[int]) -> list[int]:
        """Before a memory row goes: drop its mentions and relation sources, return the entity ids it touched."""
        if not memory_rids:
            return []
        marks = placeholders(memory_rids)
        touched = [
            r
            for (r,) in self.db.execute(
                f"SELECT entity_id FROM memory_entity_mentions WHERE memory_rid IN ({marks}) "
                "UNION SELECT source_id FROM memory_relations r JOIN memory_relation_sources s ON s.relation_id = r.id WHERE "
                f"s.memory_rid IN ({marks}) "
                "UNION SELECT target_id FROM memory_relations r JOIN memory_relation_sources s ON s.relation_id = r.id WHERE "
                f"s.memory_rid IN ({marks})",
                (*memory_rids, *memory_rids, *memory_rids),
            )
        ]
        self.db.execute(
            f"DELETE FROM memory_entity_mentions WHERE memory_rid IN ({marks})", memory_rids
        )
        self.db.execute(
            f"DELETE FROM memory_relation_sources WHERE memory_rid IN ({marks})", memory_rids
        )
        return touched

    def cleanup(self, entity_ids: list[int]) -> None:
        """Re-count strengths and mentions; drop relations nobody asserts and entities nothing refers to."""
        if not entity_ids:
            return
        marks = placeholders(entity_ids)
        touched = f"(source_id IN ({marks}) OR target_id IN ({marks}))"
        self.db.execute(
            f"DELETE FROM memory_relations WHERE {touched} AND id NOT IN (SELECT relation_id FROM memory_relation_sources)",
            (*entity_ids, *entity_ids),
        )
        self.db.execute(
            "UPDATE memory_relations SET strength = (SELECT COUNT(*) FROM memory_relation_sources s WHERE s.relation_id = "
            f"memory_relations.id) WHERE {touched}",
            (*entity_ids, *entity_ids),
        )
        self._recount(entity_ids)
        if entity_ids:
            self.db.execute(
                f"DELETE FROM memory_entities WHERE id IN ({placeholders(entity_ids)}) AND mention_count = 0 "
                "AND id NOT IN (SELECT source_id FROM memory_relations UNION SELECT target_id FROM memory_relations)",
                entity_ids,
            )

    def relink(self, from_rids: list[int], to_rid: int) -> None:
        """Consolidation: mentions and relation sources of the originals move to the merged row."""
        marks = placeholders(from_rids)
        self.db.execute(
            "INSERT OR IGNORE INTO memory_entity_mentions (memory_rid, entity_id) SELECT ?, entity_id FROM "
            f"memory_entity_mentions WHERE memory_rid IN ({marks})",
            (to_rid, *from_rids),
        )
        self.db.execute(
            "INSERT OR IGNORE INTO memory_relation_sources (relation_id, memory_rid) SELECT relation_id, ? FROM "
            f"memory_relation_sources WHERE memory_rid IN ({marks})",
            (to_rid, *from_rids),
        )
        self.cleanup(self._entities_of(to_rid))

    # -- reads -------------------------------------------------------------------------------------
    def top_entities(self, partitions: tuple[str, ...], n: int = 5) -> list[EntityCount]:
        """Most-mentioned entities among the memories a context may see (GRAPH-2).

        :param partitions: what the context may see. :param n: how many, most mentioned first."""
        if not partitions:
            return []
        sql = (
            "SELECT e.name, e.entity_type, COUNT(*) AS mentions FROM memory_entity_mentions x "
            "JOIN memory_entities e ON e.id = x.entity_id JOIN memories m ON m.rid = x.memory_rid "
            f"WHERE m.partition_key IN ({placeholders(partitions)}) AND {self._live().sql} "
            "GROUP BY e.id ORDER BY mentions DESC, e.last_seen DESC LIMIT ?"
        )
        rows = self.db.rows(sql, (*partitions, *self._live().params, n))
        return [EntityCount(r["name"], r["entity_type"], r["mentions"]) for r in rows]

    def entities(self, limit: int) -> list[Entity]:
        """The most-mentioned entities of the whole store (the operator's view)."""
        rows = self.db.rows(
            "SELECT id, name, entity_type, mention_count FROM memory_entities ORDER BY mention_count DESC, name LIMIT ?",
            (limit,),
        )
        return [
            Entity(int(r["id"]), r["name"], r["entity_type"], int(r["mention_count"])) for r in rows
        ]

    def people_mentioning(self, entity_ids: list[int]) -> list[dict[str, Any]]:
        """(person, entity_id) pairs: whose live personal memories mention these entities."""
        live = self._live()
        return self.db.rows(
            "SELECT DISTINCT m.scope_id AS person, x.entity_id FROM memory_entity_mentions x JOIN memories m ON m.rid = x.memory_rid "
            f"WHERE m.scope IN ('user', 'owner') AND x.entity_id IN ({placeholders(entity_ids)}) AND {live.sql} ORDER BY 1, 2",
            (*entity_ids, *live.params),
        )

    def relations_among(self, entity_ids: list[int]) -> list[dict[str, Any]]:
        marks = placeholders(entity_ids)
        return self.db.rows(
            f"SELECT source_id, target_id, relation FROM memory_relations WHERE source_id IN ({marks}) AND target_id IN ({marks}) "
            "ORDER BY strength DESC, id",
            (*entity_ids, *entity_ids),
        )

    def traverse(self, name: str, depth: int, partitions: tuple[str, ...]) -> dict[str, Any]:
        """Breadth-first walk over relations asserted by memories the context may see."""
        start = self.db.one(
            "SELECT id, name, entity_type FROM memory_entities WHERE name_key = ?",
            (entity_key(name),),
        )
        if start is None or not self._visible_entity(start["id"], partitions):
            return {"entity": name, "found": False, "edges": []}
        seen, frontier = {start["id"]}, [start["id"]]
        edges: list[dict[str, Any]] = []
        for _ in range(max(1, min(depth, 5))):
            found = self._edges(frontier, partitions)
            edges.extend(
                e
                for e in found
                if (e["source"], e["relation"], e["target"])
                not in {(x["source"], x["relation"], x["target"]) for x in edges}
            )
            frontier = [i for e in found for i in (e["source_id"], e["target_id"]) if i not in seen]
            seen.update(frontier)
            if not frontier:
                break
        for e in edges:
            e.pop("source_id"), e.pop("target_id")
        return {
            "entity": start["name"],
            "type": start["entity_type"],
            "found": True,
            "edges": edges,
        }

    def _edges(self, ids: list[int], partitions: tuple[str, ...]) -> list[dict[str, Any]]:
        marks, parts = placeholders(ids), placeholders(partitions)
        sql = (
            "SELECT DISTINCT r.source_id, r.target_id, a.name AS source, r.relation, b.name AS target, r.strength "
            "FROM memory_relations r JOIN memory_entities a ON a.id = r.source_id JOIN memory_entities b ON b.id = r.target_id "
            "JOIN memory_relation_sources s ON s.relation_id = r.id JOIN memories m ON m.rid = s.memory_rid "
            f"WHERE (r.source_id IN ({marks}) OR r.target_id IN ({marks})) AND m.partition_key IN ({parts}) AND {self._live().sql}"
        )
        return self.db.rows(sql, (*ids, *ids, *partitions, *self._live().params))

    def _visible_entity(self, entity_id: int, partitions: tuple[str, ...]) -> bool:
        sql = (
            f"SELECT 1 FROM memories m WHERE m.partition_key IN ({placeholders(partitions)}) AND {self._live().sql} AND (m.rid IN "
            "(SELECT memory_rid FROM memory_entity_mentions WHERE entity_id = ?) OR m.rid IN (SELECT s.memory_rid FROM "
            "memory_relation_sources s JOIN memory_relations r ON r.id = s.relation_id WHERE r.source_id = ? OR r.target_id = ?)) LIMIT 1"
        )
        return bool(
            self.db.scalar(
                sql, (*partitions, *self._live().params, entity_id, entity_id, entity_id)
            )
        )

    def _live(self) -> Filter:
        return live_memories("m", self.clock.now())

    # -- maintenance (MAINT-3) -------------------------------------------------------------------------
    def prune(self, unseen_days: float = 90.0) -> int:
        cutoff = self.clock.now() - unseen_days * DAY
        stale = [
            r
            for (r,) in self.db.execute(
                "SELECT id FROM memory_entities WHERE mention_count <= 1 AND last_seen < ?",
                (cutoff,),
            )
        ]
        if stale:
            self.db.execute(
                f"DELETE FROM memory_entities WHERE id IN ({placeholders(stale)})", stale
            )
        return len(stale)

    # -- internals -------------------------------------------------------------------------------------
    def _upsert(self, name: str, entity_type: str, *, count: bool = True) -> int:
        now = self.clock.now()
        etype = entity_type if entity_type in ENTITY_TYPES else "concept"
        key = entity_key(name)
        row = self.db.one("SELECT id, entity_type FROM memory_entities WHERE name_key = ?", (key,))
        if row is None:
            self.db.execute(
                "INSERT INTO memory_entities (name, name_key, entity_type, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)",
                (" ".join(name.split()), key, etype, now, now),
            )
            return int(self.db.con.last_insert_rowid())
        if count or row["entity_type"] == "concept":
            new_type = etype if row["entity_type"] == "concept" else row["entity_type"]
            self.db.execute(
                "UPDATE memory_entities SET last_seen = ?, entity_type = ? WHERE id = ?",
                (now, new_type, row["id"]),
            )
        return row["id"]

    def _assert(self, source: int, relation: str, target: int, memory_rid: int) -> None:
        now = self.clock.now()
        label = "_".join(relation.lower().split())[:60] or "related_to"
        self.db.execute(
            "INSERT INTO memory_relations (source_id, relation, target_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (source_id, relation, target_id) DO UPDATE SET updated_at = excluded.updated_at",
            (source, label, target, now, now),
        )
        rel = self.db.scalar(
            "SELECT id FROM memory_relations WHERE source_id = ? AND relation = ? AND target_id = ?",
            (source, label, target),
        )
        self.db.execute(
            "INSERT OR IGNORE INTO memory_relation_sources (relation_id, memory_rid) VALUES (?, ?)",
            (rel, memory_rid),
        )
        self.db.execute(
            "UPDATE memory_relations SET strength = (SELECT COUNT(*) FROM memory_relation_sources WHERE relation_id = ?) WHERE id = ?",
            (rel, rel),
        )

    def _entities_of(self, memory_rid: int) -> list[int]:
        return [
            r
            for (r,) in self.db.execute(
                "SELECT entity_id FROM memory_entity_mentions WHERE memory_rid = ?", (memory_rid,)
            )
        ]

    def _recount(self, entity_ids: list[int]) -> None:
        if entity_ids:
            self.db.execute(
                "UPDATE memory_entities SET mention_count = (SELECT COUNT(*) FROM memory_entity_mentions x WHERE x.entity_id = "
                "memory_entities.id) "
                f"WHERE id IN ({placeholders(entity_ids)})",
                entity_ids,
            )

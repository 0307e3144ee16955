"""The operator's read-only views of the whole store (the dashboard, DASH-1): pages of memories with
filters and a total, people with their accounts, guilds, entities, the graph, the reflections audit.

Reads only. Every write the dashboard makes goes through the owners (``MemoryStore``, ``memory.forgetting``,
``KnobStore``, ``memory.audit``). The operator sees every partition, owner scope included: that is what
the dashboard is for, and it is the only place owner memory is listed outside an owner DM (DASH-3).
Filters are values bound as parameters; user text never becomes SQL or FTS syntax (the text filter is
a plain substring match).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .corpus import Filter, live_memories
from .engine import MemoryEngine
from .models import FactKind, Memory, MemoryType, Scope
from .scopes import placeholders

MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    scope: Scope | None = None
    person: str | None = None  # scope_id of a user or owner memory
    guild: str | None = None  # guild lore, and what people said in that guild
    type: MemoryType | None = None
    kind: FactKind | None = None
    tags: tuple[str, ...] = ()  # all must match
    text: str = ""  # substring of content or subject, case-insensitive
    limit: int = 50
    offset: int = 0

    def where(self, now: float) -> Filter:
        where = live_memories("t", now)
        for column, value in (("scope", self.scope), ("type", self.type), ("kind", self.kind)):
            if value is not None:
                where = where & Filter(f"t.{column} = ?", (value.value,))
        if self.person:
            where = where & Filter("t.scope IN ('user', 'owner') AND t.scope_id = ?", (self.person,))
        if self.guild:
            where = where & Filter("(t.scope = 'guild' AND t.scope_id = ?) OR t.guild_id = ?", (self.guild, self.guild))
        for tag in self.tags:
            where = where & Filter("EXISTS (SELECT 1 FROM memory_tags g WHERE g.memory_rid = t.rid AND g.tag = ?)", (tag,))
        if self.text:
            where = where & Filter("instr(lower(t.content), lower(?)) > 0 OR instr(lower(t.subject), lower(?)) > 0", (self.text, self.text))
        return where


@dataclass(frozen=True, slots=True)
class Account:
    platform: str
    user_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Person:
    id: str
    names: tuple[str, ...]
    accounts: tuple[Account, ...]
    memories: int


@dataclass(frozen=True, slots=True)
class Guild:
    id: str
    name: str | None  # the store keeps no guild names; the page then shows (and confirms with) the id
    memories: int
    messages: int


@dataclass(frozen=True, slots=True)
class Entity:
    id: int
    name: str
    kind: str
    mentions: int


@dataclass(frozen=True, slots=True)
class GraphView:
    people: tuple[tuple[str, str], ...]  # (person id, label)
    entities: tuple[Entity, ...]
    edges: tuple[tuple[str, str, str], ...]  # (source node, target node, label); node ids "person:<id>", "entity:<id>"


@dataclass(frozen=True, slots=True)
class Reflection:
    id: int
    kind: str
    started_at: float
    finished_at: float | None
    channel_key: str | None
    status: str
    facts: list[Any] = field(default_factory=list)
    stored_ids: list[str] = field(default_factory=list)
    people: list[str] = field(default_factory=list)
    error: str | None = None


class Overview:
    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.db = engine.db

    def memories(self, query: MemoryQuery) -> tuple[list[Memory], int]:
        """One page, newest change first, and how many match in all."""
        where = query.where(self.engine.clock.now())
        total = int(self.db.scalar(f"SELECT COUNT(*) FROM memories AS t WHERE {where.sql}", where.params))
        rows = self.db.rows(
            f"SELECT * FROM memories AS t WHERE {where.sql} ORDER BY t.updated_at DESC, t.rid DESC LIMIT ? OFFSET ?",
            (*where.params, max(1, min(query.limit, MAX_PAGE)), max(0, query.offset)),
        )
        return [Memory.from_row(r) for r in rows], total

    def person_ids(self) -> list[str]:
        """Everyone the store knows: accounts seen, and subjects of user or owner memories (a CLI-added "alice")."""
        return [
            p
            for (p,) in self.db.execute(
                "SELECT person_id FROM identities UNION SELECT scope_id FROM memories WHERE scope IN ('user', 'owner') ORDER BY 1"
            )
        ]

    def person(self, person_id: str) -> Person | None:
        rows = self.db.rows(
            "SELECT platform, platform_user_id, display_name FROM identities WHERE person_id = ? ORDER BY 1, 2", (person_id,)
        )
        live = live_memories("t", self.engine.clock.now())
        count = int(
            self.db.scalar(
                f"SELECT COUNT(*) FROM memories t WHERE t.scope IN ('user', 'owner') AND t.scope_id = ? AND {live.sql}",
                (person_id, *live.params),
            )
        )
        if not rows and not count:
            return None
        accounts = tuple(Account(r["platform"], r["platform_user_id"], r["display_name"]) for r in rows)
        names = tuple(dict.fromkeys(a.name for a in accounts if a.name))
        return Person(person_id, names, accounts, count)

    def known_account(self, platform: str, user_id: str) -> bool:
        return bool(self.db.scalar("SELECT 1 FROM identities WHERE platform = ? AND platform_user_id = ?", (platform, user_id)))

    def people(self) -> list[Person]:
        return [p for p in (self.person(i) for i in self.person_ids()) if p is not None]

    def guilds(self) -> list[Guild]:
        live = live_memories("t", self.engine.clock.now())
        rows = self.db.rows(
            "WITH g(id) AS (SELECT scope_id FROM memories WHERE scope = 'guild' UNION SELECT guild_id FROM memories WHERE guild_id "
            "IS NOT NULL UNION SELECT guild_id FROM messages WHERE guild_id IS NOT NULL) SELECT g.id, "
            f"(SELECT COUNT(*) FROM memories t WHERE ((t.scope = 'guild' AND t.scope_id = g.id) OR t.guild_id = g.id) AND {live.sql}) "
            "AS memories, (SELECT COUNT(*) FROM messages m WHERE m.guild_id = g.id) AS messages FROM g ORDER BY g.id",
            live.params,
        )
        return [Guild(r["id"], None, r["memories"], r["messages"]) for r in rows]

    def entities(self, limit: int = 200) -> list[Entity]:
        rows = self.db.rows(
            "SELECT id, name, entity_type, mention_count FROM memory_entities ORDER BY mention_count DESC, name LIMIT ?",
            (max(1, min(limit, 5000)),),
        )
        return [Entity(r["id"], r["name"], r["entity_type"], r["mention_count"]) for r in rows]

    def graph(self, limit: int = 300) -> GraphView:
        """People and the entities their live memories mention, and the relations between entities."""
        entities = self.entities(limit)
        ids = [e.id for e in entities]
        if not ids:
            return GraphView((), (), ())
        live = live_memories("m", self.engine.clock.now())
        marks = placeholders(ids)
        mentions = self.db.rows(
            "SELECT DISTINCT m.scope_id AS person, x.entity_id FROM memory_entity_mentions x JOIN memories m ON m.rid = x.memory_rid "
            f"WHERE m.scope IN ('user', 'owner') AND x.entity_id IN ({marks}) AND {live.sql} ORDER BY 1, 2",
            (*ids, *live.params),
        )
        relations = self.db.rows(
            f"SELECT source_id, target_id, relation FROM memory_relations WHERE source_id IN ({marks}) AND target_id IN ({marks}) "
            "ORDER BY strength DESC, id",
            (*ids, *ids),
        )
        people = tuple(dict.fromkeys(r["person"] for r in mentions))
        labels = tuple((p, self._label(p)) for p in people)
        edges = [(f"person:{r['person']}", f"entity:{r['entity_id']}", "mentions") for r in mentions]
        edges += [(f"entity:{r['source_id']}", f"entity:{r['target_id']}", r["relation"]) for r in relations]
        return GraphView(labels, tuple(entities), tuple(edges))

    def _label(self, person_id: str) -> str:
        return self.db.scalar("SELECT display_name FROM identities WHERE person_id = ? AND display_name != '' LIMIT 1", (person_id,)) or (
            person_id
        )

    def reflections(self, limit: int = 50) -> list[Reflection]:
        rows = self.db.rows("SELECT * FROM reflections ORDER BY started_at DESC, id DESC LIMIT ?", (max(1, min(limit, 1000)),))
        return [
            Reflection(
                r["id"],
                r["kind"],
                r["started_at"],
                r["finished_at"],
                r["channel_key"],
                r["status"],
                _json_list(r["facts"]),
                _json_list(r["stored_ids"]),
                _json_list(r["people"]),
                r["error"],
            )
            for r in rows
        ]


def _json_list(text: str | None) -> list[Any]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return value if isinstance(value, list) else []

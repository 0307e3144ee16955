"""The operator's read-only views of the whole store (the dashboard, DASH-1): pages of memories with
filters and a total, people with their accounts, guilds, entities, the graph, the reflections audit.

Reads only, each through the owner of its table (``MemoryRepository``, ``MessageLog``, ``People``, ``Graph``,
``ReflectionAudits``). Every write the dashboard makes goes through the owners
(``MemoryStore``, ``memory.upkeep.forgetting``, ``KnobStore``, ``memory.storage.audit``). The operator sees every
partition, owner scope included: that is what the dashboard is for, and it is the only place owner memory
is listed outside an owner DM (DASH-3). A listing is a ``MemoryQuery`` value the repository turns into
SQL; user text never becomes SQL or FTS syntax (the text filter is a plain substring match).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..engine import MemoryEngine
from ..models import Entity, Memory
from ..storage.graph import entity_key
from ..storage.memories import MemoryQuery

MAX_PAGE = 500


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
    # the store keeps no guild names; the page then shows (and confirms with) the id
    name: str | None
    memories: int
    messages: int


@dataclass(frozen=True, slots=True)
class GraphView:
    people: tuple[tuple[str, str], ...]  # (person id, label)
    entities: tuple[Entity, ...]
    # (source node, target node, label); node ids "person:<id>", "entity:<id>"
    edges: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class ReflectionRun:
    """One reflection as the dashboard lists it: when, where, its outcome and the facts it filed."""

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
        self.people_ = engine.people

    def memories(self, query: MemoryQuery) -> tuple[list[Memory], int]:
        """One page, newest change first, and how many match in all."""
        return self.engine.memory_rows.page(
            query, max(1, min(query.limit, MAX_PAGE)), max(0, query.offset)
        )

    def person_ids(self) -> list[str]:
        """Everyone the store knows: accounts seen, and subjects of user or owner memories (a CLI-added "alice")."""
        return sorted(
            set(self.people_.person_ids()) | set(self.engine.memory_rows.personal_scope_ids())
        )

    def person(self, person_id: str) -> Person | None:
        rows = sorted(
            self.people_.accounts(person_id), key=lambda r: (r["platform"], r["platform_user_id"])
        )
        count = self.engine.memory_rows.count_personal(person_id)
        if not rows and not count:
            return None
        accounts = tuple(
            Account(r["platform"], r["platform_user_id"], r["display_name"]) for r in rows
        )
        names = tuple(dict.fromkeys(a.name for a in accounts if a.name))
        return Person(person_id, names, accounts, count)

    def known_account(self, platform: str, user_id: str) -> bool:
        return self.people_.known_account(platform, user_id)

    def people(self) -> list[Person]:
        return [p for p in (self.person(i) for i in self.person_ids()) if p is not None]

    def guilds(self) -> list[Guild]:
        memories, messages = (
            self.engine.memory_rows.guild_counts(),
            self.engine.messages.guild_counts(),
        )
        return [
            Guild(g, None, memories.get(g, 0), messages.get(g, 0))
            for g in sorted(memories.keys() | messages.keys())
        ]

    def entities(self, limit: int = 200) -> list[Entity]:
        return self.engine.graph.entities(max(1, min(limit, 5000)))

    def graph(self, limit: int = 300) -> GraphView:
        """People and the entities their live memories mention, and the relations between entities.

        Everyone ``people`` lists is a node, mentioning anything or not (issue 45: the Graph
        said "No people" while People listed one); those naming an entity first, to ``limit``."""
        entities = self.entities(limit)
        ids = [e.id for e in entities]
        mentions = self.engine.graph.people_mentioning(ids) if ids else []
        relations = self.engine.graph.relations_among(ids) if ids else []
        mentioning = list(dict.fromkeys(r["person"] for r in mentions))
        others = [p.id for p in self.people() if p.id not in mentioning]
        people = (*mentioning, *others[: max(0, limit - len(mentioning))])
        labels = tuple((p, self.people_.name(p)) for p in people)
        # The entity that names a person (an "Alice" entity beside the person Alice) is drawn as that person.
        by_name = {entity_key(label): f"person:{p}" for p, label in labels}
        node = {e.id: by_name.get(entity_key(e.name), f"entity:{e.id}") for e in entities}
        edges = [(f"person:{r['person']}", node[r["entity_id"]], "mentions") for r in mentions]
        edges += [(node[r["source_id"]], node[r["target_id"]], r["relation"]) for r in relations]
        kept = tuple(e for e in entities if node[e.id].startswith("entity:"))
        # a named relation says more
        related = {frozenset((a, b)) for a, b, label in edges if label != "mentions"}
        edges = [
            (a, b, label)
            for a, b, label in edges
            if a != b and (label != "mentions" or frozenset((a, b)) not in related)
        ]
        return GraphView(labels, kept, tuple(dict.fromkeys(edges)))

    def reflections(self, limit: int = 50) -> list[ReflectionRun]:
        rows = self.engine.reflections.newest(max(1, min(limit, 1000)))
        return [
            ReflectionRun(
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

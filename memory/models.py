"""Value types at the package edge: frozen, slotted, plain data."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

# Data that is JSON by nature and stays a dict: a tool's arguments from the model and what it answers, an export
# file, an API payload, a schema. Named, so that a store row never travels as one (tests/test_architecture.py).
JsonObject: TypeAlias = dict[str, Any]

Progress: TypeAlias = Callable[[int, int], None]  # (done so far, in all): a long step's progress


class MemoryType(StrEnum):
    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"


class FactKind(StrEnum):
    PROFILE = "profile"
    RELATIONSHIP = "relationship"
    PREFERENCE = "preference"
    PROJECT = "project"
    GUIDANCE = "guidance"
    BEHAVIORAL = "behavioral"
    EVENT = "event"
    GOAL = "goal"
    TODO = "todo"
    OTHER = "other"


class Source(StrEnum):
    USER_STATED = "user-stated"
    INFERRED = "inferred"
    OBSERVED = "observed"
    AUTO_EXTRACTION = "auto-extraction"
    CONSOLIDATION = "consolidation"
    INGEST = "ingest"
    REFLECTION = "reflection"


class Scope(StrEnum):
    USER = "user"
    GUILD = "guild"
    OWNER = "owner"


class Visibility(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"


# MEM-3: legacy type strings map onto the three canonical types (and suggest a fact kind).
LEGACY_TYPES: dict[str, tuple[MemoryType, FactKind | None]] = {
    "fact": (MemoryType.SEMANTIC, None),
    "conversation": (MemoryType.EPISODIC, FactKind.EVENT),
    "analysis": (MemoryType.SEMANTIC, None),
    "research": (MemoryType.SEMANTIC, None),
    "preference": (MemoryType.SEMANTIC, FactKind.PREFERENCE),
    "decision": (MemoryType.SEMANTIC, FactKind.PROJECT),
    "identity": (MemoryType.SEMANTIC, FactKind.PROFILE),
    "event": (MemoryType.EPISODIC, FactKind.EVENT),
    "observation": (MemoryType.EPISODIC, None),
    "goal": (MemoryType.SEMANTIC, FactKind.GOAL),
    "todo": (MemoryType.PROCEDURAL, FactKind.TODO),
}

# ORCH-2/ORCH-7: the subject of the bot's facts about itself ("my favourite season is autumn"), filed in the
# place where it said them (``memory.scopes.self_scope``) and shown there as "What you know about yourself".
SELF_SUBJECT = "__self__"

# Where people talk to the bot; an account id is "platform:id" ("telegram:123", "console:local-user").
PLATFORMS = ("discord", "telegram", "console")

# Kinds that never fade (RET-3, MAINT-2): standing guidance, behaviour rules and identity.
DECAY_EXEMPT_KINDS = frozenset({FactKind.GUIDANCE, FactKind.BEHAVIORAL, FactKind.PROFILE})
# as stored in memories.kind
DECAY_EXEMPT_VALUES = tuple(sorted(k.value for k in DECAY_EXEMPT_KINDS))


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a memory came from. ``message_ids`` are the platform's ids (unique only within a chat, and the
    console's restart each session); ``sources`` are the stored messages' own ids, which forgetting uses."""

    platform: str | None = None
    guild_id: str | None = None
    channel_id: str | None = None
    message_ids: tuple[str, ...] = ()
    file: str | None = None
    line: int | None = None
    sources: tuple[str, ...] = ()
    # SEC-7: when retention deleted the source messages (their ids stay: forgetting still follows them, finding none)
    expired_at: float | None = None

    def to_json(self) -> str:
        data = {k: v for k, v in self.as_dict().items() if v not in (None, (), [])}
        return json.dumps(data, sort_keys=True)

    def as_dict(self) -> JsonObject:
        return {
            "platform": self.platform,
            "guild_id": self.guild_id,
            "channel_id": self.channel_id,
            "message_ids": list(self.message_ids),
            "file": self.file,
            "line": self.line,
            "sources": list(self.sources),
            "expired_at": self.expired_at,
        }

    @classmethod
    def from_json(cls, text: str | None) -> Provenance:
        return cls.from_dict(json.loads(text or "{}"))

    @classmethod
    def from_dict(cls, data: JsonObject) -> Provenance:
        known = {k: v for k, v in data.items() if k in cls.__slots__}
        for name in ("message_ids", "sources"):
            known[name] = tuple(str(v) for v in known.get(name) or ())
        return cls(**known)


@dataclass(frozen=True, slots=True)
class EntityRef:
    name: str
    type: str = "concept"
    relations: tuple[tuple[str, str], ...] = ()  # (relation, target name)


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity of the graph as the operator sees it: how many memories mention it."""

    id: int
    name: str
    kind: str
    mentions: int


@dataclass(frozen=True, slots=True)
class WrittenBy:
    """What a write path knew of who said a fact, for deciding whom it is about (SEC-5,
    ``memory.write.subjects``): the accounts the speaker @mentioned or replied to in the lines it came
    from (person ids), and whether the speaker was an admin or the owner (their facts about others are
    never vetoable by those others)."""

    pointed: tuple[str, ...] = ()
    trusted: bool = False


@dataclass(frozen=True, slots=True)
class NewMemory:
    """What a write path hands to ``MemoryStore.add``."""

    content: str
    subject: str
    scope: Scope
    scope_id: str
    type: MemoryType = MemoryType.SEMANTIC
    kind: FactKind = FactKind.OTHER
    visibility: Visibility = Visibility.PUBLIC
    tags: tuple[str, ...] = ()
    source: Source = Source.USER_STATED
    importance: float = 5.0
    ttl: float | None = None
    valid_from: float | None = None
    valid_to: float | None = None
    provenance: Provenance = field(default_factory=Provenance)
    entities: tuple[EntityRef, ...] = ()
    guild_id: str | None = (
        None  # a public user fact said in a server belongs to that server (SEC-1)
    )
    # SEC-5: the person the fact is about, by identity (``memory.write.subjects`` decides it from
    # ``written_by`` when the fact is written); None: nobody in particular, or nobody it could be tied to
    subject_person_id: str | None = None
    written_by: WrittenBy | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    rid: int
    id: str
    type: MemoryType
    kind: FactKind
    subject: str
    content: str
    tags: tuple[str, ...]
    source: str
    importance: float
    scope: Scope
    scope_id: str
    visibility: Visibility
    ttl: float | None
    access_count: int
    last_accessed_at: float | None
    consolidated_into: str | None
    superseded_by: str | None
    forgotten: bool
    valid_from: float | None
    valid_to: float | None
    provenance: Provenance
    created_at: float
    updated_at: float
    partition_key: str = ""
    guild_id: str | None = None
    subject_person_id: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Memory:
        return cls(
            rid=row["rid"],
            id=row["id"],
            type=MemoryType(row["type"]),
            kind=FactKind(row["kind"]),
            subject=row["subject"],
            content=row["content"],
            tags=split_tags(row["tags"]),
            source=row["source"],
            importance=row["importance"],
            scope=Scope(row["scope"]),
            scope_id=row["scope_id"],
            visibility=Visibility(row["visibility"]),
            ttl=row["ttl"],
            access_count=row["access_count"],
            last_accessed_at=row["last_accessed_at"],
            consolidated_into=row["consolidated_into"],
            superseded_by=row["superseded_by"],
            forgotten=bool(row["forgotten"]),
            valid_from=row["valid_from"],
            valid_to=row["valid_to"],
            provenance=Provenance.from_json(row["provenance"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            partition_key=row.get("partition_key") or "",
            guild_id=row.get("guild_id"),
            subject_person_id=row.get("subject_person_id"),
        )

    def as_dict(self) -> JsonObject:
        data = {
            name: getattr(self, name)
            for name in self.__slots__
            if name not in ("rid", "partition_key")
        }
        data["tags"] = list(self.tags)
        data["provenance"] = self.provenance.as_dict()
        return data


@dataclass(frozen=True, slots=True)
class StoredMessage:
    rid: int
    id: str
    platform: str
    guild_id: str | None
    channel_id: str
    author_id: str
    author_name: str
    role: str
    modality: str
    content: str
    created_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StoredMessage:
        return cls(**{name: row[name] for name in cls.__slots__})

    def as_dict(self) -> JsonObject:
        return {name: getattr(self, name) for name in self.__slots__ if name != "rid"}


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """An ended session's summary (CROSS-1): shown to later replies in the same place for a while."""

    id: int
    platform: str
    guild_id: str | None
    channel_id: str
    modality: str
    participants: tuple[str, ...]
    text: str
    started_at: float | None
    ended_at: float
    expires_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SessionSummary:
        return cls(
            **{
                **{name: row[name] for name in cls.__slots__},
                "participants": tuple(json.loads(row["participants"])),
            }
        )


@dataclass(frozen=True, slots=True)
class Arrival:
    """What the store did with an arriving message (``memory.turns.Turns.arrive``)."""

    stored_id: str | None = None  # the stored message (write-ahead), once stored
    buffer_id: int | None = (
        None  # its extraction-buffer row, held until the reply is done; None: not stored now
    )
    remembered: bool = True  # False after /privacy off (the speaker's or the place's): nothing of the turn kept (SEC-5)
    answered: bool = (
        False  # a re-delivered message the bot already answered: stored once, answered once
    )


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """What an edit or a delete at the source did: messages removed, memories withdrawn, memories that only
    lost a source."""

    messages: int = 0
    memories: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Erased:
    """What forgetting a memory removed: the memory ids (its lineage), their texts (for the reply that confirms
    it) and the number of messages (its sources)."""

    memories: tuple[str, ...] = ()
    contents: tuple[str, ...] = ()
    messages: int = 0


MAX_MESSAGE_CHARS = (
    8_000  # what is stored of one message and shown to the model; longer ones are cut (marked)
)
CUT_MARK = " […cut]"


def bounded(text: str) -> str:
    """At most ``MAX_MESSAGE_CHARS``, the cut marked: what history keeps, and so what a reply may send."""
    return (
        text
        if len(text) <= MAX_MESSAGE_CHARS
        else text[: MAX_MESSAGE_CHARS - len(CUT_MARK)] + CUT_MARK
    )


def split_tags(text: str) -> tuple[str, ...]:
    return tuple(t for t in (p.strip() for p in (text or "").split(",")) if t)


def normalise_tags(tags: Any) -> tuple[str, ...]:
    """Lower-case, trimmed, unique, order kept; accepts a list or a comma-separated string."""
    items = split_tags(tags) if isinstance(tags, str) else tuple(tags or ())
    seen: dict[str, None] = {}
    for tag in items:
        clean = " ".join(str(tag).lower().replace(",", " ").split())[:40]
        if clean:
            seen.setdefault(clean, None)
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class Reaction:
    """ORCH-12: ``user_id`` added ``emoji`` to the message ``post_id`` (platform ids; the adapter
    leaves out the bot's own reactions)."""

    platform: str
    channel_id: str
    post_id: str
    user_id: str
    emoji: str
    guild_id: str | None = None
    by_admin: bool = (
        False  # they may change this place's lore (Discord manage_guild, Telegram admin)
    )

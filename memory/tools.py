"""The nine memory tools the model can call (TOOLS-1/2), and reminder_set (ORCH-13), bound to one conversation's scope.

Each tool is a typed function: a pydantic model is its argument schema (names as in ScalyClaw's
tools), its docstring is the description. ``MemoryTools.call`` validates raw JSON from the model and
turns every failure into an ``Error: ...`` string with a hint, so a malformed call can neither raise
past the tool loop nor leave a half-written row (every write is one transaction).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .clock import DAY, Clock
from .engine import MemoryEngine
from .errors import MemoryStoreError
from .models import (
    LEGACY_TYPES,
    EntityRef,
    FactKind,
    JsonObject,
    Memory,
    MemoryType,
    NewMemory,
    Provenance,
    Source,
    StoredMessage,
    normalise_tags,
)
from .recall.whose import labelled, names_of
from .scopes import RecallContext, write_scope
from .storage.knobs import Weights
from .storage.reminders import ReminderPlace
from .tool_schemas import compact
from .upkeep.forgetting import forget_memory
from .upkeep.said import SAID_PREFIX, forget_said, said_matching
from .write.store import RecallFilters
from .write.subjects import bound, written_by
from .write.tombstones import unforgotten

log = logging.getLogger(__name__)
TypeName = Literal[
    "semantic",
    "episodic",
    "procedural",
    "fact",
    "conversation",
    "analysis",
    "research",
    "preference",
    "decision",
    "identity",
    "event",
    "observation",
    "goal",
    "todo",
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Relation(_Args):
    relation: str = Field(min_length=1, max_length=60)
    target: str = Field(min_length=1, max_length=120)


class EntityArgs(_Args):
    name: str = Field(min_length=1, max_length=120)
    type: Literal["person", "project", "technology", "place", "organization", "concept"] = "concept"
    relations: list[Relation] = Field(default_factory=list, max_length=10)


class StoreArgs(_Args):
    type: TypeName
    subject: str = Field(min_length=1, max_length=200)
    content: str = Field(min_length=3, max_length=2000)
    tags: list[str] = Field(default_factory=list, max_length=12)
    importance: int = Field(5, ge=1, le=10)
    source: Literal["user-stated", "inferred", "observed"] = "user-stated"
    ttl: str | None = Field(
        None, pattern=r"^\d{1,4}[mhdw]$", description="how long it stays true, e.g. 7d, 12h, 2w"
    )
    kind: (
        Literal[
            "profile",
            "relationship",
            "preference",
            "project",
            "guidance",
            "behavioral",
            "event",
            "goal",
            "todo",
            "other",
        ]
        | None
    ) = None
    entities: list[EntityArgs] = Field(default_factory=list, max_length=10)


class SearchArgs(_Args):
    query: str = Field(min_length=1, max_length=1000)
    type: Literal["semantic", "episodic", "procedural"] | None = None
    tags: list[str] = Field(default_factory=list, max_length=12)
    topK: int = Field(10, ge=1, le=50)
    weights: Weights | None = None


class RecallArgs(_Args):
    id: str | None = Field(None, max_length=64)
    type: Literal["semantic", "episodic", "procedural"] | None = None
    tags: list[str] = Field(default_factory=list, max_length=12)
    includeConsolidated: bool = False


class UpdateArgs(_Args):
    id: str = Field(min_length=1, max_length=64)
    subject: str | None = Field(None, min_length=1, max_length=200)
    content: str | None = Field(None, min_length=3, max_length=2000)
    tags: list[str] | None = Field(None, max_length=12)
    importance: int | None = Field(None, ge=1, le=10)


class DeleteArgs(_Args):
    id: str = Field(min_length=1, max_length=64)


class ReflectArgs(_Args):
    force: bool = False


class GraphArgs(_Args):
    entity: str = Field(min_length=1, max_length=120)
    depth: int = Field(2, ge=1, le=5)


class ConversationSearchArgs(_Args):
    query: str = Field(min_length=1, max_length=1000)
    topK: int = Field(8, ge=1, le=30)


class ChannelRecallArgs(_Args):
    channel_id: str = Field(min_length=1, max_length=64)
    limit: int = Field(20, ge=1, le=100)


class ReminderArgs(_Args):
    when: str = Field(
        min_length=1,
        max_length=100,
        description="as the person said it: 'Friday at 9', 'in 2 hours', 'every Monday'",
    )
    text: str = Field(
        min_length=1, max_length=500, description="what to remind them of, in their words"
    )


class RateLimiter:
    """At most ``limit`` writes per ``window`` seconds (voice sessions: 5 a minute, TOOLS-2)."""

    def __init__(self, clock: Clock, limit: int = 5, window: float = 60.0) -> None:
        self.clock, self.limit, self.window = clock, limit, window
        self._times: deque[float] = deque()

    def allow(self) -> bool:
        now = self.clock.now()
        while self._times and now - self._times[0] >= self.window:
            self._times.popleft()
        if len(self._times) >= self.limit:
            return False
        self._times.append(now)
        return True


class ToolError(Exception):
    """A tool refused a call; the message goes back to the model."""


WRITE_TOOLS = frozenset({"memory_store", "memory_update", "memory_delete"})
# What memory_delete may act on: an id memory_search returned in this turn with at least this relevance (the
# blend of meaning and words, without the recency and importance that lift any memory to a score near 0.4).
# The model is told to delete "each match"; a weak hit is a different memory that happens to rank, and a
# delete cannot be undone, so the floor is the tool's to hold, not the model's judgment (issue 20, finding 11).
STRONG_MATCH = 0.5
MAX_SAID = (
    5  # the speaker's own messages memory_search offers besides memories (the newest that match)
)
# they put new words in the store (deleting does not): withheld from someone who said /privacy off
KEEPING_TOOLS = frozenset({"memory_store", "memory_update", "reminder_set"})


class MemoryTools:
    """The tools for one conversation. The caller decides the scope; the model only supplies arguments."""

    def __init__(
        self,
        engine: MemoryEngine,
        ctx: RecallContext,
        *,
        provenance: Provenance = Provenance(),
        reflect: Callable[[bool], JsonObject] | None = None,
        rate_limit: RateLimiter | None = None,
        remembering: bool = True,
        place: ReminderPlace | None = None,
    ) -> None:
        self.engine, self.ctx, self.provenance = engine, ctx, provenance
        self.remembering = remembering  # False: the speaker or the place said /privacy off (SEC-5)
        self.reflect, self.rate_limit = reflect, rate_limit
        self.deleted: list[str] = []  # contents forgotten during this conversation turn (ORCH-3)
        # ids memory_search returned as strong matches this turn: what may be deleted
        self.strong: set[str] = set()
        self._tools: dict[str, tuple[type[_Args], Callable[[Any], Any]]] = {
            "memory_store": (StoreArgs, self.memory_store),
            "memory_search": (SearchArgs, self.memory_search),
            "memory_recall": (RecallArgs, self.memory_recall),
            "memory_update": (UpdateArgs, self.memory_update),
            "memory_delete": (DeleteArgs, self.memory_delete),
            "memory_reflect": (ReflectArgs, self.memory_reflect),
            "memory_graph": (GraphArgs, self.memory_graph),
            "conversation_search": (ConversationSearchArgs, self.conversation_search),
            "channel_recall": (ChannelRecallArgs, self.channel_recall),
        }
        self.place = (
            place  # ORCH-13: where a reminder set in this turn fires (None: no reminders here)
        )
        self.reminders_set: list[int] = []  # ids stored this turn: a reply may confirm only these
        if place is not None:
            self._tools["reminder_set"] = (ReminderArgs, self.reminder_set)

    # -- the model-facing surface -------------------------------------------------------------------
    def schemas(self) -> list[JsonObject]:
        """OpenAI-style function tool definitions."""
        out = []
        for name, (model, fn) in self._tools.items():
            if name in KEEPING_TOOLS and not self.remembering:
                continue  # not offered: the model would only be refused
            # a fresh copy of the cached schema, validated in full when called
            schema = json.loads(_json_schema(model))
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": " ".join((fn.__doc__ or "").split()),
                        "parameters": schema,
                    },
                }
            )
        return out

    def call(self, name: str, arguments: str | JsonObject | None) -> str:
        """Run one tool call from the model; always returns text (JSON on success, ``Error: ...`` otherwise)."""
        if name not in self._tools:
            return f"Error: there is no tool named {name!r}. Available: {', '.join(self._tools)}."
        model, fn = self._tools[name]
        try:
            raw = json.loads(arguments or "{}") if isinstance(arguments, str) else (arguments or {})
            args = model.model_validate(raw)
            if name in KEEPING_TOOLS and not self.remembering:
                raise ToolError(
                    "nothing may be stored here: the person (or this server) turned remembering off with /privacy off"
                )
            if name in WRITE_TOOLS and self.rate_limit and not self.rate_limit.allow():
                raise ToolError(
                    "too many memory writes this minute; keep it for later or say it in the reply"
                )
            return json.dumps(fn(args), ensure_ascii=False, default=str)
        except json.JSONDecodeError as exc:
            return f"Error: the arguments are not valid JSON ({exc.msg} at position {exc.pos}). Send a JSON object."
        except RecursionError:
            return "Error: the arguments are nested too deep. Send a flat JSON object."
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return f"Error: invalid arguments for {name}: {problems}. Fix them and call again."
        except (MemoryStoreError, ToolError) as exc:
            return f"Error: {exc}"
        except (
            Exception
        ) as exc:  # a tool call is an edge: log it, tell the model, keep the conversation alive
            log.exception("tool %s failed", name)
            return f"Error: {name} failed unexpectedly ({type(exc).__name__}); nothing was changed."

    # -- tools ----------------------------------------------------------------------------------------
    def memory_store(self, a: StoreArgs) -> JsonObject:
        """Save a durable fact, preference, event or how-to about the people here. Deduplicated automatically. Never store secrets."""
        mtype, legacy_kind = _resolve_type(a.type)
        where = write_scope(self.ctx)
        new = NewMemory(
            content=a.content,
            subject=a.subject,
            scope=where.scope,
            scope_id=where.scope_id,
            type=mtype,
            guild_id=where.guild_id,
            kind=FactKind(a.kind) if a.kind else (legacy_kind or FactKind.OTHER),
            visibility=where.visibility,
            tags=tuple(a.tags),
            source=Source(a.source),
            importance=float(a.importance),
            ttl=self.engine.clock.now() + parse_duration(a.ttl) if a.ttl else None,
            provenance=self.provenance,
            entities=tuple(
                EntityRef(e.name, e.type, tuple((r.relation, r.target) for r in e.relations))
                for e in a.entities
            ),
            written_by=written_by(self.ctx),
        )
        if not unforgotten(
            self.engine, [new]
        ):  # SEC-5: stored again only when the person says it again
            raise ToolError(
                "the person asked to forget this; it is kept again only if they say it again themselves"
            )
        # SEC-5: whom it is about, by identity
        result = self.engine.memories.add(bound(self.engine, new))
        return {
            "status": result.status,
            "id": result.memory.id,
            "superseded": list(result.superseded),
            "related": list(result.related),
        }

    def memory_search(self, a: SearchArgs) -> JsonObject:
        """Search long-term memory by meaning and keywords. Optional type, tags (all must match), topK and weights.
        Each result says whether it is a strong or weak match for the query."""
        filters = RecallFilters(
            types=(MemoryType(a.type),) if a.type else (), tags=normalise_tags(a.tags)
        )
        hits = self.engine.recall.recall(
            self.ctx, a.query, filters=filters, top_k=a.topK, weights=a.weights, threshold=0.0
        )
        self.strong.update(h.item.id for h in hits if h.relevance >= STRONG_MATCH)
        names = names_of(self.engine.people, [h.item for h in hits])
        found = [
            _brief(h.item, names) | {"score": round(h.score, 3), "match": _match(h.relevance)}
            for h in hits
        ]
        strong = any(h.relevance >= STRONG_MATCH for h in hits)
        return {"results": found + ([] if strong else self._said(a.query))}

    def _said(self, query: str) -> list[JsonObject]:
        """When no memory matches strongly: the speaker's own messages here that say every word of the query,
        offered as ``said:<id>``, so "forget that" reaches what is no memory yet (SEC-3, ``memory.upkeep.said``)."""
        rids = said_matching(
            self.engine, self.ctx, [self.ctx.speaker_id], query, skip=self.provenance.sources
        )
        said = self.engine.messages.get_rids(rids[-MAX_SAID:])
        self.strong.update(SAID_PREFIX + m.id for m in said)
        return [
            {"id": SAID_PREFIX + m.id, "type": "message", "content": m.content, "match": "strong"}
            for m in said
        ]

    def memory_recall(self, a: RecallArgs) -> JsonObject:
        """Browse memories by id, type or tags, without ranking by meaning."""
        if a.id:
            return self._briefs([self.engine.memories.get_visible(a.id, self.ctx)])
        filters = RecallFilters(
            types=(MemoryType(a.type),) if a.type else (), tags=normalise_tags(a.tags)
        )
        rows = self.engine.memory_rows.listing(
            self.ctx.memory_partitions(), filters, limit=20, include_inactive=a.includeConsolidated
        )
        return self._briefs(rows)

    def _briefs(self, memories: list[Memory]) -> JsonObject:
        names = names_of(self.engine.people, memories)
        return {"results": [_brief(m, names) for m in memories]}

    def memory_update(self, a: UpdateArgs) -> JsonObject:
        """Correct a memory in place by id (subject, content, tags, importance). Only the speaker's own memories."""
        self.engine.memories.get_changeable(a.id, self.ctx)
        memory = self.engine.memories.update(
            a.id, subject=a.subject, content=a.content, tags=a.tags, importance=a.importance
        )
        return {"status": "updated", "memory": _brief(memory, {})}

    def memory_delete(self, a: DeleteArgs) -> JsonObject:
        """Permanently delete a memory by id, for "forget that ...": only an id that memory_search returned as a
        strong match in this turn (a said:<id> one is their own message). Only the speaker's own."""
        if a.id.startswith(SAID_PREFIX):
            return self._forget_said(a.id)
        memory = self.engine.memories.get_changeable(a.id, self.ctx)
        if a.id not in self.strong:
            raise ToolError(
                f"memory {a.id} was not a strong match of a memory_search in this turn, so it is not deleted. Search for "
                "what the person asked to forget and delete only results marked strong; a weak match is a different memory."
            )
        forget_memory(self.engine, a.id, asked_in=(self.ctx.platform, self.ctx.channel_id))
        self.deleted.append(memory.content)
        return {"status": "deleted", "id": memory.id, "content": memory.content}

    def _forget_said(self, said_id: str) -> JsonObject:
        """One of the speaker's own messages offered by memory_search this turn, removed with the cascade."""
        rids = (
            self.engine.messages.rids_by_id([said_id.removeprefix(SAID_PREFIX)])
            if said_id in self.strong
            else []
        )
        said = self.engine.messages.get_rids(rids)
        if not forget_said(self.engine, self.ctx, [self.ctx.speaker_id], rids):
            raise ToolError(
                f"{said_id} is not a message of this person that memory_search returned in this turn"
            )
        self.deleted.append(said[0].content)
        return {"status": "deleted", "id": said_id, "content": said[0].content}

    def memory_reflect(self, a: ReflectArgs) -> JsonObject:
        """Merge near-duplicate memories now (consolidation)."""
        if self.reflect is None:
            raise ToolError("consolidation is not available in this conversation")
        return self.reflect(a.force)

    def memory_graph(self, a: GraphArgs) -> JsonObject:
        """Walk the graph of people, places, projects and things from a named entity."""
        return self.engine.graph.traverse(a.entity, a.depth, self.ctx.memory_partitions())

    def conversation_search(self, a: ConversationSearchArgs) -> JsonObject:
        """Search past conversation messages (text and voice) that this conversation may see."""
        hits = self.engine.messages.search(self.ctx, a.query, top_k=a.topK)
        return {"results": [_message(h.item) | {"score": round(h.score, 3)} for h in hits]}

    def channel_recall(self, a: ChannelRecallArgs) -> JsonObject:
        """Read the latest messages of another channel of this server that the speaker can read (or of this DM)."""
        rows = self.engine.messages.recent(self.ctx, a.channel_id, a.limit)
        if not rows:
            raise ToolError(f"no messages you may see in channel {a.channel_id!r}")
        return {"channel_id": a.channel_id, "messages": [_message(r) for r in rows]}

    def reminder_set(self, a: ReminderArgs) -> JsonObject:
        """Reminder for this chat: text and due time (posted here when due). Result: its id, the
        proof it is set."""
        if self.place is None:
            raise ToolError("reminders cannot be set in this conversation")
        stored = self.engine.reminders.ask(
            self.ctx.speaker_id, self.place, a.when, a.text, self.ctx.tz
        )
        self.reminders_set.append(stored.id)
        return {"status": "set", **stored.as_dict()}


@functools.cache
def _json_schema(model: type[_Args]) -> str:
    """A tool's argument schema, built once: pydantic builds it anew at every call (tens of milliseconds for the
    ten tools on a loaded machine, on the event loop, at every step of every turn)."""
    return json.dumps(compact(model.model_json_schema()))


def _match(relevance: float) -> str:
    return "strong" if relevance >= STRONG_MATCH else "weak"


def _resolve_type(name: str) -> tuple[MemoryType, FactKind | None]:
    if name in MemoryType._value2member_map_:
        return MemoryType(name), None
    return LEGACY_TYPES[name]


def parse_duration(text: str) -> float:
    match = re.fullmatch(r"(\d{1,4})([mhdw])", text.strip())
    if not match:
        raise ToolError(f"ttl {text!r} is not a duration like 30m, 12h, 7d or 2w")
    amount, unit = int(match.group(1)), match.group(2)
    return amount * {"m": 60.0, "h": 3600.0, "d": DAY, "w": 7 * DAY}[unit]


def _brief(m: Memory, names: dict[str, str]) -> JsonObject:
    """A memory as a tool result: whose it is and its words in the third person, as a prompt shows
    it (``memory.recall.whose``: a model shown "I work as a nurse" speaks as the person); an
    update's own result (``names`` empty) keeps the words as stored."""
    whose, words = labelled(m, names) if names else ("", m.content)
    return {
        "id": m.id,
        "type": m.type,
        "kind": m.kind,
        "subject": m.subject,
        **({"whose": whose} if whose else {}),
        "content": words,
        "tags": list(m.tags),
        "importance": m.importance,
    }


def _message(m: StoredMessage) -> JsonObject:
    return {
        "author": m.author_name or m.author_id,
        "role": m.role,
        "channel_id": m.channel_id,
        "content": m.content,
        "at": m.created_at,
        "modality": m.modality,
    }

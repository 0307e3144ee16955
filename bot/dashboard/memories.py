"""``/api/memory``: list, search, read, create, edit and forget memories, by the bot's own write rules.

POST    ``MemoryStore.add``: safety filters, dedup (a duplicate is a 409 naming the stored one), links
PUT     ``MemoryStore.update`` (same checks), in place, type included: no history row or journal line keeps
        the old words, and the file is scrubbed of them as after a forget
DELETE  ``memory.Forgetting.memory`` (``memory.upkeep.forgetting``): the memory, its history, the messages it was learned from,
        the summaries of those chats; then every in-process cache is emptied
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory import Correction, InvalidInput, MemoryQuery, RecallFilters
from memory.models import FactKind, Memory, MemoryType, NewMemory, Scope, Source, Visibility

from .bodies import MemoryEdit, NewMemoryBody
from .common import ApiError, answer, audit_action, body, services
from .contexts import resolve_turn
from .views import enum_arg, int_arg, memory_json, tags_arg

MAX_TOP_K = 100


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/memory", list_memories)
    router.add_post("/api/memory", create)
    router.add_get("/api/memory/search", search)
    router.add_get("/api/memory/{id}", read)
    router.add_put("/api/memory/{id}", edit)
    router.add_delete("/api/memory/{id}", forget)


async def list_memories(request: web.Request) -> web.Response:
    q = request.query
    query = MemoryQuery(
        scope=_arg(q, "scope", Scope),
        person=q.get("person") or None,
        guild=q.get("guild") or None,
        type=_arg(q, "type", MemoryType),
        kind=_arg(q, "kind", FactKind),
        tags=tags_arg(q),
        text=(q.get("text") or "").strip(),
        limit=_int(q, "limit", 50, 1, 500),
        offset=_int(q, "offset", 0, 0, 10_000_000),
    )
    svc = services(request)
    found, total = await svc.memory.dashboard.memories(query)
    return answer(
        {
            "items": [memory_json(m) for m in found],
            "total": total,
            "limit": query.limit,
            "offset": query.offset,
        }
    )


async def search(request: web.Request) -> web.Response:
    """Hybrid recall (RET-1): as a given conversation when ``person`` is named (what the bot could recall there),
    else over everything the store holds (or one guild's partitions)."""
    q = request.query
    text = (q.get("q") or "").strip()
    if not text:
        raise ApiError(400, "q is required: the words to search for")
    top_k = _int(q, "top_k", 10, 1, MAX_TOP_K)
    filters = RecallFilters(
        types=tuple(t for t in [_arg(q, "type", MemoryType)] if t), tags=tags_arg(q)
    )
    svc = services(request)
    if q.get("person"):  # as that conversation: what the bot could recall there
        turn = await svc.run(resolve_turn, svc, dict(q), text)
        hits = await svc.memory.dashboard.search(text, filters, top_k, ctx=turn.ctx)
    else:
        hits = await svc.memory.dashboard.search(text, filters, top_k, guild=q.get("guild"))
    return answer({"items": [memory_json(h.item, score=round(h.score, 4)) for h in hits]})


async def read(request: web.Request) -> web.Response:
    svc = services(request)
    return answer(memory_json(await svc.memory.dashboard.memory(request.match_info["id"])))


async def create(request: web.Request) -> web.Response:
    new = await body(request, NewMemoryBody)
    svc = services(request)
    result = await svc.memory.dashboard.add(_new_memory(new, svc.owners))
    m = result.memory
    if result.status == "duplicate":
        raise ApiError(
            409, f"already stored as memory {m.id} (nothing new was written)", memory_json(m)
        )
    detail = {"scope": m.scope.value, "scope_id": m.scope_id, "type": m.type.value}
    await audit_action(request, "memory.create", m.id, person_id=_person(m), detail=detail)
    return answer(memory_json(m, status=result.status, superseded=list(result.superseded)), 201)


def _new_memory(new: NewMemoryBody, owners: tuple[str, ...]) -> NewMemory:
    """The operator files a memory anywhere; the scope's own rules still apply (guild lore is public, owner
    memory private, a person's memory needs the person)."""
    scope_id = new.scope_id
    if new.scope is Scope.OWNER:
        scope_id = scope_id or (owners[0] if owners else None)
        if not scope_id:
            raise InvalidInput(
                "owner memory needs scope_id (no owner is configured: COMPANION_OWNER_IDS)"
            )
    if new.scope is Scope.GUILD:
        scope_id = scope_id or new.guild_id
    if not scope_id:
        raise InvalidInput(
            f"a {new.scope.value} memory needs scope_id ({'the person id' if new.scope is Scope.USER else 'the guild id'})"
        )
    visibility = new.visibility or (
        Visibility.PUBLIC if new.guild_id or new.scope is Scope.GUILD else Visibility.PRIVATE
    )
    return NewMemory(
        content=new.content,
        subject=new.subject,
        scope=new.scope,
        scope_id=scope_id,
        type=new.type,
        kind=new.kind,
        visibility=visibility,
        tags=tuple(new.tags),
        source=Source.USER_STATED,
        importance=float(new.importance),
        guild_id=new.guild_id if new.scope is Scope.USER else None,
    )


async def edit(request: web.Request) -> web.Response:
    change = await body(request, MemoryEdit)
    fields = sorted(change.model_dump(exclude_none=True))
    if not fields:
        raise ApiError(
            400, "nothing to change: send any of content, importance, tags, type, kind, subject"
        )
    svc = services(request)
    fix = Correction(**change.model_dump(exclude_none=True))
    old, new = await svc.memory.dashboard.edit(request.match_info["id"], fix)
    await audit_action(
        request, "memory.update", old.id, person_id=_person(old), detail={"fields": fields}
    )
    return answer(memory_json(new))


async def forget(request: web.Request) -> web.Response:
    svc = services(request)
    done = await svc.memory.forgetting.memory(request.match_info["id"])
    await svc.forgot()
    target = request.match_info["id"]
    await audit_action(
        request,
        "memory.forget",
        target,
        detail={"memories": len(done.memories), "messages": done.messages},
    )
    return answer({"forgotten": {"memories": list(done.memories), "messages": done.messages}})


def _person(m: Memory) -> str | None:
    return m.scope_id if m.scope in (Scope.USER, Scope.OWNER) else None


def _arg(q: Any, name: str, enum: type) -> Any:
    try:
        return enum_arg(q, name, enum)
    except InvalidInput as exc:
        raise ApiError(400, str(exc)) from None


def _int(q: Any, name: str, default: int, low: int, high: int) -> int:
    try:
        return int_arg(q, name, default, low, high)
    except InvalidInput as exc:
        raise ApiError(400, str(exc)) from None

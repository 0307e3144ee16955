"""People and what the bot would see: ``/api/people*``, ``/api/snapshot``, ``/api/reflections``,
``/api/entities``, ``/api/graph``. Export and forget are the same ``memory.Forgetting`` calls
``companion export`` and ``companion forget-person`` make."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory import InvalidInput

from .bodies import Confirm, TimezoneBody
from .common import ApiError, answer, audit_action, body, services
from .contexts import preview
from .services import DashboardServices
from .views import int_arg, memory_json, person_json, reflection_json

MAX_TEXT = 4000


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/people", people)
    router.add_get("/api/people/{id}", person)
    router.add_get("/api/people/{id}/export", export)
    router.add_delete("/api/people/{id}", forget)
    router.add_put("/api/people/{id}/timezone", set_timezone)
    router.add_get("/api/snapshot", snapshot)
    router.add_get("/api/reflections", reflections)
    router.add_get("/api/entities", entities)
    router.add_get("/api/graph", graph)


async def people(request: web.Request) -> web.Response:
    svc = services(request)
    found = await svc.memory.dashboard.people()
    return answer({"items": [person_json(p) for p in found]})


async def person(request: web.Request) -> web.Response:
    svc, person_id = services(request), request.match_info["id"]
    found = await svc.memory.dashboard.profile(person_id)
    profile: dict[str, list[dict[str, Any]]] = {}
    for m in found.memories:
        profile.setdefault(m.type.value, []).append(memory_json(m))
    desk = svc.memory.dashboard
    own = await desk.zone(person_id)
    settings = {
        "share_across_servers": found.shares,
        "timezone": own.key if own else None,
    }
    return answer(
        {
            **person_json(found.person),
            "profile": profile,
            "settings": {**settings, "timezone_default": desk.default_zone.key},
        }
    )


async def set_timezone(request: web.Request) -> web.Response:
    """ORCH-8: the operator sets a person's zone (as ``/timezone`` does); "" clears it; an unknown name is a 400."""
    person_id = request.match_info["id"]
    wanted = (await body(request, TimezoneBody)).zone.strip()
    svc = services(request)
    desk = svc.memory.dashboard
    await desk.person(person_id)  # NotFound: nobody with that id
    zone = None
    if wanted:
        zone = await desk.set_zone(person_id, wanted)
    else:
        await desk.clear_zone(person_id)
    await audit_action(
        request,
        "person.timezone",
        person_id,
        person_id=person_id,
        detail={"timezone": zone.key if zone else None},
    )
    default = desk.default_zone.key
    return answer({"timezone": zone.key if zone else None, "timezone_default": default})


async def export(request: web.Request) -> web.Response:
    svc = services(request)
    person_id = request.match_info["id"]
    await svc.memory.dashboard.person(person_id)
    data = await svc.memory.forgetting.export([person_id])
    response = answer(data)
    response.headers["Content-Disposition"] = 'attachment; filename="companion-export.json"'
    return response


async def forget(request: web.Request) -> web.Response:
    """Everything about a person, after they were typed back as confirmation. The audit row names no one:
    the person's id is among what was forgotten (and forgetting removed the earlier rows about them)."""
    person_id = request.match_info["id"]
    confirm = await body(request, Confirm)
    if confirm.confirm != person_id:
        raise ApiError(
            422,
            'confirmation does not match: send {"confirm": "<the person id>"} to forget this person',
        )
    svc = services(request)
    await svc.memory.dashboard.person(person_id)
    # a /privacy off outlives it (SEC-5)
    counts = await svc.memory.forgetting.person([person_id])  # /export files included
    await svc.forgot()
    await audit_action(request, "person.forget", "", detail=counts)
    return answer({"forgotten": counts})


async def snapshot(request: web.Request) -> web.Response:
    """What the bot would see for this message here: the assembler's own slice (ORCH-5), without the model."""
    q = request.query
    text = (q.get("text") or "").strip()
    if not text:
        raise ApiError(400, "text is required: the message the bot would be answering")
    if len(text) > MAX_TEXT:
        raise ApiError(400, f"text is too long (at most {MAX_TEXT} characters)")
    svc = services(request)
    return answer(await svc.run(_snapshot, svc, dict(q), text))


def _snapshot(svc: DashboardServices, q: dict[str, str], text: str) -> dict[str, Any]:
    turn, snap = preview(svc, q, text)
    shown = svc.engine.memory_rows
    memories = [memory_json(shown.get(i)) for i in snap.memory_ids]
    return {
        "text": snap.render(),
        "sections": [{"key": s.key, "title": s.title, "lines": s.lines} for s in snap.sections],
        "memories": memories,
        "history": snap.history,
        "context": {
            "person": turn.person_id,
            "guild": turn.ctx.guild_id,
            "dm": turn.ctx.is_dm,
            "owner_private": turn.ctx.owner_private,
            "partitions": list(turn.ctx.memory_partitions()),
        },
        "took_ms": round(snap.took_ms, 2),
    }


async def reflections(request: web.Request) -> web.Response:
    limit = _limit(request, 50, 1000)
    svc = services(request)
    found = await svc.memory.dashboard.reflections(limit)
    return answer({"items": [reflection_json(r) for r in found]})


async def entities(request: web.Request) -> web.Response:
    limit = _limit(request, 200, 5000)
    svc = services(request)
    found = await svc.memory.dashboard.entities(limit)
    return answer(
        {
            "items": [
                {"id": e.id, "name": e.name, "kind": e.kind, "mentions": e.mentions} for e in found
            ]
        }
    )


async def graph(request: web.Request) -> web.Response:
    limit = _limit(request, 300, 2000)
    svc = services(request)
    view = await svc.memory.dashboard.graph(limit)
    nodes: list[dict[str, Any]] = [
        {"id": f"person:{p}", "label": label, "kind": "person", "person_id": p}
        for p, label in view.people
    ]
    nodes += [
        {
            "id": f"entity:{e.id}",
            "label": e.name,
            "kind": "entity",
            "type": e.kind,
            "mentions": e.mentions,
        }
        for e in view.entities
    ]
    return answer(
        {
            "nodes": nodes,
            "edges": [{"source": s, "target": t, "label": label} for s, t, label in view.edges],
        }
    )


def _limit(request: web.Request, default: int, high: int) -> int:
    try:
        return int_arg(request.query, "limit", default, 1, high)
    except InvalidInput as exc:
        raise ApiError(400, str(exc)) from None

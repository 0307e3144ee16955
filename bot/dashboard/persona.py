"""The persona in the dashboard (ORCH-7): the operator's (read-only: it is a file) and each place's own,
which the operator may set or reset here as a place's admins may with /persona. The same checks and the same
audit trail as the command (``memory.PlacePersona``): the row names the dashboard caller, never the words."""

from __future__ import annotations

from aiohttp import web

from memory import MAX_PLACE_PERSONA, PlacePersona

from .bodies import PersonaBody
from .common import answer, body, caller, services
from .views import iso


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/persona", show)
    router.add_put("/api/guilds/{id}/persona", put)
    router.add_delete("/api/guilds/{id}/persona", reset)


def _place_json(p: PlacePersona) -> dict[str, object]:
    return {"guild_id": p.guild_id, "text": p.text, "set_by": p.set_by, "set_at": iso(p.set_at)}


async def show(request: web.Request) -> web.Response:
    svc = services(request)
    persona = svc.orchestrator.persona
    places = await svc.memory.dashboard.personas()
    return answer(
        {
            "name": persona.name,
            "operator": persona.operator.text,
            "max_place_chars": MAX_PLACE_PERSONA,
            "places": [_place_json(p) for p in places],
        }
    )


async def put(request: web.Request) -> web.Response:
    """Refused with 422 and the reason when the text fails the checks (a secret, an injection, a heading)."""
    change = await body(request, PersonaBody)
    svc = services(request)
    done = await svc.memory.dashboard.set_persona(
        request.match_info["id"], change.text, caller(request).who
    )
    return answer(_place_json(done))


async def reset(request: web.Request) -> web.Response:
    svc = services(request)
    gone = await svc.memory.dashboard.reset_persona(request.match_info["id"], caller(request).who)
    return answer({"reset": gone})

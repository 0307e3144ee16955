"""Group manners in the dashboard (ORCH-10): every server channel and group the bot has talked in, with its mode, which
the operator may set here as a place's admins may with /manners. Audited like every dashboard change (ids and the
mode; no words)."""

from __future__ import annotations

from aiohttp import web

from memory import Mode, PlaceMode

from .bodies import MannersBody
from .common import answer, audit_action, body, services
from .views import iso


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/manners", show)
    router.add_put("/api/places/{key}/manners", put)


def _places(modes: list[PlaceMode], seen: dict[str, str]) -> list[dict[str, object]]:
    """Each place once: its set mode, or null (addressed; chime-in in a channel the operator listed)."""
    chosen = {p.channel_key: p for p in modes}
    seen.update({key: p.guild_id or "" for key, p in chosen.items() if key not in seen})
    return [
        {
            "channel_key": key,
            "guild_id": guild,
            "mode": chosen[key].mode.value if key in chosen else None,
            "set_at": iso(chosen[key].set_at) if key in chosen else None,
        }
        for key, guild in sorted(seen.items())
    ]


async def show(request: web.Request) -> web.Response:
    svc = services(request)
    return answer(
        {"modes": [m.value for m in Mode], "places": _places(*await svc.memory.dashboard.places())}
    )


async def put(request: web.Request) -> web.Response:
    """A place the bot never saw may be set too (before it speaks there); a malformed key is refused (422)."""
    change = await body(request, MannersBody)
    key, svc = request.match_info["key"], services(request)
    done = await svc.memory.dashboard.set_mode(key, change.mode)
    await audit_action(request, "manners.set", key, detail={"mode": done.mode.value})
    return answer(
        {
            "channel_key": done.channel_key,
            "guild_id": done.guild_id,
            "mode": done.mode.value,
            "set_at": iso(done.set_at),
        }
    )

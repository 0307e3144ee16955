"""The operator's switches: recall settings (hot reload), guilds and their purge, the audit trail."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory.recall.overview import Overview
from memory.storage.knobs import KnobStore, knob_help

from .bodies import Confirm, SettingsBody
from .common import ApiError, answer, audit, body, services
from .services import DashboardServices
from .views import audit_json, int_arg


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/settings", get_settings)
    router.add_put("/api/settings", put_settings)
    router.add_get("/api/guilds", guilds)
    router.add_post("/api/guilds/{id}/purge", purge)
    router.add_get("/api/audit", audit_trail)


def _settings(knobs: KnobStore) -> dict[str, Any]:
    """Both corpora's knobs, and ``help``: one line per knob ("weights.semantic" for a nested one) from the field
    descriptions in ``memory.storage.knobs``, served so the page and the knob it explains cannot drift apart."""
    memories, messages = (
        knobs.get("memories").model_dump(mode="json"),
        knobs.get("messages").model_dump(mode="json"),
    )
    return {"recall": memories, "messages": messages, "help": knob_help()}


async def get_settings(request: web.Request) -> web.Response:
    svc = services(request)
    return answer(await svc.run(_settings, svc.engine.knobs))


async def put_settings(request: web.Request) -> web.Response:
    """Validated as a whole (an unknown knob or a bad value changes nothing) and stored in the settings table,
    which the bot's recall reads on every turn: the next reply uses the new values, no restart."""
    change = await body(request, SettingsBody)
    if not change.recall and not change.messages:
        raise ApiError(400, 'nothing to change: send {"recall": {knob: value}}')
    svc = services(request)
    await svc.run(_apply, svc, change)
    changed = {"recall": sorted(change.recall), "messages": sorted(change.messages or {})}
    await audit(
        request,
        "settings.update",
        "recall",
        detail={**changed, "values": {"recall": change.recall, "messages": change.messages or {}}},
    )
    return answer(await svc.run(_settings, svc.engine.knobs))


def _apply(svc: DashboardServices, change: SettingsBody) -> None:
    knobs = svc.engine.knobs
    # both corpora are validated before either is stored, so a bad second half leaves the first unchanged
    merged = {
        name: _merged(knobs, name, part)
        for name, part in (("memories", change.recall), ("messages", change.messages))
        if part
    }
    with svc.engine.transaction():
        for name, part in merged.items():
            knobs.update(name, part)  # type: ignore[arg-type]


def _merged(knobs: KnobStore, corpus: str, part: dict[str, object]) -> dict[str, object]:
    from memory.storage.knobs import RecallKnobs

    current = knobs.get(corpus).model_dump(mode="json")  # type: ignore[arg-type]
    for key, value in part.items():
        current[key] = (
            {**current[key], **value}
            if isinstance(value, dict) and isinstance(current.get(key), dict)
            else value
        )
    RecallKnobs.model_validate(current)  # raises ValidationError naming the field
    return part


async def guilds(request: web.Request) -> web.Response:
    svc = services(request)
    found = await svc.run(Overview(svc.engine).guilds)
    return answer(
        {
            "items": [
                {"id": g.id, "name": g.name, "memories": g.memories, "messages": g.messages}
                for g in found
            ]
        }
    )


async def purge(request: web.Request) -> web.Response:
    """Everything of one guild, after its name (or, when no name is known, its id) was typed back."""
    guild_id = request.match_info["id"]
    confirm = await body(request, Confirm)
    svc = services(request)
    known = {g.id: g for g in await svc.run(Overview(svc.engine).guilds)}
    if guild_id not in known:
        raise ApiError(404, f"no guild with id {guild_id!r}")
    expected = known[guild_id].name or guild_id
    if confirm.confirm != expected:
        raise ApiError(
            422,
            "confirmation does not match: type the guild's name (its id when no name is known) to purge it",
        )
    counts = await svc.memory.forgetting.guild(guild_id)
    await svc.forgot()
    await audit(request, "guild.purge", guild_id, detail=counts)
    return answer({"purged": counts})


async def audit_trail(request: web.Request) -> web.Response:
    try:
        limit = int_arg(request.query, "limit", 100, 1, 1000)
    except Exception as exc:
        raise ApiError(400, str(exc)) from None
    svc = services(request)
    rows = await svc.run(svc.engine.audit.recent, limit)
    return answer({"items": [audit_json(e) for e in rows]})

"""The operator's switches: recall settings (hot reload), guilds and their purge, the audit trail."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory import RecallSettings

from .bodies import Confirm, SettingsBody
from .common import ApiError, answer, audit_action, body, services
from .views import audit_json, int_arg


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/settings", get_settings)
    router.add_put("/api/settings", put_settings)
    router.add_get("/api/guilds", guilds)
    router.add_post("/api/guilds/{id}/purge", purge)
    router.add_get("/api/audit", audit_trail)


def _settings(shown: RecallSettings) -> dict[str, Any]:
    """Both corpora's knobs, and ``help``: one line per knob, served so the page and the knob it
    explains cannot drift apart (``memory.Dashboard.settings``)."""
    return {"recall": shown.memories, "messages": shown.messages, "help": shown.help}


async def get_settings(request: web.Request) -> web.Response:
    svc = services(request)
    return answer(_settings(await svc.memory.dashboard.settings()))


async def put_settings(request: web.Request) -> web.Response:
    """Validated as a whole (an unknown knob or a bad value changes nothing) and stored in the settings table,
    which the bot's recall reads on every turn: the next reply uses the new values, no restart."""
    change = await body(request, SettingsBody)
    if not change.recall and not change.messages:
        raise ApiError(400, 'nothing to change: send {"recall": {knob: value}}')
    svc = services(request)
    # both corpora are validated before either is stored: a bad second half leaves the first alone
    shown = await svc.memory.dashboard.change_settings(change.recall, change.messages or {})
    changed = {"recall": sorted(change.recall), "messages": sorted(change.messages or {})}
    await audit_action(
        request,
        "settings.update",
        "recall",
        detail={**changed, "values": {"recall": change.recall, "messages": change.messages or {}}},
    )
    return answer(_settings(shown))


async def guilds(request: web.Request) -> web.Response:
    svc = services(request)
    found = await svc.memory.dashboard.guilds()
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
    known = {g.id: g for g in await svc.memory.dashboard.guilds()}
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
    await audit_action(request, "guild.purge", guild_id, detail=counts)
    return answer({"purged": counts})


async def audit_trail(request: web.Request) -> web.Response:
    try:
        limit = int_arg(request.query, "limit", 100, 1, 1000)
    except Exception as exc:
        raise ApiError(400, str(exc)) from None
    svc = services(request)
    rows = await svc.memory.dashboard.audit(limit)
    return answer({"items": [audit_json(e) for e in rows]})

"""A conversation the operator names (platform, person, channel, guild, text) turned into the bot's own
``Turn``, by the bot's own scope resolution (``Orchestrator.peek``, which writes nothing): the snapshot and the contextual
search see exactly what a reply in that place would see. Only known accounts: asking about someone the
bot has never met would record a new identity, and a GET must not write."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory import NotFound
from memory.models import PLATFORMS

from ..assembly import Snapshot, Turn
from ..types import IncomingMessage
from .common import ApiError
from .services import DashboardServices

if TYPE_CHECKING:
    from memory import MemoryEngine


def resolve_turn(svc: DashboardServices, query: dict[str, str], text: str) -> Turn:
    """(runs on the memory thread) ``query`` holds platform, person, channel, guild; nothing is written."""
    return svc.orchestrator.peek(_message(svc, query, text))


def preview(svc: DashboardServices, query: dict[str, str], text: str) -> tuple[Turn, Snapshot]:
    """(runs on the memory thread) The snapshot of ``text`` said there, by chat's own path (ORCH-5)."""
    return svc.orchestrator.preview(_message(svc, query, text))


def _message(svc: DashboardServices, query: dict[str, str], text: str) -> IncomingMessage:
    platform = query.get("platform") or ""
    if platform not in PLATFORMS:
        raise ApiError(400, f"platform must be one of {', '.join(PLATFORMS)}, not {platform!r}")
    person = (query.get("person") or "").strip()
    if not person:
        raise ApiError(
            400, "person is required: a person id (discord:123) or the platform's user id"
        )
    user_id = _account(svc.engine, platform, person)
    guild = (query.get("guild") or "").strip() or None
    if guild and guild.startswith(f"{platform}:"):
        # the store's guild ids are platform-qualified; the platform's own id is wanted here
        guild = guild[len(platform) + 1 :]
    channel = (query.get("channel") or "").strip() or (
        svc.orchestrator.dm_channel(platform, user_id) if guild is None else "general"
    )
    return IncomingMessage(
        platform=platform,
        channel_id=channel,
        author_id=user_id,
        author_name="",
        text=text,
        guild_id=guild,
    )


def _account(engine: MemoryEngine, platform: str, person: str) -> str:
    """The platform user id of ``person`` (a person id, linked or not, or the user id itself) on ``platform``."""
    for account in engine.people.accounts(person):
        if account["platform"] == platform:
            return str(account["platform_user_id"])
    prefix = f"{platform}:"
    user_id = person[len(prefix) :] if person.startswith(prefix) else person
    if engine.people.known_account(platform, user_id):
        return user_id
    raise NotFound(f"no {platform} account known for {person!r} (the bot has not met them there)")

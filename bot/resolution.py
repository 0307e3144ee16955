"""Scope resolution (ORCH-1): a platform message's accounts become people, and the turn gets the context every
read of it is made for (who speaks, who else is there, owner or not, their reach and time zone).

One object, so the orchestrator, the commands and the check-ins resolve a person the same way, and each is
handed it by the composition root instead of reaching into the orchestrator for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memory import (
    ChannelState,
    People,
    RecallContext,
    Timezones,
    clean_text,
    normalise_text,
    place_key,
)

from .assembly import Turn
from .types import IncomingMessage


@dataclass(frozen=True, slots=True)
class OwnerPolicy:
    """Platform-qualified owner ids ("discord:123", "telegram:55", "console:local-user"). With none configured,
    the console is the owner: it is the operator's own terminal. The rule lives here, not in ``companion chat``,
    so that ``companion snapshot`` and the dashboard resolve a console turn exactly as chat does (ORCH-5)."""

    owners: frozenset[str] = frozenset()

    def is_owner(self, platform: str, user_id: str) -> bool:
        if not self.owners:
            return platform == "console"
        return f"{platform}:{user_id}" in self.owners


class Resolver:
    def __init__(
        self, people: People, owners: OwnerPolicy, zones: Timezones, channels: ChannelState
    ) -> None:
        self.people, self.owners, self.zones, self.channels = people, owners, zones, channels

    def resolve(self, message: IncomingMessage) -> Turn:
        """Scope resolution: platform ids to people (recording new accounts and names), and the context every read
        of this turn is made for."""
        return self._resolved(
            message, lambda accounts: self.people.resolve_many(message.platform, accounts)
        )

    def peek(self, message: IncomingMessage) -> Turn:
        """``resolve`` that writes nothing (ORCH-5): an unknown account is the person it would become, and no
        display name changes. The same rules otherwise (owner, reach, zone), so a snapshot is what chat would see."""
        return self._resolved(
            message,
            lambda accounts: self.people.lookup_many(
                message.platform, [uid for uid, _ in accounts]
            ),
        )

    def dm_channel(self, platform: str, user_id: str) -> str:
        """Where this account's DM with the bot is, for a snapshot that names no channel: the console's one chat,
        else the DM the bot last had with them, else a Telegram private chat's id (the user's own)."""
        if platform == "console":
            return "console"  # ``ConsoleChat``'s channel
        known = self.channels.dm_channel(platform, self.people.lookup(platform, user_id))
        return known or (user_id if platform == "telegram" else f"dm-{user_id}")

    def _resolved(
        self, message: IncomingMessage, persons_of: Callable[[list[tuple[str, str]]], list[str]]
    ) -> Turn:
        author = display_name(message.author_name)
        others = [(user_id, display_name(name)) for user_id, name in message.participants]
        pointed = [(user_id, display_name(name)) for user_id, name in message.mentions]
        # one read for everyone here
        person, *persons = persons_of([(message.author_id, author), *others, *pointed])
        persons, pointed_ids = persons[: len(others)], persons[len(others) :]
        names = {person: author or self.people.name(person)}
        for (user_id, name), other in zip(others, persons, strict=True):
            names.setdefault(other, name or user_id)
        is_owner = self.owners.is_owner(message.platform, message.author_id)
        owner = is_owner and message.is_dm
        people = tuple(names)
        ctx = RecallContext(
            platform=message.platform,
            speaker_id=person,
            channel_id=message.channel_id,
            guild_id=_guild_key(message),
            participants=people[1:],
            is_dm=message.is_dm,
            owner_private=owner,
            owner_id=person if owner else None,
            admin=not message.is_dm and (message.author_is_admin or is_owner),
            reach=self.people.reach(person, people, is_dm=message.is_dm),
            readable_channels=message.readable_channels,
            zone=self.zones.name_of(person),
            pointed=tuple(dict.fromkeys(p for p in pointed_ids if p != person)),
        )
        return Turn(
            message,
            person,
            ctx,
            f"{message.platform}:{message.channel_id}",
            names,
            clean_text(message.text),
        )


def display_name(name: str) -> str:
    """A name as people show it, on one line and bounded: it reaches prompts (quoted) and transcripts."""
    return normalise_text(name)[:64]


def _guild_key(message: IncomingMessage) -> str | None:
    """The store's key of the place (``memory.scopes.place_key``; a departure is keyed the same)."""
    return place_key(message.platform, message.guild_id) if message.guild_id else None

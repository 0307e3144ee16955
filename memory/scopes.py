"""Who may see what, and who may change what (SEC-1), decided once per turn and enforced inside retrieval.

Every memory row and every message row carries a *partition key*. A ``RecallContext`` turns into the
exact set of partition keys it may read; vector search, FTS and plain SQL all filter on that set, so a
query can never return a row from a partition the context may not see.

    memory partitions   user|<p>|private          learned in a DM: only in DMs with p
                        user|<p>|public|<guild>   what p said in a server: that server and p's own DMs;
                                                  other servers only if p opted in (/share on)
                        user|<p>|public           portable facts (stores made before servers were kept
                                                  apart): p's own DMs, and servers where p opted in
                        guild|<guild>|public      community lore: only in that guild
                        owner|<o>|private         the operator's own memory: only in owner-private contexts
    message partitions  guild|<guild>             a guild's messages: that guild, and only the channels
                                                  the asker can read (``readable_channels``)
                        dm|<p>                    a DM's messages: only in a DM with that person

Which of a person's server partitions exist is a fact of the store, so the caller that builds the
context (``memory.storage.people.People.context``) lists them in ``reach``; this module stays pure.

Writes (``may_change``): a person changes or deletes only memories about themselves; guild lore only
the guild's admins or the bot's owner (``admin``); owner memory only in an owner-private context.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from .errors import InvalidInput
from .models import JsonObject, Scope, Visibility


@dataclass(frozen=True, slots=True)
class WriteScope:
    """Where a new memory said in a context is filed."""

    scope: Scope
    scope_id: str
    visibility: Visibility
    guild_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecallContext:
    """The conversation a recall is made for. Built by the caller from the incoming event, never by the model.

    ``guild_id`` is None in a DM. ``participants`` are person ids whose memories of this server may
    surface (the speaker is always one of them). ``owner_private`` is True only in a DM with the
    configured owner, or on the operator's own console/dashboard. ``admin``: the speaker may change this
    guild's lore. ``reach``: extra memory partitions (the speaker's own server partitions in a DM; in a
    server, those of participants who opted in). ``readable_channels``: other channels of this guild the
    speaker can read (the adapter knows; the current channel is always readable).
    """

    platform: str
    speaker_id: str
    channel_id: str
    guild_id: str | None = None
    participants: tuple[str, ...] = ()
    is_dm: bool = False
    owner_private: bool = False
    owner_id: str | None = None
    admin: bool = False
    reach: tuple[str, ...] = ()
    readable_channels: tuple[str, ...] = ()
    zone: str = ""  # the speaker's IANA time zone (ORCH-8), set by the caller; "" (older buffered rows) is UTC
    # SEC-5: person ids of the accounts this message @mentions or replies to (the platform says who, so a fact
    # naming one of them is tied to that person, not to whoever shows the same name; ``memory.write.subjects``)
    pointed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.speaker_id:
            raise InvalidInput("a recall context needs a speaker")
        if self.is_dm == (self.guild_id is not None):
            raise InvalidInput("a context is either a DM (no guild) or in a guild, not both")
        if self.owner_private and not (
            self.owner_id and self.is_dm and self.speaker_id == self.owner_id
        ):
            raise InvalidInput(
                "an owner-private context is a DM (or console) of the owner with the owner"
            )

    @property
    def tz(self) -> tzinfo:
        """The speaker's zone, in which "yesterday" and "this evening" are read (an unknown name reads as UTC)."""
        try:
            return ZoneInfo(self.zone) if self.zone else UTC
        except (ValueError, KeyError):  # ZoneInfoNotFoundError is a KeyError; "../x" a ValueError
            return UTC

    @property
    def people(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.speaker_id, *self.participants)))

    def memory_partitions(self) -> tuple[str, ...]:
        if self.is_dm:
            keys = [
                user_partition(self.speaker_id, Visibility.PRIVATE),
                user_partition(self.speaker_id, Visibility.PUBLIC),
            ]
        else:
            keys = [user_partition(p, Visibility.PUBLIC, self.guild_id) for p in self.people]
            keys.append(memory_partition(Scope.GUILD, self.guild_id or "", Visibility.PUBLIC))
        keys.extend(self.reach)
        if self.owner_private and self.owner_id:
            keys.append(memory_partition(Scope.OWNER, self.owner_id, Visibility.PRIVATE))
        return tuple(dict.fromkeys(keys))

    def partitions_of(self, person_id: str) -> tuple[str, ...]:
        """The partitions about one person that this context may read (their profile, ORCH-2): their user-scope
        ones, and in the owner's own DM or console the owner's memory too, which is where everything the owner
        says there is filed (``write_scope``); without it the owner would be a stranger in their own DM."""
        prefixes = (f"{Scope.USER.value}|{person_id}|",) + (
            (f"{Scope.OWNER.value}|{person_id}|",) if person_id == self.owner_id else ()
        )
        return tuple(k for k in self.memory_partitions() if k.startswith(prefixes))

    def message_partitions(self) -> tuple[str, ...]:
        return (message_partition(self.guild_id, self.speaker_id),)

    def channels(self) -> tuple[str, ...]:
        """The channels whose messages this context may read: this one, and the readable ones of its guild."""
        return tuple(
            dict.fromkeys((self.channel_id, *(() if self.is_dm else self.readable_channels)))
        )

    def to_dict(self) -> JsonObject:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, data: JsonObject) -> RecallContext:
        known = {k: v for k, v in data.items() if k in cls.__slots__}
        for name in ("participants", "reach", "readable_channels", "pointed"):
            known[name] = tuple(known.get(name) or ())
        return cls(**known)


def write_scope(ctx: RecallContext) -> WriteScope:
    """The one rule for where something said in a context is filed (tools, extraction, /remember)."""
    if ctx.owner_private:
        return WriteScope(Scope.OWNER, ctx.owner_id or ctx.speaker_id, Visibility.PRIVATE)
    if ctx.is_dm:
        return WriteScope(Scope.USER, ctx.speaker_id, Visibility.PRIVATE)
    return WriteScope(Scope.USER, ctx.speaker_id, Visibility.PUBLIC, ctx.guild_id)


def self_scope(ctx: RecallContext) -> WriteScope:
    """Where what the bot says about itself in a context is filed (ORCH-7): a server's own memory (seen only
    there), or, in a private chat, that chat's (as the person's own words there would be)."""
    if ctx.is_dm:
        return write_scope(ctx)
    return WriteScope(Scope.GUILD, ctx.guild_id or "", Visibility.PUBLIC)


def may_change(ctx: RecallContext, scope: Scope, scope_id: str) -> bool:
    """May the speaker of ``ctx`` update or delete a memory of this scope? (Visibility is checked separately.)"""
    if scope is Scope.USER:
        return scope_id == ctx.speaker_id
    if scope is Scope.GUILD:
        return ctx.admin and scope_id == ctx.guild_id
    return ctx.owner_private and scope_id == ctx.owner_id


def memory_partition(
    scope: Scope, scope_id: str, visibility: Visibility, guild_id: str | None = None
) -> str:
    """Guild memory is always public within its guild; owner memory is always private to the owner."""
    if scope is Scope.GUILD:
        return f"{scope.value}|{scope_id}|{Visibility.PUBLIC.value}"
    if scope is Scope.OWNER:
        return f"{scope.value}|{scope_id}|{Visibility.PRIVATE.value}"
    return user_partition(scope_id, visibility, guild_id)


def user_partition(person_id: str, visibility: Visibility, guild_id: str | None = None) -> str:
    if visibility is Visibility.PUBLIC and guild_id:
        return f"{Scope.USER.value}|{person_id}|{visibility.value}|{guild_id}"
    return f"{Scope.USER.value}|{person_id}|{visibility.value}"


def place_key(platform: str, place_id: str) -> str:
    """A server's or group's id as the store keys it (``guild_id`` of messages, memories,
    reminders...): namespaced by platform, so a Discord guild and a Telegram group never share
    memory. The adapters report the platform's own id ("7001", "-100777"); a key stays a key."""
    if not platform or not place_id:
        raise InvalidInput("a place needs its platform and its id")
    return place_id if place_id.startswith(f"{platform}:") else f"{platform}:{place_id}"


def message_partition(guild_id: str | None, dm_person_id: str) -> str:
    return f"guild|{guild_id}" if guild_id else f"dm|{dm_person_id}"


def placeholders(values: tuple[Any, ...] | list[Any]) -> str:
    """``?,?,?`` for an ``IN (...)`` list. None for no values: ``x IN (NULL)`` is never true, as SQLite's ``IN ()``, which
    PostgreSQL refuses as a syntax error. (``NOT IN`` an empty list would differ: never true; no caller passes one.)"""
    return ",".join("?" * len(values)) or "NULL"


def partition_token(key: str) -> str:
    """One opaque FTS token per partition, so FTS can filter by scope inside MATCH (no phrase query)."""
    return "k" + hashlib.sha1(key.encode()).hexdigest()[:15]


@dataclass(frozen=True, slots=True)
class Said:
    """One incoming message as the store keeps it, resolved by the caller: who (``ctx.speaker_id``), where
    (``ctx``'s platform, channel and guild, ``channel_key``), under which name, and what."""

    ctx: RecallContext
    channel_key: str  # "<platform>:<channel id>"
    author_name: str
    text: str  # cleaned (``memory.storage.messages.clean_text``); "" for nothing readable
    platform_message_id: str | None = None  # the platform's id, which recognises a re-delivery
    modality: str = "text"  # "voice" for a transcribed utterance

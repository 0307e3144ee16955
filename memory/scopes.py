"""Who may see what (SEC-1), decided once per recall and enforced inside retrieval.

Every memory row and every message row carries a *partition key*. A ``RecallContext`` turns into the
exact set of partition keys it may read; vector search, FTS and plain SQL all filter on that set, so a
query can never return a row from a partition the context may not see.

    memory partitions   user|<person>|public    portable facts about a person, seen wherever they take part
                        user|<person>|private   learned in a DM: only in a DM with that person
                        guild|<guild>|public    community context: only in that guild
                        owner|<owner>|private   the operator's own memory: only in owner-private contexts
    message partitions  guild|<guild>           messages of a guild's channels: only in that guild
                        dm|<person>             a DM's messages: only in a DM with that person
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidInput
from .models import Scope, Visibility


@dataclass(frozen=True, slots=True)
class RecallContext:
    """The conversation a recall is made for. Built by the caller from the incoming event, never by the model.

    ``guild_id`` is None in a DM. ``participants`` are person ids whose public user-scope memories may
    surface (the speaker is always one of them). ``owner_private`` is True only in a DM with the
    configured owner, or on the operator's own console/dashboard.
    """

    platform: str
    speaker_id: str
    channel_id: str
    guild_id: str | None = None
    participants: tuple[str, ...] = ()
    is_dm: bool = False
    owner_private: bool = False
    owner_id: str | None = None

    def __post_init__(self) -> None:
        if not self.speaker_id:
            raise InvalidInput("a recall context needs a speaker")
        if self.is_dm == (self.guild_id is not None):
            raise InvalidInput("a context is either a DM (no guild) or in a guild, not both")
        if self.owner_private and not (self.owner_id and self.is_dm and self.speaker_id == self.owner_id):
            raise InvalidInput("an owner-private context is a DM (or console) of the owner with the owner")

    @property
    def people(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.speaker_id, *self.participants)))

    def memory_partitions(self) -> tuple[str, ...]:
        keys = [memory_partition(Scope.USER, p, Visibility.PUBLIC) for p in self.people]
        if self.is_dm:
            keys.append(memory_partition(Scope.USER, self.speaker_id, Visibility.PRIVATE))
        else:
            keys.append(memory_partition(Scope.GUILD, self.guild_id or "", Visibility.PUBLIC))
        if self.owner_private and self.owner_id:
            keys.append(memory_partition(Scope.OWNER, self.owner_id, Visibility.PRIVATE))
        return tuple(dict.fromkeys(keys))

    def message_partitions(self) -> tuple[str, ...]:
        return (message_partition(self.guild_id, self.speaker_id),)


def memory_partition(scope: Scope, scope_id: str, visibility: Visibility) -> str:
    """Guild memory is always public within its guild; owner memory is always private to the owner."""
    if scope is Scope.GUILD:
        visibility = Visibility.PUBLIC
    elif scope is Scope.OWNER:
        visibility = Visibility.PRIVATE
    return f"{scope.value}|{scope_id}|{visibility.value}"


def message_partition(guild_id: str | None, dm_person_id: str) -> str:
    return f"guild|{guild_id}" if guild_id else f"dm|{dm_person_id}"


def placeholders(values: tuple[str, ...] | list[str]) -> str:
    return ",".join("?" * len(values))


def partition_token(key: str) -> str:
    """One opaque FTS token per partition, so FTS can filter by scope inside MATCH (no phrase query)."""
    import hashlib

    return "k" + hashlib.sha1(key.encode()).hexdigest()[:15]

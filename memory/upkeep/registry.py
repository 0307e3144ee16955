"""Every table that can carry a person's words, declared once (SEC-3).

Forgetting and export walk this list, so a new table that holds text is either declared here or
``tests/test_registry.py`` fails (it reads the live schema). Each entry says how to find one
person's rows, or which other table's forgetting removes its rows.

    how        meaning
    owner      rows are removed by the table's owner (MemoryStore, MessageLog), which also removes the
               rows derived from them (vectors, FTS entries, tags, graph, cached embeddings)
    delete     plain delete of the person's rows
    derived    no row of its own to find: removed with the rows of ``via``
    none       holds no person's words (bookkeeping, operator settings)

Files beside the store that carry memories' words (the Markdown journals) are declared in
``FILE_REGISTRY`` and forgotten with the memories they name (``forget_files``).

``{ids}`` in a condition stands for the person's ids, ``{dms}`` for their DM partitions, ``{chats}``
for the "platform:channel" keys of the chats they spoke in (computed before anything is deleted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..scopes import message_partition, placeholders

if TYPE_CHECKING:
    from ..engine import MemoryEngine


@dataclass(frozen=True, slots=True)
class Holding:
    table: str
    how: str
    holds: str
    person: str = ""  # SQL condition on the table selecting one person's rows
    via: str = ""
    export: bool = False
    guild: str = ""  # SQL condition selecting one guild's rows (a guild purge): ``{guild}`` and that guild's ``{chats}``

    @property
    def row_key(self) -> str:
        """The column that names a row for deleting it: an owner deletes by ``rid`` (on SQLite the rowid itself; on
        PostgreSQL ``rowid`` becomes ``ctid``, which the owner's ``delete_rids`` cannot take); other rows by rowid."""
        return "rid" if self.how == "owner" else "rowid"


_PEOPLE_CHATS = "channel_key IN ({chats})"
_GUILD_CHATS = "channel_key IN ({chats}) OR json_extract(context, '$.guild_id') IN ({guild})"

REGISTRY: tuple[Holding, ...] = (
    Holding(
        "memories",
        "owner",
        "facts, preferences and events about a person: theirs, and what others said about them in a server (SEC-5)",
        "(scope IN ('user', 'owner') AND scope_id IN ({ids})) "
        "OR (subject_person_id IN ({ids}) AND scope = 'user' AND visibility = 'public')",
        export=True,
        guild="(scope = 'guild' AND scope_id IN ({guild})) OR guild_id IN ({guild})",
    ),
    Holding("memory_tags", "derived", "tags of a memory", via="memories"),
    Holding("memory_fts", "derived", "full-text index of memories (secure-delete)", via="memories"),
    Holding("memory_vec", "derived", "memory vectors", via="memories"),
    Holding("memory_entity_mentions", "derived", "which memory names which entity", via="memories"),
    Holding(
        "memory_entities",
        "derived",
        "entity names; dropped when no memory mentions them",
        via="memories",
    ),
    Holding(
        "memory_relations",
        "derived",
        "entity relations; dropped when no memory asserts them",
        via="memories",
    ),
    Holding(
        "memory_relation_sources", "derived", "which memory asserted a relation", via="memories"
    ),
    Holding("memory_links", "derived", "memory-to-memory edges", via="memories"),
    Holding("embed_cache", "derived", "cached vectors by content hash", via="memories, messages"),
    Holding(
        "messages",
        "owner",
        "what a person said (text and voice), their DMs, and the bot's replies to them",
        "author_id IN ({ids}) OR partition_key IN ({dms}) OR answers_rid IN (SELECT rid FROM messages WHERE author_id IN ({ids}))",
        export=True,
        guild="guild_id IN ({guild})",
    ),
    Holding(
        "message_fts",
        "derived",
        "full-text index of messages and their context (secure-delete)",
        via="messages",
    ),
    Holding("message_vec", "derived", "message vectors", via="messages"),
    Holding(
        "session_summaries",
        "delete",
        "summaries of sessions a person took part in or that happened in their chats",
        "EXISTS (SELECT 1 FROM json_each(participants) WHERE value IN ({ids})) OR (platform || ':' || channel_id) IN ({chats})",
        export=True,
        guild="guild_id IN ({guild}) OR (platform || ':' || channel_id) IN ({chats})",
    ),
    Holding(
        "channel_state",
        "delete",
        "a chat's rolling summary (it paraphrases everyone there; started afresh)",
        _PEOPLE_CHATS,
        guild=_GUILD_CHATS,
    ),
    Holding(
        "reflections",
        "delete",
        "audit of reflections: the excerpt read and the facts found",
        "EXISTS (SELECT 1 FROM json_each(people) WHERE value IN ({ids})) OR " + _PEOPLE_CHATS,
        export=True,
        guild=_PEOPLE_CHATS,
    ),
    Holding(
        "extraction_buffer",
        "delete",
        "messages waiting for extraction",
        "person_id IN ({ids})",
        export=True,
        guild=_GUILD_CHATS,
    ),
    Holding(
        "dead_letters",
        "delete",
        "extraction batches that kept failing",
        "person_id IN ({ids})",
        export=True,
        guild=_GUILD_CHATS,
    ),
    Holding(
        "identities",
        "delete",
        "a person's accounts and display names",
        "person_id IN ({ids})",
        export=True,
    ),
    Holding("link_codes", "delete", "pending /link codes", "person_id IN ({ids})"),
    Holding(
        "link_failures",
        "delete",
        "failed /link attempts of a person's accounts",
        "(platform || ':' || platform_user_id) IN (SELECT platform || ':' || platform_user_id FROM identities WHERE person_id IN ({ids}))",
    ),
    Holding(
        "rate_windows",
        "delete",
        "when a person's accounts were last answered, for the shared rate limit (OPS-5): ids and times, never words",
        "account IN ({ids}) OR account IN (SELECT platform || ':' || platform_user_id FROM identities WHERE person_id IN ({ids}))",
    ),
    Holding(
        "person_settings",
        "delete",
        "a person's choices (/share, /privacy, /timezone)",
        "person_id IN ({ids})",
        export=True,
    ),
    Holding(
        "dashboard_audit",
        "delete",
        "changes made through the dashboard: ids, field names and counts, never a memory's words (memory.storage.audit); "
        "who changed a place's persona, and when, outlives that admin's /forget everything (no words are in it)",
        "person_id IN ({ids}) AND action NOT IN ('persona.set', 'persona.reset')",
        export=True,
    ),
    Holding(
        "daily_reflections",
        "delete",
        "which chat's day the daily reflection read (chat keys and dates only; a DM's names its person)",
        "partition_key IN ({dms})",
        guild="channel_key IN ({chats})",
    ),
    Holding(
        "bulletins",
        "delete",
        "briefings paraphrasing a scope's memories (memory.upkeep.bulletin); a memory's deletion drops them by trigger",
        "scope_id IN ({ids}) OR EXISTS (SELECT 1 FROM json_each(people) WHERE value IN ({ids}))",
        guild="scope = 'guild' AND scope_id IN ({guild})",
    ),
    Holding(
        "bulletin_partitions",
        "derived",
        "the memory partitions a bulletin was built from",
        via="bulletins",
    ),
    Holding(
        "ingest_files",
        "delete",
        "which files were ingested into whose memory (paths and hashes, never the words)",
        "scope_id IN ({ids})",
        guild="scope = 'guild' AND scope_id IN ({guild})",
    ),
    Holding(
        "ingest_passages",
        "derived",
        "which memory each passage of an ingested file became (hashes)",
        via="memories, ingest_files",
    ),
    Holding(
        "checkin_people",
        "delete",
        "who turned check-ins on and the DM to reach them in (ids only; memory.storage.checkins)",
        "person_id IN ({ids})",
        export=True,
    ),
    Holding(
        "checkins",
        "delete",
        "planned and sent follow-ups: memory ids, dates and states, never words (a memory's deletion drops them)",
        "person_id IN ({ids})",
        export=True,
    ),
    Holding(
        "reminders",
        "delete",
        "reminders a person asked for (ORCH-13): their words, the place and when (memory.storage.reminders)",
        "person_id IN ({ids})",
        export=True,
        guild="guild_id IN ({guild})",
    ),
    Holding(
        "tombstones",
        "delete",
        "keyed hashes of forgotten facts, bound to whom they were about; never the words (memory.write.tombstones). "
        "Forgetting the whole person removes theirs: nothing of theirs is left to learn again from, and no trace "
        "of them should stay, not even a hash",
        "scope IN ('user', 'owner') AND scope_id IN ({ids})",
        guild="(scope = 'guild' AND scope_id IN ({guild})) OR guild_id IN ({guild})",
    ),
    Holding(
        "usage_ledger",
        "delete",
        "what a person's turns and jobs cost a day, per place, job kind and model (ORCH-14): counts and ids, never words. "
        "A place's own rows (no person) keep their totals when a person is forgotten (memory.storage.ledger)",
        "person_id IN ({ids})",
        export=True,
        guild="place_id IN ({guild})",
    ),
    Holding(
        "place_modes",
        "none",
        "a channel's or group's manners (ORCH-10: addressed, chime-in, all): ids and a word, nobody's",
        guild="guild_id IN ({guild})",
    ),
    Holding(
        "reply_memories",
        "derived",
        "which memories a reply used (ORCH-12): ids only",
        via="memories, messages",
    ),
    Holding(
        "reply_posts", "derived", "the platform ids a reply was posted as (ORCH-12)", via="messages"
    ),
    Holding(
        "reply_reactions",
        "delete",
        "who reacted to a reply of the bot, with which emoji (ORCH-12): ids only, one vote per person per reply",
        "person_id IN ({ids})",
        export=True,
    ),
    Holding(
        "memory_feedback",
        "derived",
        "how a memory was received in reactions, and its recheck mark",
        via="memories",
    ),
    Holding(
        "privacy_places",
        "none",
        "servers and groups where remembering is off (/privacy server off): ids only",
    ),
    Holding(
        "place_personas",
        "delete",
        "a server's or group's own persona text, in the words of the admin who set it (memory.storage.persona)",
        "set_by IN ({ids})",
        export=True,
        guild="guild_id IN ({guild})",
    ),
    Holding(
        "job_claims",
        "none",
        "which process is doing which background job, for minutes (job keys: chat keys, days, row ids; never words). "
        "Deleted with the job's write; a dead process's claim is swept a day after it expired (memory.storage.claims)",
    ),
    Holding(
        "place_departures",
        "none",
        "servers and groups the bot was removed from, purged after a grace period (memory.upkeep.retention): ids and times",
    ),
    Holding("settings", "none", "the operator's recall settings and store bookkeeping"),
    Holding("schema_version", "none", "migration bookkeeping"),
)

BY_TABLE = {h.table: h for h in REGISTRY}


@dataclass(frozen=True, slots=True)
class FileHolder:
    """Files outside the database that carry memories' words (derived data, forgotten with the memories).

    ``keeper`` is the engine attribute that owns them (None when switched off); forgetting calls its
    ``forget(memory_ids)`` after the rows are gone, and the store tells it of every delete as it happens.
    """

    name: str
    where: str
    holds: str
    keeper: str
    via: str = "memories"


FILE_REGISTRY: tuple[FileHolder, ...] = (
    FileHolder(
        "journals",
        "<journal dir>/<scope>/YYYY-MM-DD.md",
        "a line per memory stored that day: its words and id",
        "journals",
    ),
    FileHolder(
        "snapshots",
        "<journal dir>/<scope>/MEMORY.md",
        "the scope's live memories, regenerated from the database",
        "journals",
    ),
)


def forget_files(engine: MemoryEngine, memory_ids: list[str]) -> int:
    """Every file holder drops what it holds of these (already deleted) memories; returns the files changed."""
    keepers = {h.keeper: getattr(engine, h.keeper, None) for h in FILE_REGISTRY}
    return sum(
        keeper.forget(memory_ids)
        for keeper in keepers.values()
        if keeper is not None and memory_ids
    )


def holder_of(table: str) -> Holding | None:
    """The entry for a table, or for the virtual table it is a shadow of (memory_fts_data -> memory_fts)."""
    if table in BY_TABLE:
        return BY_TABLE[table]
    owners = [h for h in REGISTRY if table.startswith(h.table + "_")]
    return max(owners, key=lambda h: len(h.table)) if owners else None


@dataclass(frozen=True, slots=True)
class PersonKeys:
    """The values a registry condition is expanded with."""

    ids: tuple[str, ...]
    dms: tuple[str, ...]
    chats: tuple[str, ...]

    def expand(self, condition: str) -> tuple[str, tuple[Any, ...]]:
        """The condition with its lists as placeholders, and the parameters in the order they appear."""
        params: list[Any] = []

        def listed(match: re.Match[str]) -> str:
            # an impossible value keeps "IN ()" valid
            values = getattr(self, match.group(1)) or ("\x00",)
            params.extend(values)
            return placeholders(values)

        return re.sub(r"\{(ids|dms|chats)\}", listed, condition), tuple(params)


def person_keys(engine: MemoryEngine, person_ids: list[str]) -> PersonKeys:
    if not person_ids or not all(person_ids):
        raise InvalidInput("name at least one person id")
    ids = tuple(dict.fromkeys(person_ids))
    dms = tuple(message_partition(None, p) for p in ids)
    chats = engine.messages.chats_of(list(ids), list(dms))
    return PersonKeys(ids, dms, tuple(chats))


def person_rows(
    engine: MemoryEngine, holder: Holding, keys: PersonKeys, columns: str = ""
) -> list[dict[str, Any]]:
    sql, params = keys.expand(holder.person)
    return engine.db.rows(
        f"SELECT {columns or holder.row_key + ' AS row_key'} FROM {holder.table} WHERE {sql}",
        params,
    )


# -- a whole guild (the dashboard's purge) ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GuildKeys:
    """The values a ``Holder.guild`` condition is expanded with: the guild id and the chats held in it."""

    guild: tuple[str, ...]
    chats: tuple[str, ...]

    def expand(self, condition: str) -> tuple[str, tuple[Any, ...]]:
        params: list[Any] = []

        def listed(match: re.Match[str]) -> str:
            values = getattr(self, match.group(1)) or ("\x00",)
            params.extend(values)
            return placeholders(values)

        return re.sub(r"\{(guild|chats)\}", listed, condition), tuple(params)


def guild_keys(engine: MemoryEngine, guild_id: str) -> GuildKeys:
    if not guild_id:
        raise InvalidInput("name a guild id")
    # the chats are found before anything is deleted: where its messages were said, and chats whose state names it
    chats = engine.db.execute(
        "SELECT platform || ':' || channel_id FROM messages WHERE guild_id = ? "
        "UNION SELECT channel_key FROM channel_state WHERE json_extract(context, '$.guild_id') = ? ORDER BY 1",
        (guild_id, guild_id),
    )
    return GuildKeys((guild_id,), tuple(c for (c,) in chats))


def guild_rows(engine: MemoryEngine, holder: Holding, keys: GuildKeys) -> list[int]:
    sql, params = keys.expand(holder.guild)
    return [
        r
        for (r,) in engine.db.execute(
            f"SELECT {holder.row_key} FROM {holder.table} WHERE {sql}", params
        )
    ]

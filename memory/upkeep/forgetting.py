"""Forgetting (SEC-3, MEM-5): a memory with everything derived from it, or everything about a person.

    forget_memory   the memory and its history (superseded versions of the same fact, merged
                    originals; never a distinct fact chained to it: ``memory.write.versions``), the
                    messages it
                    was learned from (by their stored ids) and the bot's replies to them, the check-ins sent
                    about it (its planned ones go by the cascade), their pending extractions, and the
                    summaries and reflection audits of the chats they were in; each removed memory leaves a
                    tombstone (``memory.write.tombstones``, no words) so that what remains does not teach it again
    forget_person   every row the registry (``memory.upkeep.registry``) finds for the person's ids
    forget_everything  forget_person, a /privacy off kept on each of the person's accounts (SEC-5)
    forget_file     forget_memory of everything learned from an ingested file, then its ingest rows
    veto            forget_memory of one memory a person names from the list of what is kept about them
    forget_guild    every row the registry finds for one guild: its lore, what people said there and was
                    learned there, its messages, and the summaries, states, buffers and audits of its chats

The Markdown journals (``memory.upkeep.registry.FILE_REGISTRY``) lose the forgotten memories' lines as the rows
are deleted, and a last sweep (``forget_files``) finds any line left elsewhere. All end with
``Database.scrub``: index samples emptied and the WAL checkpointed, so the forgotten words are gone from
the files, not only from the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..engine import MemoryEngine
from ..errors import NotFound
from ..models import Erased, Memory
from ..scopes import placeholders
from ..write.sources import forget_chat_summaries
from .exports import forget_exports
from .registry import REGISTRY, forget_files, guild_keys, guild_rows, person_keys, person_rows


@dataclass(slots=True)
class Forgotten:
    """What a forget removed; ``contents`` are the forgotten memories' texts (for the reply that confirms it)."""

    memories: list[str] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)
    messages: int = 0

    def erased(self) -> Erased:
        """The frozen value the face returns."""
        return Erased(tuple(self.memories), tuple(self.contents), self.messages)


def forget_memory(
    engine: MemoryEngine, memory_id: str, *, asked_in: tuple[str, str] | None = None
) -> Forgotten:
    """Forget one memory completely; ``asked_in`` is the (platform, channel) where forgetting was asked."""
    root = engine.memory_rows.get(memory_id)
    rows = engine.memory_rows.by_rids(engine.memories.versions([root.rid]))
    done = Forgotten(contents=[root.content])
    # first: a forget cut short must still not be learned back
    engine.memories.tombstones.bury(rows)
    # read before the cascade drops their rows
    checkins = engine.checkins.sent_messages([m.id for m in rows])
    done.memories = engine.memories.delete_rids([m.rid for m in rows])
    chats = {asked_in} if asked_in else set()
    chats |= {
        (m.provenance.platform, m.provenance.channel_id)
        for m in rows
        if m.provenance.platform and m.provenance.channel_id
    }
    done.messages = _forget_sources(engine, rows) + engine.messages.delete_rids(
        engine.messages.rids_by_id(checkins)
    )
    forget_chat_summaries(engine, {f"{p}:{c}" for p, c in chats})
    forget_files(engine, done.memories)
    engine.db.scrub()
    return done


def forget_everything(engine: MemoryEngine, person_ids: list[str]) -> dict[str, int]:
    """``forget_person``, except that someone who said /privacy off stays not remembered, on every account they had
    (``Privacy.stopped_accounts``): their choice is the one thing about them that must outlive it (SEC-5)."""
    stopped = engine.privacy.stopped_accounts(person_ids)
    counts = forget_person(engine, person_ids)
    for person in stopped:
        engine.people.set_remembered(person, False)
    if exported := forget_exports(engine, person_ids):  # the console's /export files: copies
        counts["export files"] = exported
    return counts


def veto(
    engine: MemoryEngine,
    person_id: str,
    short_id: str,
    *,
    asked_in: tuple[str, str] | None = None,
    owner: bool = False,
) -> Forgotten | None:
    """Forget one memory of the person's list (``Privacy.listed``) with the full cascade; None, and nothing changed,
    unless ``short_id`` names exactly one."""
    memory_id = engine.privacy.listed(person_id, short_id, owner=owner)
    return None if memory_id is None else forget_memory(engine, memory_id, asked_in=asked_in)


def _forget_sources(engine: MemoryEngine, memories: list[Memory]) -> int:
    """The messages the memories were learned from, the bot's replies to them, and their buffered copies."""
    rids: list[int] = []
    for m in memories:
        prov = m.provenance
        rids += engine.messages.rids_by_id(list(prov.sources))
        if not prov.sources and prov.platform and prov.channel_id and prov.platform != "console":
            # Rows written before stored ids were kept name platform ids, unique only within a chat.
            rids += engine.messages.rids_by_platform_id(
                prov.platform, prov.channel_id, list(prov.message_ids)
            )
    rids += engine.messages.replies_to(rids)
    return engine.messages.delete_rids(sorted(set(rids)))


# -- a file ingested (WRITE-7) ------------------------------------------------------------------------
def forget_file(engine: MemoryEngine, path: Path) -> dict[str, int]:
    """Everything learned from a file, in every memory it went into: each memory forgotten with its history
    (``forget_memory``: tombstones, journals, the bytes scrubbed), then the file's own rows. Ingesting the
    file again starts over, and the tombstones keep what was forgotten from being learned back."""
    files = engine.ingest_log.files_at(str(path.expanduser().resolve()))
    ids = engine.ingest_log.memory_ids(files)
    forgotten = 0
    for memory_id in ids:
        try:
            forgotten += len(forget_memory(engine, memory_id).memories)
        except (
            NotFound
        ):  # already gone (forgotten alone, or with an earlier version of the same fact)
            continue
    engine.ingest_log.drop(files)
    return {"files": len(files), "memories": forgotten}


# -- a whole person -------------------------------------------------------------------------------------
def forget_person(engine: MemoryEngine, person_ids: list[str]) -> dict[str, int]:
    """Delete everything the registry finds about a person (all their linked ids): no undo copy is kept."""
    keys = person_keys(engine, person_ids)
    found = {
        h.table: [r["row_key"] for r in person_rows(engine, h, keys)] for h in REGISTRY if h.person
    }
    return _forget_found(engine, found)


# -- a whole guild ---------------------------------------------------------------------------------------
def forget_guild(engine: MemoryEngine, guild_id: str) -> dict[str, int]:
    """Delete everything the registry finds for a guild (its ``Holding.guild`` conditions): no undo
    copy is kept."""
    keys = guild_keys(engine, guild_id)
    found = {h.table: guild_rows(engine, h, keys) for h in REGISTRY if h.guild}
    return _forget_found(engine, found)


def _forget_found(engine: MemoryEngine, found: dict[str, list[int]]) -> dict[str, int]:
    """Delete the rows the registry found (memories with their lineage, messages, then the rest), the journal
    lines of the memories, and scrub the file."""
    memory_rids = engine.memory_rows.lineage(found.pop("memories"))
    forgotten = engine.memories.delete_rids(memory_rids)
    counts = {
        "memories": len(forgotten),
        "messages": engine.messages.delete_rids(found.pop("messages")),
    }
    with engine.db.transaction():
        for table, rowids in found.items():
            counts[table] = _apply(engine, table, rowids)
    forget_files(engine, forgotten)
    engine.db.scrub()
    return counts


def _apply(engine: MemoryEngine, table: str, rowids: list[int]) -> int:
    for i in range(0, len(rowids), 400):
        chunk = rowids[i : i + 400]
        engine.db.execute(f"DELETE FROM {table} WHERE rowid IN ({placeholders(chunk)})", chunk)
    return len(rowids)

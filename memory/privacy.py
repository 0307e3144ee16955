"""A person's data: export everything stored about them, or forget all of it (SEC-3)."""
from __future__ import annotations

import json
from typing import Any

from .engine import MemoryEngine
from .errors import InvalidInput
from .models import FactKind, MemoryType, NewMemory, Provenance, Scope, Source, Visibility
from .scopes import message_partition, placeholders


def _memory_rows(engine: MemoryEngine, person_ids: list[str]) -> list[dict[str, Any]]:
    marks = placeholders(person_ids)
    return engine.db.rows(
        f"SELECT * FROM memories WHERE scope IN ('user', 'owner') AND scope_id IN ({marks}) ORDER BY created_at", person_ids
    )


def _message_rows(engine: MemoryEngine, person_ids: list[str]) -> list[dict[str, Any]]:
    dms = [message_partition(None, p) for p in person_ids]
    return engine.db.rows(
        f"SELECT * FROM messages WHERE author_id IN ({placeholders(person_ids)}) OR partition_key IN ({placeholders(dms)}) ORDER BY created_at",
        (*person_ids, *dms),
    )


def _summary_rows(engine: MemoryEngine, person_ids: list[str]) -> list[dict[str, Any]]:
    rows = engine.db.rows("SELECT * FROM session_summaries ORDER BY ended_at")
    return [r for r in rows if set(json.loads(r["participants"])) & set(person_ids)]


def export_person(engine: MemoryEngine, person_ids: list[str]) -> dict[str, Any]:
    """Everything stored about a person (all their linked ids), as plain JSON-ready data."""
    if not person_ids:
        raise InvalidInput("name at least one person id")
    memories = [dict(r, tags=[t for t in r["tags"].split(",") if t], provenance=json.loads(r["provenance"]))
                for r in _memory_rows(engine, person_ids)]
    for row in memories:
        for key in ("rid", "partition_key", "ptoken", "content_hash"):
            row.pop(key, None)
    messages = [{k: v for k, v in r.items() if k not in ("rid", "partition_key", "ptoken", "content_hash")}
                for r in _message_rows(engine, person_ids)]
    summaries = [dict(r, participants=json.loads(r["participants"])) for r in _summary_rows(engine, person_ids)]
    return {"format": "companion-export/1", "person_ids": person_ids, "exported_at": engine.clock.now(),
            "memories": memories, "messages": messages, "session_summaries": summaries}


def forget_person(engine: MemoryEngine, person_ids: list[str]) -> dict[str, int]:
    """Delete every memory, message and session summary about a person, with vectors, FTS rows and graph."""
    if not person_ids:
        raise InvalidInput("name at least one person id")
    memory_rids = [r["rid"] for r in _memory_rows(engine, person_ids)]
    removed = engine.memories.delete_rids(memory_rids)
    messages = _message_rows(engine, person_ids)
    engine.messages.delete_rids([r["rid"] for r in messages], [r["content_hash"] for r in messages])
    summaries = [r["id"] for r in _summary_rows(engine, person_ids)]
    with engine.db.transaction():
        if summaries:
            engine.db.execute(f"DELETE FROM session_summaries WHERE id IN ({placeholders(summaries)})", summaries)
        engine.db.execute(f"DELETE FROM extraction_buffer WHERE person_id IN ({placeholders(person_ids)})", person_ids)
        buffered = engine.db.con.changes()
    return {"memories": len(removed), "messages": len(messages), "session_summaries": len(summaries), "buffered": buffered}


def import_memories(engine: MemoryEngine, data: dict[str, Any] | list[dict[str, Any]]) -> dict[str, int]:
    """Load memories from an export (or a plain list of memory objects); every row goes through the write rules."""
    items = data.get("memories", []) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InvalidInput("expected a list of memories or an export object with a 'memories' list")
    counts = {"stored": 0, "duplicate": 0, "rejected": 0}
    for item in items:
        try:
            result = engine.memories.add(_new_memory(item))
            counts[result.status] += 1
        except (InvalidInput, KeyError, ValueError, TypeError):
            counts["rejected"] += 1
    return counts


def _new_memory(item: dict[str, Any]) -> NewMemory:
    prov = item.get("provenance") or {}
    return NewMemory(
        content=item["content"], subject=item.get("subject") or "", scope=Scope(item["scope"]), scope_id=str(item["scope_id"]),
        type=MemoryType(item.get("type", "semantic")), kind=FactKind(item.get("kind", "other")),
        visibility=Visibility(item.get("visibility", "public")), tags=tuple(item.get("tags") or ()),
        source=Source(item.get("source", "user-stated")), importance=min(10.0, max(1.0, float(item.get("importance", 5)))), ttl=item.get("ttl"),
        provenance=Provenance(**{**prov, "message_ids": tuple(prov.get("message_ids") or ())}) if prov else Provenance(),
    )


def forget_sources(engine: MemoryEngine, provenances: list[dict[str, Any]], *, asked_in: tuple[str, str] | None = None) -> None:
    """The messages a forgotten memory was learned from go too, and so do their pending extractions and
    the summaries of those chats (and of the chat where forgetting was asked, ``(platform, channel_id)``).

    Platform message ids are only unique within a chat (Telegram numbers each chat from 1), so the
    lookup is always by platform, channel and id together.
    """
    chats = {asked_in} if asked_in else set()
    for prov in provenances:
        ids, platform, channel = prov.get("message_ids") or [], prov.get("platform"), prov.get("channel_id")
        if platform and channel:
            chats.add((platform, channel))
        if not (ids and platform and channel):
            continue
        rows = engine.db.rows(
            f"SELECT rid, content_hash FROM messages WHERE platform = ? AND channel_id = ? AND platform_message_id IN ({placeholders(ids)})",
            (platform, channel, *ids))
        engine.messages.delete_rids([r["rid"] for r in rows], [r["content_hash"] for r in rows])
        engine.db.execute(
            f"DELETE FROM extraction_buffer WHERE channel_key = ? AND message_id IN ({placeholders(ids)})", (f"{platform}:{channel}", *ids))
    _forget_summaries(engine, chats)


def _forget_summaries(engine: MemoryEngine, chats: set[tuple[str, str]]) -> None:
    """Summaries paraphrase whole conversations, so one written where a forgotten memory was said may
    repeat it: the session summaries and the rolling summary of those chats go (their turns stay)."""
    for platform, channel in chats:
        engine.db.execute("DELETE FROM session_summaries WHERE platform = ? AND channel_id = ?", (platform, channel))
        engine.db.execute("UPDATE channel_state SET rolling_summary = '' WHERE channel_key = ?", (f"{platform}:{channel}",))

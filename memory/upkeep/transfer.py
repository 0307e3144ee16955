"""A person's data out and back in: export everything the registry finds (SEC-3), import memories.

An export lists every registered table that can carry the person's words, table by table. Import
puts memories back through the same write rules as any other write (safety, dedup, supersession).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..engine import MemoryEngine
from ..errors import InvalidInput
from ..models import (
    FactKind,
    JsonObject,
    MemoryType,
    NewMemory,
    Provenance,
    Scope,
    Source,
    Visibility,
)
from ..storage.messages import NewMessage
from .registry import REGISTRY, person_keys, person_rows


def export_person(engine: MemoryEngine, person_ids: list[str]) -> JsonObject:
    """Everything stored about a person, table by table as the registry lists it, as JSON-ready data."""
    keys = person_keys(engine, person_ids)
    data: JsonObject = {
        "format": "companion-export/3",
        "person_ids": list(keys.ids),
        "exported_at": iso_with_offset(engine.clock.now()),
    }
    for holder in REGISTRY:
        if holder.export:
            data[holder.table] = [
                _public(holder.table, row) for row in person_rows(engine, holder, keys, "*")
            ]
    return data


_INTERNAL = (
    "rid",
    "partition_key",
    "ptoken",
    "content_hash",
    "prev_rid",
    "answers_rid",
    "message_rid",
)
_JSON_COLUMNS = {
    "memories": ("provenance",),
    "session_summaries": ("participants",),
    "reflections": ("facts", "stored_ids", "people"),
    "extraction_buffer": ("context",),
    "dead_letters": ("context",),
}


def _public(table: str, row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in _INTERNAL}
    for key in _JSON_COLUMNS.get(table, ()):
        out[key] = json.loads(out[key]) if out.get(key) else out.get(key)
    if table == "memories":
        out["tags"] = [t for t in (out.get("tags") or "").split(",") if t]
    return {
        key: iso_with_offset(value) if _is_time(key, value) else value for key, value in out.items()
    }


def iso_with_offset(seconds: float) -> str:
    """A stored time (seconds since the epoch, UTC) as the dashboard's API writes it: ISO 8601 with the offset."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _is_time(key: str, value: Any) -> bool:
    """Times are the ``*_at`` columns (created_at, updated_at, last_accessed_at, ended_at...), stored as seconds."""
    return key.endswith("_at") and isinstance(value, (int, float)) and not isinstance(value, bool)


def _seconds(row: Any) -> Any:
    """An imported row with its ISO times back in seconds (an export before format 3 already has seconds)."""
    if not isinstance(row, dict):
        return row
    return {
        k: _from_iso(v) if k.endswith("_at") and isinstance(v, str) else v for k, v in row.items()
    }


def _from_iso(text: str) -> float | str:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return (
            text  # left as written: that row is then refused, with its reason, and the others go in
        )


def import_memories(engine: MemoryEngine, data: object) -> JsonObject:
    """Load an export (or a plain list of memory objects) back. Memories go through the write rules; an
    export's messages and session summaries come back too. Every rejected row is counted with its reason."""
    items, messages, summaries = _sections(data)
    counts: JsonObject = {
        "stored": 0,
        "duplicate": 0,
        "rejected": 0,
        "messages": 0,
        "session_summaries": 0,
        "reasons": [],
    }
    for n, item in enumerate(items, start=1):
        try:
            counts[engine.memories.add(_new_memory(item)).status] += 1
        except (InvalidInput, KeyError, ValueError, TypeError, AttributeError) as exc:
            counts["rejected"] += 1
            counts["reasons"].append(f"memory {n}: {_reason(exc)}")
    owner = str((data.get("person_ids") or [""])[0]) if isinstance(data, dict) else ""
    counts["messages"] = _import_messages(engine, messages, owner, counts["reasons"])
    counts["session_summaries"] = _import_summaries(engine, summaries, counts["reasons"])
    return counts


def _sections(data: Any) -> tuple[list[Any], list[Any], list[Any]]:
    if isinstance(data, list):
        return data, [], []
    if not isinstance(data, dict) or not isinstance(data.get("memories"), list):
        raise InvalidInput(
            "not a companion export: expected a JSON list of memories, or an object with a 'memories' list"
        )
    lists = [data.get(k) or [] for k in ("messages", "session_summaries")]
    if not all(isinstance(v, list) for v in lists):
        raise InvalidInput(
            "not a companion export: 'messages' and 'session_summaries' must be lists"
        )
    return data["memories"], [_seconds(r) for r in lists[0]], [_seconds(r) for r in lists[1]]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def _new_memory(item: dict[str, Any]) -> NewMemory:
    if not isinstance(item, dict):
        raise InvalidInput("not an object")
    return NewMemory(
        content=item["content"],
        subject=item.get("subject") or "",
        scope=Scope(item["scope"]),
        scope_id=str(item["scope_id"]),
        type=MemoryType(item.get("type", "semantic")),
        kind=FactKind(item.get("kind", "other")),
        visibility=Visibility(item.get("visibility", "public")),
        tags=tuple(item.get("tags") or ()),
        source=Source(item.get("source", "user-stated")),
        importance=min(10.0, max(1.0, float(item.get("importance", 5)))),
        ttl=item.get("ttl"),
        provenance=Provenance.from_dict(item.get("provenance") or {}),
        guild_id=item.get("guild_id"),
    )


def _import_messages(engine: MemoryEngine, items: list[Any], owner: str, reasons: list[str]) -> int:
    """Messages already in the store (same id) are skipped, so importing an export twice adds nothing."""
    new = []
    for n, item in enumerate(items, start=1):
        try:
            if not engine.messages.rids_by_id([str(item["id"])]):
                new.append(_new_message(item, owner))
        except (KeyError, TypeError, ValueError) as exc:
            reasons.append(f"message {n}: {_reason(exc)}")
    added = 0
    for message in new:  # one by one: a bad row must not cost the others
        try:
            engine.messages.add_many([message])
            added += 1
        except InvalidInput as exc:
            reasons.append(f"message {message.id}: {exc}")
    return added


def _new_message(item: dict[str, Any], owner: str) -> NewMessage:
    """An exported message (a JSON object of the file, times in seconds) as the message it was."""
    guild_id = item.get("guild_id")
    author_id, role = str(item["author_id"]), item.get("role", "user")
    return NewMessage(
        platform=item["platform"],
        channel_id=str(item["channel_id"]),
        author_id=author_id,
        content=item["content"],
        guild_id=guild_id,
        author_name=item.get("author_name") or "",
        role=role,
        modality=item.get("modality", "text"),
        platform_message_id=item.get("platform_message_id"),
        dm_person_id=None if guild_id else (author_id if role == "user" else owner),
        created_at=float(item["created_at"]),
        id=str(item["id"]),
    )


def _import_summaries(engine: MemoryEngine, rows: list[Any], reasons: list[str]) -> int:
    done, summaries = 0, engine.summaries
    for n, row in enumerate(rows, start=1):
        try:
            done += bool(summaries.restore(row))
        except (KeyError, TypeError, ValueError) as exc:
            reasons.append(f"session summary {n}: {_reason(exc)}")
    return done

"""Typed rows to the JSON the page reads (the contract's shapes), and the query-string parsers."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any

from memory import AuditEntry, InvalidInput, Person, Reflection
from memory.models import Memory

TIERS = ((8.0, "Critical"), (6.0, "Important"), (4.0, "Useful"))


def iso(ts: float | None) -> str | None:
    """ISO 8601 in UTC ("2026-11-22T20:14:13Z"); None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def tier(importance: float) -> str:
    return next((name for floor, name in TIERS if importance >= floor), "Trivial")


def memory_json(m: Memory, **extra: Any) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "type": m.type.value,
        "kind": m.kind.value,
        "importance": m.importance,
        "tier": tier(m.importance),
        "subject": m.subject,
        "tags": list(m.tags),
        "scope": m.scope.value,
        "scope_id": m.scope_id,
        "visibility": m.visibility.value,
        "partition": m.partition_key,
        "guild_id": m.scope_id if m.scope.value == "guild" else m.guild_id,
        "created_at": iso(m.created_at),
        "updated_at": iso(m.updated_at),
        "source": m.source,
        "access_count": m.access_count,
        "provenance": m.provenance.as_dict(),
        **extra,
    }


def person_json(p: Person) -> dict[str, Any]:
    return {
        "id": p.id,
        "names": list(p.names),
        "accounts": [
            {"platform": a.platform, "user_id": a.user_id, "name": a.name} for a in p.accounts
        ],
        "memories": p.memories,
    }


def reflection_json(r: Reflection) -> dict[str, Any]:
    return {
        "id": r.id,
        "kind": r.kind,
        "started_at": iso(r.started_at),
        "finished_at": iso(r.finished_at),
        "channel_key": r.channel_key,
        "status": r.status,
        "facts": r.facts,
        "stored_ids": r.stored_ids,
        "people": r.people,
        "error": r.error,
    }


def audit_json(e: AuditEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": iso(e.at),
        "who": e.who,
        "action": e.action,
        "target": e.target,
        "detail": e.detail,
        "person_id": e.person_id,
    }


# -- query strings --------------------------------------------------------------------------------------
def int_arg(query: Any, name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}, not {value}")
    return value


def tags_arg(query: Any) -> tuple[str, ...]:
    from memory.models import normalise_tags

    return normalise_tags(query.get("tags") or "")


def enum_arg(query: Any, name: str, enum: type[Enum]) -> Any:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        return enum(raw)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InvalidInput(f"{name} must be one of {allowed}, not {raw!r}") from None

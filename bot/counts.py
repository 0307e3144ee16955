"""Counts as a person writes them: "1 call", "2 calls", "1 person", "3 people" (issue 45)."""

from __future__ import annotations

IRREGULAR = {"person": "people", "memory": "memories", "reply": "replies", "entry": "entries"}


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for exactly one; thousands separated (``1,024 tokens``)."""
    if n == 1:
        return f"1 {noun}"
    return f"{n:,} {plural or IRREGULAR.get(noun) or _regular(noun)}"


def _regular(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")

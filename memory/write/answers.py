"""A list of JSON objects out of what real models send for one (WRITE-1, ORCH-9).

A model asked for "a JSON array and nothing else" sends, depending on its size and its server: the
array; the array in a code fence, after a sentence of prose; ``{"facts": [...]}`` (what a
``response_format`` schema makes it send, since a schema's root must be an object); a single object
instead of an array; objects one per line; trailing commas; an array cut short by ``max_tokens``,
bare or in its wrapper.
All of these give their complete items here; the incomplete or non-object ones are counted, so the
caller can log how many were dropped and why. An answer with no JSON at all raises ``BadAnswer``
(the caller retries once, then logs).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
WRAPPERS = ("facts", "memories", "items", "results", "data", "candidates")
# the opening of a wrapped list: '{"facts": [' (the real 0.5B's extraction, cut short, lost all its
# facts: every answer to a response_format schema opens so)
_WRAPPED = re.compile(r'\{\s*"(?:' + "|".join(WRAPPERS) + r')"\s*:\s*\[')


class BadAnswer(ValueError):
    """The model's answer is not the JSON that was asked for."""


@dataclass(slots=True)
class Items:
    """The usable objects of an answer, and how many others were dropped, by reason."""

    items: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        return ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "none"


def json_items(text: str) -> Items:
    """The objects of the answer's JSON list (see the module docstring for every form taken)."""
    body = _unfenced(text or "")
    start = _first_json(body)
    if start < 0:
        raise BadAnswer(f"no JSON array in the answer: {(text or '')[:120]!r}")
    out = Items()
    values = _values(_TRAILING_COMMA.sub(r"\1", body[start:]), out)
    for value in values:
        _collect(value, out)
    if not out.items and not _said_empty(values):
        raise BadAnswer(
            f"invalid JSON: nothing usable in {(text or '')[:120]!r} ({out.describe()} dropped)"
        )
    return out


def _unfenced(text: str) -> str:
    """The inside of the first fence that holds JSON; the text itself when there is none."""
    for match in _FENCE.finditer(text):
        if _first_json(match.group(1)) >= 0:
            return match.group(1)
    return text


def _first_json(text: str) -> int:
    match = re.search(r"[\[{]", text)
    return match.start() if match else -1


def _values(text: str, out: Items) -> list[Any]:
    """Every top-level JSON value from the first one on; an array cut short gives its complete items."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := _skip(text, at)) < len(text) and text[at] in "[{":
        try:
            value, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            if text[at] == "[" and (partial := _partial_array(text, at + 1, out)):
                values.append(partial)
            elif (wrapped := _WRAPPED.match(text, at)) and (
                partial := _partial_array(text, wrapped.end(), out)
            ):
                values.append(partial)  # {"facts": [{...}, {... cut short: a schema's answer
            elif text[at] == "{":
                out.dropped["incomplete or invalid JSON"] += 1
            break
        values.append(value)
    return values


def _partial_array(text: str, at: int, out: Items) -> list[Any]:
    """The complete items of an array that does not parse as a whole (cut short, or one bad item)."""
    decoder, items = json.JSONDecoder(), []
    while (at := _skip(text, at)) < len(text) and text[at] != "]":
        try:
            value, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            out.dropped["incomplete or invalid JSON"] += 1
            break
        items.append(value)
    return items


def _skip(text: str, at: int) -> int:
    while at < len(text) and (text[at].isspace() or text[at] in ",;"):
        at += 1
    return at


def _collect(value: Any, out: Items) -> None:
    if isinstance(value, dict):
        inner = next((value[key] for key in WRAPPERS if isinstance(value.get(key), list)), None)
        if inner is not None:  # {"facts": [...]}
            value = inner
        elif "content" in value:  # one fact instead of a list of one
            out.items.append(value)
            return
        else:  # {} or some other object: not an answer to "a list of facts"
            out.dropped["not a fact"] += 1
            return
    if not isinstance(value, list):
        out.dropped["not an object"] += 1
        return
    for item in value:
        if isinstance(item, dict):
            out.items.append(item)
        else:
            out.dropped["not an object"] += 1


def _said_empty(values: list[Any]) -> bool:
    """``[]`` or ``{"facts": []}``: the model found nothing, which is an answer."""
    return any(
        v == [] or (isinstance(v, dict) and any(v.get(k) == [] for k in WRAPPERS)) for v in values
    )


# The schema extraction-style calls send as ``response_format`` where the server takes it (a schema's root must
# be an object: the list goes under "facts"). Fields are loose on purpose: the parser checks each one.
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "kind": {"type": "string"},
                    "speaker": {"type": "string"},
                    "lines": {"type": "array", "items": {"type": "integer"}},
                    "subject": {"type": "string"},
                    "content": {"type": "string"},
                    "importance": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "valid_from": {"type": "string"},
                    "entities": {"type": "array", "items": {"type": "object"}},
                },
                "required": ["speaker", "content"],
            },
        }
    },
    "required": ["facts"],
}


def parse_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model's answer."""
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        raise BadAnswer(f"no JSON object in the answer: {(text or '')[:120]!r}")
    data = _loads(match.group())
    if not isinstance(data, dict):
        raise BadAnswer("the answer is not a JSON object")
    return data


def parse_reflection(text: str) -> tuple[list[dict[str, Any]], str]:
    """(fact candidates, session summary) of a micro-reflection answer."""
    data = parse_object(text)
    facts = data.get("facts") or []
    summary = data.get("summary") or ""
    return (_dicts(facts) if isinstance(facts, list) else []), (
        summary if isinstance(summary, str) else ""
    )


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BadAnswer(f"invalid JSON: {exc}") from None


def _dicts(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        raise BadAnswer("not a JSON array")
    return [item for item in data if isinstance(item, dict)]

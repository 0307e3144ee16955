"""Tool schemas as short as the model needs them (ORCH-9): every tool schema is in every chat request.

pydantic's JSON schema carries what only a validator uses: a title for every field, length limits, a pattern,
"or null" for each optional field. The arguments are validated by the same pydantic models when a call comes
in (with an error that names the field), so the model is shown only names, types, enums, ranges, defaults and
descriptions: about 40% fewer tokens for the nine tools, read on every turn a server cannot cache them.
"""

from __future__ import annotations

from typing import Any

DROPPED = frozenset({"title", "minLength", "maxLength", "maxItems", "pattern"})


def compact(schema: Any) -> Any:
    """``schema`` without validator-only keys; an optional field ``anyOf [X, null]`` with default None is X."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: compact(v) for k, v in schema.items() if k not in DROPPED}
    options = out.get("anyOf")
    if (
        isinstance(options, list)
        and {"type": "null"} in options
        and "default" in out
        and out["default"] is None
    ):
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"], out["default"]
            out = {**rest[0], **out}
    return out

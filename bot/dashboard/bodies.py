"""Request bodies, validated by pydantic before any store call: unknown fields and wrong types are a 400.

Scope is not a field of an edit: ``PUT /api/memory/{id}`` can change what a memory says, never whose it
is (``extra="forbid"`` refuses ``scope``/``scope_id``). Moving a fact to someone else is a new memory
(``POST``, which the operator may file anywhere) and a forget of the old one, each in the audit trail.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from memory import Mode
from memory.models import FactKind, MemoryType, Scope, Visibility

Number = StrictInt | StrictFloat
Text = StrictStr


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NewMemoryBody(_Body):
    content: Text = Field(min_length=1, max_length=4000)
    type: MemoryType = MemoryType.SEMANTIC
    kind: FactKind = FactKind.OTHER
    scope: Scope
    scope_id: Text | None = Field(None, min_length=1, max_length=200)
    guild_id: Text | None = Field(None, min_length=1, max_length=200)
    visibility: Visibility | None = None
    importance: Number = Field(5, ge=1, le=10)
    tags: list[Text] = Field(default_factory=list, max_length=20)
    subject: Text = Field("", max_length=200)


class MemoryEdit(_Body):
    content: Text | None = Field(None, min_length=1, max_length=4000)
    importance: Number | None = Field(None, ge=1, le=10)
    tags: list[Text] | None = Field(None, max_length=20)
    type: MemoryType | None = None
    kind: FactKind | None = None
    subject: Text | None = Field(None, max_length=200)


class Confirm(_Body):
    confirm: Text = Field(min_length=1, max_length=200)


class SettingsBody(_Body):
    recall: dict[str, object] = Field(default_factory=dict)
    messages: dict[str, object] | None = None  # the conversation-history knobs, same validation


class PersonaBody(_Body):
    """A place's own persona (ORCH-7); its bound and filters are the store's (``memory.storage.persona``), after normalising."""

    text: Text = Field(min_length=1, max_length=4000)


class MannersBody(_Body):
    """A channel's or group's mode (ORCH-10): addressed, chime-in or all."""

    mode: Mode


class TimezoneBody(_Body):
    zone: Text = Field(max_length=64)  # an IANA name; "" goes back to the operator's default


__all__ = [
    "Confirm",
    "MannersBody",
    "MemoryEdit",
    "NewMemoryBody",
    "PersonaBody",
    "SettingsBody",
    "StrictBool",
    "TimezoneBody",
]

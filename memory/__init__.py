"""Long-term memory: one SQLite file with sqlite-vec and FTS5.

Layering: this package knows nothing of Discord, Telegram, voice or any LLM SDK. It takes plain
data and callables (an ``Embedder`` and a ``Completer``, see ``memory.protocols``).

The map, by layer (a map for a reader, not an import rule: the arrows that are enforced are between packages):

    memory/           the face: engine, api (async facade), turns, models, scopes, errors, protocols, clock, tools
    memory/storage/   the engines (db, pg), migrations, search plumbing, one repository per table: the only SQL
    memory/recall/    reading: retrieval (ranking), recall, context (one turn's memory), when, leaks, overview
    memory/write/     the write policy (store), extraction, safety, tombstones, wording, ingest, passages, sources
    memory/upkeep/    maintenance, daily, bulletin, journals, reembed, forgetting, registry, transfer
    memory/jobs/      model-calling jobs in one shape (base): conversation, day, checkin, upkeep

The public face (``__all__``) is loaded on first use (``memory.MemoryEngine``), not by ``import memory``:
every ``memory.<module>`` import runs this file first, and ``companion --help`` must not pay for the
database driver, numpy and pydantic that the engine brings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import AsyncMemory, ContradictionJudge
    from .engine import MemoryEngine
    from .errors import EmbeddingError, InvalidInput, MemoryStoreError, NotFound, NotYours
    from .models import FactKind, Memory, MemoryType, NewMemory, Provenance, Scope, Visibility
    from .protocols import Completer, Embedder
    from .recall.context import MemoryContext, Recalled, RecallSnapshot
    from .recall.recall import MemoryRecall
    from .scopes import RecallContext
    from .storage.memories import MemoryQuery, MemoryRepository, RecallFilters
    from .write.store import MemoryStore, WriteResult

_HOME = {
    "AsyncMemory": "api",
    "ContradictionJudge": "api",
    "MemoryContext": "recall.context",
    "Recalled": "recall.context",
    "RecallSnapshot": "recall.context",
    "MemoryEngine": "engine",
    "EmbeddingError": "errors",
    "InvalidInput": "errors",
    "MemoryStoreError": "errors",
    "NotFound": "errors",
    "NotYours": "errors",
    "MemoryQuery": "storage.memories",
    "MemoryRepository": "storage.memories",
    "RecallFilters": "storage.memories",
    "FactKind": "models",
    "Memory": "models",
    "MemoryType": "models",
    "NewMemory": "models",
    "Provenance": "models",
    "Scope": "models",
    "Visibility": "models",
    "Completer": "protocols",
    "Embedder": "protocols",
    "MemoryRecall": "recall.recall",
    "RecallContext": "scopes",
    "MemoryStore": "write.store",
    "WriteResult": "write.store",
}

__all__ = [
    "AsyncMemory",
    "Completer",
    "ContradictionJudge",
    "Embedder",
    "EmbeddingError",
    "FactKind",
    "InvalidInput",
    "Memory",
    "MemoryContext",
    "MemoryEngine",
    "MemoryQuery",
    "MemoryRecall",
    "MemoryRepository",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryType",
    "NewMemory",
    "NotFound",
    "NotYours",
    "Provenance",
    "RecallContext",
    "RecallFilters",
    "RecallSnapshot",
    "Recalled",
    "Scope",
    "Visibility",
    "WriteResult",
]


if not TYPE_CHECKING:  # hidden from mypy, which then checks ``from memory import X`` against the imports above

    def __getattr__(name: str) -> Any:
        """``memory.X`` for a name of the public face: the face is imported on the first use of any of it."""
        if name not in _HOME:
            raise AttributeError(f"module 'memory' has no attribute {name!r}")
        from . import api, engine, errors, models, protocols, scopes
        from .recall import context, recall
        from .storage import memories
        from .write import store

        faces = (api, context, engine, errors, memories, models, protocols, recall, scopes, store)
        modules = {m.__name__.removeprefix("memory."): m for m in faces}
        return getattr(modules[_HOME[name]], name)

"""Long-term memory: one SQLite file with sqlite-vec and FTS5.

Layering: this package knows nothing of Discord, Telegram, voice or any LLM SDK. It takes plain
data and callables (an ``Embedder`` and a ``Completer``, see ``memory.protocols``).

The public face (``__all__``) is loaded on first use (``memory.MemoryEngine``), not by ``import memory``:
every ``memory.<module>`` import runs this file first, and ``companion --help`` must not pay for the
database driver, numpy and pydantic that the engine brings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import AsyncMemory, ContradictionJudge
    from .context import MemoryContext, Recalled, RecallSnapshot
    from .engine import MemoryEngine
    from .errors import EmbeddingError, InvalidInput, MemoryStoreError, NotFound, NotYours
    from .memories import MemoryQuery, MemoryRepository, RecallFilters
    from .models import FactKind, Memory, MemoryType, NewMemory, Provenance, Scope, Visibility
    from .protocols import Completer, Embedder
    from .recall import MemoryRecall
    from .scopes import RecallContext
    from .store import MemoryStore, WriteResult

_HOME = {
    "AsyncMemory": "api",
    "ContradictionJudge": "api",
    "MemoryContext": "context",
    "Recalled": "context",
    "RecallSnapshot": "context",
    "MemoryEngine": "engine",
    "EmbeddingError": "errors",
    "InvalidInput": "errors",
    "MemoryStoreError": "errors",
    "NotFound": "errors",
    "NotYours": "errors",
    "MemoryQuery": "memories",
    "MemoryRepository": "memories",
    "RecallFilters": "memories",
    "FactKind": "models",
    "Memory": "models",
    "MemoryType": "models",
    "NewMemory": "models",
    "Provenance": "models",
    "Scope": "models",
    "Visibility": "models",
    "Completer": "protocols",
    "Embedder": "protocols",
    "MemoryRecall": "recall",
    "RecallContext": "scopes",
    "MemoryStore": "store",
    "WriteResult": "store",
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


def __getattr__(name: str) -> Any:
    """``memory.X`` for a name of the public face: the face is imported on the first use of any of it."""
    if name not in _HOME:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    from . import api, context, engine, errors, memories, models, protocols, recall, scopes, store

    modules = {m.__name__.rpartition(".")[2]: m for m in (api, context, engine, errors, memories, models, protocols, recall, scopes, store)}
    return getattr(modules[_HOME[name]], name)

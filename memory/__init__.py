"""Long-term memory: one SQLite file with sqlite-vec and FTS5.

Layering: this package knows nothing of Discord, Telegram, voice or any LLM SDK. It takes plain
data and callables (an ``Embedder`` and a ``Completer``, see ``memory.protocols``).
"""

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

__all__ = [
    "AsyncMemory",
    "Completer",
    "ContradictionJudge",
    "EmbeddingError",
    "Embedder",
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

"""The callables the memory package needs from outside, as narrow Protocols.

``bot/model/client.py`` satisfies them with the openai SDK; ``memory.storage.embeddings`` ships the offline default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    @property
    def fingerprint(self) -> str:
        """provider + model (+ anything else that changes the vectors), e.g. 'onnx:all-MiniLM-L6-v2-int8'."""

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An (n, dim) float32 array, rows L2-normalised."""


class Completer(Protocol):
    """One blocking LLM completion: a system prompt and a user prompt in, text out. For the command line's
    maintenance commands (consolidation, ingest), which run outside any event loop."""

    def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str: ...


class AsyncCompleter(Protocol):
    """One LLM completion, awaited on the event loop: what a model-calling job's ``ask`` step is given
    (``memory.jobs.base``). Raises ``memory.jobs.base.NoAnswer`` when the model could not answer."""

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str: ...


@runtime_checkable
class StructuredCompleter(Protocol):
    """An ``AsyncCompleter`` that can also ask for an answer following a JSON schema (``response_format`` on an
    OpenAI-compatible server; a server that refuses it is asked in words only)."""

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str: ...

    async def structured(
        self, system: str, user: str, schema: dict[str, Any], *, temperature: float = 0.0
    ) -> str: ...

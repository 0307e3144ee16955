"""The callables the memory package needs from outside, as narrow Protocols.

``bot/llm.py`` satisfies them with the openai SDK; ``memory.storage.embeddings`` ships the offline default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

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

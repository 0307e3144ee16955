"""Composition-root helpers for the command line: Settings in, an embedder, an engine, a completer out.

Only this module (and the bot's own entry point) turns Settings into objects; everything it builds is
handed its values and never reads configuration again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memory.engine import MemoryEngine
from memory.protocols import Embedder

from .config import Settings

if TYPE_CHECKING:
    from pydantic import SecretStr


def build_embedder(settings: Settings) -> Embedder | None:
    """The configured embedding model; None when embeddings are off (recall then uses BM25 only)."""
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
        )
    return None


def open_engine(settings: Settings, embedder: Embedder | None) -> MemoryEngine:
    """The store at ``settings.db_path``; pass ``embedder=None`` for work that never embeds (and for reembed)."""
    return MemoryEngine(settings.db_path, embedder, vector_mirror=settings.vector_mirror)


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

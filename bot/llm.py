"""Everything that talks to an OpenAI-compatible server goes through the openai SDK here."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import numpy as np
import openai

from .types import StreamSink

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


class LLMError(Exception):
    """The model could not be reached or kept failing after the bounded retries (ORCH-6)."""


class ToolBox(Protocol):
    def schemas(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: str) -> str: ...


RETRYABLE = (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


class ChatClient:
    """Chat completions with a bounded tool loop, bounded retries with backoff, and optional streaming."""

    def __init__(self, base_url: str, api_key: str, model: str, *, timeout: float = 60.0, max_retries: int = 2,
                 backoff_s: float = 0.5, max_steps: int = 6, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=0)
        self.model, self.max_retries, self.backoff_s, self.max_steps, self._sleep = model, max_retries, backoff_s, max_steps, sleep

    async def complete(self, messages: list[dict[str, Any]], *, temperature: float | None = None,
                       json_mode: bool = False) -> str:
        """One completion without tools (extraction, reflection, compaction)."""
        extra = {"temperature": temperature} if temperature is not None else {}
        message = await self._create(messages, None, None, **extra)
        return message.get("content") or ""

    async def run(self, messages: list[dict[str, Any]], tools: ToolBox | None = None, stream: StreamSink | None = None) -> str:
        """The tool loop: the model may call tools up to ``max_steps`` times, then must answer in text."""
        convo = list(messages)
        for step in range(self.max_steps + 1):
            offer = tools.schemas() if tools and step < self.max_steps else None
            message = await self._create(convo, offer, stream)
            calls = message.get("tool_calls") or []
            if not calls or tools is None:
                return (message.get("content") or "").strip()
            convo.append(message)
            for call in calls:
                result = await tools.call(call["function"]["name"], call["function"].get("arguments") or "{}")
                convo.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return ""

    async def _create(self, messages, tools, stream: StreamSink | None, **extra: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"model": self.model, "messages": messages, **extra}
        if tools:
            args["tools"] = tools
        for attempt in range(self.max_retries + 1):
            try:
                if stream is not None:
                    return await self._streamed(args, stream)
                response = await self._client.chat.completions.create(**args)
                return response.choices[0].message.model_dump(exclude_none=True)
            except RETRYABLE as exc:
                if attempt >= self.max_retries:
                    raise LLMError(f"the model failed {attempt + 1} times: {type(exc).__name__}") from exc
                log.warning("LLM call failed (%s); retry %d of %d", type(exc).__name__, attempt + 1, self.max_retries)
                await self._sleep(self.backoff_s * 2 ** attempt)
            except openai.APIError as exc:
                raise LLMError(f"the model refused the request: {type(exc).__name__}") from exc
        raise AssertionError("unreachable")

    async def _streamed(self, args: dict[str, Any], sink: StreamSink) -> dict[str, Any]:
        """Streams text deltas to ``sink`` and reassembles tool calls from their fragments."""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in await self._client.chat.completions.create(**args, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                await sink(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                call["id"] = part.id or call["id"]
                if part.function and part.function.name:
                    call["function"]["name"] += part.function.name
                if part.function and part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message

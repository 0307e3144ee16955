"""A scripted chat model on 127.0.0.1, for benchmarks: zero-latency by default, or paced like a hosted model.

It speaks the OpenAI chat-completions protocol (plain and streamed), so the bot's real client (the openai
SDK) talks to it over real HTTP. By default the round trip is measured and the model's thinking is not; with
``ttft_s`` and ``tokens_per_s`` a streamed reply starts after that time to first token and then comes at that
rate, one word (with its space) per token, as a hosted small model streams (e.g. 0.3 s and 40 tokens/s).
Extraction and summary requests get answers of their kind, so background work around a session succeeds quietly.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from aiohttp import web

REPLY = "That sounds good. Tell me a little more about it."
SUMMARY = "Sam talked about a camping trip."


def answer_for(body: dict[str, Any]) -> str:
    first = (body.get("messages") or [{}])[0]
    system = (first.get("content") or "") if first.get("role") == "system" else ""
    if system.startswith("You extract"):
        return "[]"
    if system.startswith("You keep the rolling summary"):
        return SUMMARY
    return REPLY


class ScriptedModel:
    """``async with ScriptedModel() as model``: ``model.base_url`` is what the SDK needs."""

    def __init__(self, ttft_s: float = 0.0, tokens_per_s: float | None = None) -> None:
        self.ttft_s = ttft_s
        self.tokens_per_s = tokens_per_s
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> ScriptedModel:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # port 0: the one the OS chose
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests += 1
        text = answer_for(body)
        if not body.get("stream"):
            return web.json_response(_completion(body, text))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(self.ttft_s)
        for i, piece in enumerate(re.findall(r"\S+\s*", text)):
            if i and self.tokens_per_s:
                await asyncio.sleep(1 / self.tokens_per_s)
            await response.write(
                f"data: {json.dumps(_chunk(body, {'content': piece}, None))}\n\n".encode()
            )
        await response.write(
            f"data: {json.dumps(_chunk(body, {}, 'stop'))}\n\ndata: [DONE]\n\n".encode()
        )
        await response.write_eof()
        return response


def _completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "bench"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "bench",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "bench"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }

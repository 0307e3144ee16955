"""An OpenAI-compatible HTTP server for tests, driven by a reply script.

Point the real ``openai`` SDK at ``srv.base_url`` and script what the "model"
answers, so tests exercise request building, tool-call parsing, streaming,
error mapping and timeouts exactly as production does, offline.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ._base import WAIT_S, FakeServer, json_response

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"


@dataclass(frozen=True)
class ToolCall:
    """One function call the fake model makes; a str ``arguments`` goes out raw."""

    name: str
    arguments: dict | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class HTTPError:
    """Answer with this status instead of a completion (e.g. 500, 429)."""

    status: int
    body: dict | str | None = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Delay:
    """Sleep before answering with ``then`` (default responder when None)."""

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class RawAnswer:
    """Answer this body verbatim, bypassing the completion builder.

    For malformed answers: a dict or list goes out as JSON, a str or bytes as
    is, under ``content_type`` and ``status`` (200 unless told otherwise).
    """

    body: dict | list | str | bytes | None
    content_type: str = "application/json"
    status: int = 200


@dataclass(frozen=True)
class RawStream:
    """Answer a ``text/event-stream`` made of exactly these events.

    A dict event goes out as ``data: <json>``, a str event is written verbatim
    (so garbage is possible; add ``"data: [DONE]\n\n"`` yourself if wanted).
    ``cut=True`` then drops the connection without ending the body, as a
    crashed server or proxy does; otherwise the body ends cleanly. ``interval``
    seconds pass before each event (a model that trickles).
    """

    events: tuple[dict | str, ...] = ()
    cut: bool = False
    interval: float = 0.0


@dataclass(frozen=True)
class Endless:
    """A stream that never stops (a model stuck repeating itself): ``text`` every ``interval`` seconds until
    the client closes the connection, which the server records in ``closed_by_client``."""

    text: str = "and so on "
    interval: float = 0.01


@dataclass(frozen=True)
class Hang:
    """No answer at all until the client closes the connection (recorded in ``closed_by_client``)."""


@dataclass(frozen=True)
class CutShort:
    """An answer ``max_tokens`` cut off (finish_reason "length"): ``text`` as written so far, or a
    ``call`` whose arguments stop mid-way (given as a str), streamed or not as the request asks."""

    text: str = ""
    call: ToolCall | None = None


Responder = Callable[[dict[str, Any]], Any]

# What llama.cpp's server answers to a request with ``tools`` when it was started without --jinja.
LLAMA_CPP_NO_JINJA = "tools param requires --jinja flag"


def written_call(name: str, arguments: dict | str | None = None, form: str = "bare") -> str:
    """A tool call written as text, the way real models write one when their template taught them so.

    ``form``: bare, parameters (bare with "parameters"), fence, hermes, llama (``<|python_tag|>`` and
    "type": "function"), mistral (``[TOOL_CALLS]`` and a list), function (``<function=name>``).
    """
    args = arguments if arguments is not None else {}
    call = json.dumps({"name": name, "arguments": args})
    forms = {
        "bare": call,
        "parameters": json.dumps({"name": name, "parameters": args}),
        "fence": f"```json\n{call}\n```",
        "hermes": f"<tool_call>\n{call}\n</tool_call>",
        "llama": "<|python_tag|>"
        + json.dumps({"type": "function", "name": name, "parameters": args})
        + "<|eom_id|>",
        "mistral": f"[TOOL_CALLS] [{call}]",
        "function": f"<function={name}>{json.dumps(args)}</function>",
    }
    return forms[form]


class FakeOpenAI(FakeServer):
    """OpenAI-compatible chat + embeddings server recording every request."""

    def __init__(self, *, embedding_dim: int = 384, model: str = "fake-model") -> None:
        self.embedding_dim = embedding_dim
        self.model = model
        self.default: Responder | None = None
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Any] = deque()
        self._ids = 0
        # As real servers refuse: a message makes every request with ``tools`` (or ``response_format``) answer
        # ``refusal_status`` with it, e.g. llama.cpp without --jinja: 500 LLAMA_CPP_NO_JINJA.
        self.refuse_tools: str | None = None
        self.refuse_response_format: str | None = None
        self.refusal_status = 500
        self.closed_by_client: list[
            str
        ] = []  # "stream" / "request": the client hung up on an Endless or a Hang
        self._last_prompt: list[
            str
        ] = []  # the previous chat request's prompt words: the fake's prompt cache
        # Image content parts as they arrived ({"request": index of the chat request, "media_type", "data": bytes});
        # ``vision=False`` answers a request carrying one as OpenAI does for a model that cannot see (HTTP 400)
        self.images: list[dict[str, Any]] = []
        self.vision = True
        self.usage_sent: list[
            dict[str, Any]
        ] = []  # every chat answer's ``usage``, as sent (the bill a ledger must match)
        super().__init__()

    # ----------------------------------------------------------------- API --
    @property
    def base_url(self) -> str:
        """What to pass as ``AsyncOpenAI(base_url=...)``."""
        return f"{self.url}/v1"

    def script(self, *items: Any) -> None:
        """Enqueue replies, consumed one per chat request in order.

        An item is a str, a ``ToolCall`` or list of them, an ``HTTPError``, a
        ``Delay``, or (for malformed answers) a ``RawAnswer`` or ``RawStream``,
        which are sent as they are whether or not the request asked to stream.
        """
        self._script.extend(items)

    @property
    def pending(self) -> int:
        """How many scripted replies have not been consumed yet."""
        return len(self._script)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat completion requests, oldest first."""
        return [r["body"] for r in self.requests if r["path"] == CHAT_PATH]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """Bodies of the embedding requests, oldest first."""
        return [r["body"] for r in self.requests if r["path"] == EMBEDDINGS_PATH]

    def all_prompt_text(self) -> str:
        """Every message text sent in any chat request, newline-joined.

        Lets tests assert that something did (or never did) reach a prompt.
        """
        parts: list[str] = []
        for body in self.chat_requests:
            for message in body.get("messages", []):
                parts.extend(_message_texts(message))
        return "\n".join(parts)

    async def wait_for_requests(
        self, n: int, path: str = CHAT_PATH, timeout: float = WAIT_S
    ) -> None:
        """Wait until at least ``n`` requests to ``path`` arrived."""
        await self.wait_until(lambda: sum(r["path"] == path for r in self.requests) >= n, timeout)

    # -------------------------------------------------------------- routes --
    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(CHAT_PATH, self._chat)
        router.add_post(EMBEDDINGS_PATH, self._embeddings)
        router.add_get("/v1/models", self._models)

    def _record(self, path: str, body: dict[str, Any]) -> None:
        self.requests.append({"path": path, "body": body})
        self._notify()

    async def _models(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}],
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self._record(CHAT_PATH, body)
        refusal = self._refusal(body) or self._blind(body)
        if refusal is not None:
            return _error_response(refusal)
        item = await self._resolve(self._script.popleft() if self._script else None, body)
        if isinstance(item, Endless):
            return await self._endless(request, body, item)
        if isinstance(item, Hang):
            return await self._hang(request)
        if isinstance(item, HTTPError):
            return _error_response(item)
        if isinstance(item, RawAnswer):
            return _raw_response(item)
        if isinstance(item, RawStream):
            return await _raw_stream(request, item)
        if body.get("stream"):
            return await self._stream(request, body, item)
        return json_response(self._completion(body, item))

    def _refusal(self, body: dict[str, Any]) -> HTTPError | None:
        for key, message in (
            ("tools", self.refuse_tools),
            ("response_format", self.refuse_response_format),
        ):
            if message is not None and body.get(key):
                error = {"code": self.refusal_status, "message": message, "type": "server_error"}
                return HTTPError(self.refusal_status, {"error": error})
        return None

    def _blind(self, body: dict[str, Any]) -> HTTPError | None:
        """Record the request's image parts; refuse them as OpenAI does a text-only model, when ``vision`` is off."""
        index = len(self.chat_requests) - 1
        parts = [
            p
            for m in body.get("messages", [])
            if isinstance(m.get("content"), list)
            for p in m["content"]
        ]
        urls = [
            str((p.get("image_url") or {}).get("url", ""))
            for p in parts
            if p.get("type") == "image_url"
        ]
        for url in urls:
            head, _, data = url.partition(";base64,")
            self.images.append(
                {
                    "request": index,
                    "media_type": head.removeprefix("data:"),
                    "data": base64.b64decode(data),
                }
            )
        if not urls or self.vision:
            return None
        message = "Invalid content type. image_url is only supported by certain models."
        return HTTPError(
            400,
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": None,
                }
            },
        )

    async def _endless(
        self, request: web.Request, body: dict[str, Any], item: Endless
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        base = {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
        }
        try:
            while not _hung_up(request):
                choice = {"index": 0, "delta": {"content": item.text}, "finish_reason": None}
                await _sse(response, {**base, "choices": [choice]})
                await asyncio.sleep(item.interval)
        except (ConnectionError, RuntimeError):
            pass  # written to a closed connection: the client hung up
        finally:  # also when aiohttp cancels the handler of a connection the client closed
            self._hung_up_on("stream")
        return response

    async def _hang(self, request: web.Request) -> web.Response:
        try:
            while not _hung_up(request):
                await asyncio.sleep(0.01)
        finally:
            self._hung_up_on("request")
        return web.Response(status=499)

    def _hung_up_on(self, what: str) -> None:
        self.closed_by_client.append(what)
        self._notify()

    async def _resolve(self, item: Any, body: dict[str, Any]) -> Any:
        """Turn a script item into a final reply, honouring delays and the default."""
        while True:
            if item is None:
                item = self.default(body) if self.default else None
                if inspect.isawaitable(item):
                    item = await item
                item = "ok" if item is None else item
            if not isinstance(item, Delay):
                return [item] if isinstance(item, ToolCall) else item
            await asyncio.sleep(item.seconds)
            item = item.then

    # ----------------------------------------------------- completion body --
    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:06d}"

    def _tool_calls(self, calls: list[ToolCall]) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or self._next_id("call_"),
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call)},
            }
            for call in calls
        ]

    def _completion(self, body: dict[str, Any], item: Any) -> dict[str, Any]:
        if isinstance(item, CutShort):
            answer = self._completion(body, [item.call] if item.call else item.text)
            answer["choices"][0]["finish_reason"] = "length"
            return answer
        if isinstance(item, list):
            message = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": self._tool_calls(item),
            }
            finish, reply_text = "tool_calls", " ".join(_arguments(c) for c in item)
        else:
            message = {
                "role": "assistant",
                "content": str(item),
                "refusal": None,
                "tool_calls": None,
            }
            finish, reply_text = "stop", str(item)
        return {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": self._cached(body, _usage(body, reply_text)),
        }

    def _cached(self, body: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
        """A prompt cache as servers keep one: the words this prompt shares from its start with the previous
        request's are "cached" (the tools first, as OpenAI renders them, then the messages in order)."""
        words = _prompt_words(body)
        shared = 0
        for mine, theirs in zip(words, self._last_prompt, strict=False):
            if mine != theirs:
                break
            shared += 1
        self._last_prompt = words
        total = len(words)
        sent = {
            **usage,
            "prompt_tokens": total,
            "total_tokens": total + usage["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": shared},
        }
        self.usage_sent.append(sent)
        return sent

    # ----------------------------------------------------------- streaming --
    async def _stream(
        self, request: web.Request, body: dict[str, Any], item: Any
    ) -> web.StreamResponse:
        """Send the reply as SSE ``chat.completion.chunk`` events, then [DONE]."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        base = {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "system_fingerprint": None,
        }
        for delta, finish in self._deltas(item):
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            await _sse(response, {**base, "choices": [choice]})
        if (body.get("stream_options") or {}).get("include_usage"):
            reply_text = item if isinstance(item, str) else ""
            await _sse(
                response,
                {**base, "choices": [], "usage": self._cached(body, _usage(body, reply_text))},
            )
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _deltas(self, item: Any) -> list[tuple[dict[str, Any], str | None]]:
        """Split a reply into the deltas the SDK accumulates, last one finishing."""
        if isinstance(item, CutShort):
            deltas = self._deltas([item.call] if item.call else item.text)
            return [*deltas[:-1], ({}, "length")]
        if not isinstance(item, list):
            pieces = re.findall(r"\S+\s*|\s+", str(item)) or [""]
            deltas = [({"role": "assistant", "content": ""}, None)]
            deltas += [({"content": piece}, None) for piece in pieces]
            return deltas + [({}, "stop")]
        deltas = [({"role": "assistant", "content": None}, None)]
        for index, call in enumerate(self._tool_calls(item)):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            deltas.append(({"tool_calls": [head]}, None))
            for piece in _halves(call["function"]["arguments"]):
                deltas.append(
                    ({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None)
                )
        return deltas + [({}, "tool_calls")]

    # ---------------------------------------------------------- embeddings --
    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self._record(EMBEDDINGS_PATH, body)
        inputs = body.get("input", "")
        texts = [inputs] if isinstance(inputs, str) else [_as_text(x) for x in inputs]
        dim = int(body.get("dimensions") or self.embedding_dim)
        as_b64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": _b64(vec) if as_b64 else vec}
            for i, vec in enumerate(embed(t, dim) for t in texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", self.model),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


# ------------------------------------------------------------- helpers ----
def embed(text: str, dim: int = 384) -> list[float]:
    """Deterministic unit vector built by hashing the text's words into buckets.

    Texts sharing words get a higher cosine similarity, which keeps retrieval
    tests meaningful; a text without words hashes as a whole.
    """
    vec = [0.0] * dim
    tokens = re.findall(r"\w+", text.lower()) or [text]
    for token in tokens:
        digest = hashlib.sha256(token.encode()).digest()
        for k in range(0, 8, 4):
            bucket = int.from_bytes(digest[k : k + 4], "little") % dim
            vec[bucket] += 1.0 if digest[8 + k] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def _b64(vec: list[float]) -> str:
    """Base64 of little-endian float32, which is what the SDK decodes."""
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _arguments(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _halves(text: str) -> list[str]:
    """Split arguments in two so clients must concatenate streamed fragments."""
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part] or [""]


def _message_texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
    return []


def _prompt_words(body: dict[str, Any]) -> list[str]:
    words = json.dumps(body.get("tools") or []).split()
    for message in body.get("messages", []):
        words += [str(message.get("role"))] + [
            w for t in _message_texts(message) for w in t.split()
        ]
    return words


def _usage(body: dict[str, Any], reply_text: str) -> dict[str, int]:
    prompt = sum(len(t.split()) for m in body.get("messages", []) for t in _message_texts(m))
    completion = len(reply_text.split())
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _hung_up(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _error_response(error: HTTPError) -> web.Response:
    body = error.body
    if body is None:
        body = {
            "error": {
                "message": f"fake error {error.status}",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
    if isinstance(body, str):
        return web.Response(text=body, status=error.status, headers=error.headers)
    return json_response(body, status=error.status, headers=error.headers)


async def _sse(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    await response.write(f"data: {json.dumps(payload)}\n\n".encode())


def _raw_response(raw: RawAnswer) -> web.Response:
    body = raw.body
    if not isinstance(body, (str, bytes)):
        body = json.dumps(body)
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return web.Response(body=data, status=raw.status, headers={"Content-Type": raw.content_type})


async def _raw_stream(request: web.Request, raw: RawStream) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for event in raw.events:
        if raw.interval:
            await asyncio.sleep(raw.interval)
        text = event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n"
        await response.write(text.encode("utf-8", "surrogatepass"))
    if raw.cut:
        # Abort instead of write_eof: the chunked body never gets its last
        # chunk, so the client sees a connection dropped mid-answer.
        request.transport.abort()
        return response
    await response.write_eof()
    return response

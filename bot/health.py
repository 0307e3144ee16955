"""``/healthz`` and ``/metrics`` for an operator (OPS-5), on loopback, while ``companion run`` runs.

    GET /healthz   200 {"ok": true, ...} when the store answers; 503 "store unavailable" when it does not (why: the log)
    GET /metrics   Prometheus text: turns, failed turns, model latency, extraction queue depth, dead letters,
                   messages held back by the rate limit; tokens by job kind and model, turns held back by a daily
                   budget (ORCH-14)

The server is a few lines on ``asyncio.start_server`` (no web framework: it must keep answering when the
dashboard is off). It answers GET only, closes each connection after one answer, and binds loopback by
default; a container's HEALTHCHECK asks it from inside the container.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from memory import Spend

from .types import Conversation, IncomingMessage, PassThrough, Reply, StreamSink

log = logging.getLogger(__name__)
STORE_TIMEOUT_S = 5.0  # a store that does not answer SELECT 1 in this long is unhealthy


@dataclass
class Metrics:
    """Counters since start; one per bot, shared by the conversation front and the model client."""

    turns: int = 0
    failed_turns: int = 0
    rate_limited: int = 0
    model_calls: int = 0
    model_errors: int = 0
    model_seconds: float = 0.0
    model_seconds_max: float = 0.0
    started: float = field(default_factory=time.time)
    # ORCH-14: tokens the model servers reported, by (job kind, model, "prompt" | "cached" | "completion"), and the
    # turns a daily budget held back, by level ("quiet": a chime-in not made; "spent": no reply)
    tokens: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    budget_held: Counter[str] = field(default_factory=Counter)

    def model_call(self, seconds: float, failed: bool) -> None:
        self.model_calls += 1
        self.model_errors += failed
        self.model_seconds += seconds
        self.model_seconds_max = max(self.model_seconds_max, seconds)

    def spent(self, kind: str, model: str, spend: Spend) -> None:
        for part, count in (
            ("prompt", spend.prompt_tokens),
            ("cached", spend.cached_tokens),
            ("completion", spend.completion_tokens),
        ):
            self.tokens[(kind, model, part)] += count


class Counted(PassThrough):
    """A ``Conversation`` that counts answered turns and the ones that ended in the apology."""

    def __init__(self, inner: Conversation, metrics: Metrics) -> None:
        super().__init__(inner)
        self._metrics = metrics

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        self._metrics.turns += 1
        try:
            reply = await self._inner.reply(message, stream)
        except BaseException:
            self._metrics.failed_turns += 1
            raise
        self._metrics.failed_turns += reply.failed
        return reply


@dataclass(frozen=True, slots=True)
class Queues:
    """How much background work waits: messages buffered for extraction, batches parked after failing."""

    pending: int
    dead_letters: int


def render_metrics(metrics: Metrics, queues: Queues) -> str:
    rows = [
        ("companion_turns_total", "counter", "replies asked for", metrics.turns),
        (
            "companion_turn_errors_total",
            "counter",
            "replies that ended in the apology",
            metrics.failed_turns,
        ),
        (
            "companion_rate_limited_total",
            "counter",
            "messages held back by the per-person rate limit",
            metrics.rate_limited,
        ),
        ("companion_model_calls_total", "counter", "chat model calls", metrics.model_calls),
        (
            "companion_model_errors_total",
            "counter",
            "chat model calls that failed",
            metrics.model_errors,
        ),
        (
            "companion_model_seconds_total",
            "counter",
            "time spent waiting for the chat model",
            round(metrics.model_seconds, 6),
        ),
        (
            "companion_model_seconds_max",
            "gauge",
            "the slowest chat model call",
            round(metrics.model_seconds_max, 6),
        ),
        ("companion_extraction_queue", "gauge", "messages waiting for extraction", queues.pending),
        (
            "companion_dead_letters",
            "gauge",
            "extraction batches parked after failing",
            queues.dead_letters,
        ),
        (
            "companion_uptime_seconds",
            "gauge",
            "seconds since start",
            round(time.time() - metrics.started, 3),
        ),
    ]
    lines = []
    for name, kind, help_text, value in rows:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
    return "\n".join(lines + _spend_lines(metrics)) + "\n"


def _spend_lines(metrics: Metrics) -> list[str]:
    """ORCH-14's series, labelled: tokens by job kind, model and part; turns held back by a budget, by level."""
    lines = [
        "# HELP companion_tokens_total tokens the model servers reported",
        "# TYPE companion_tokens_total counter",
    ]
    for (kind, model, part), count in sorted(metrics.tokens.items()):
        lines.append(
            f"companion_tokens_total{{kind={_label(kind)},model={_label(model)},part={_label(part)}}} {count}"
        )
    lines += [
        "# HELP companion_budget_held_total turns a daily budget held back",
        "# TYPE companion_budget_held_total counter",
    ]
    lines += [
        f"companion_budget_held_total{{level={_label(level)}}} {count}"
        for level, count in sorted(metrics.budget_held.items())
    ]
    return lines


def _label(value: str) -> str:
    """A Prometheus label value: quoted, with backslashes, quotes and line breaks escaped (a model name is the operator's)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class HealthServer:
    """GET /healthz and /metrics; ``queues`` reads the store (on the memory thread) for each request."""

    def __init__(
        self, metrics: Metrics, queues: Callable[[], Awaitable[Queues]], host: str, port: int
    ) -> None:
        self.metrics, self._queues, self.host, self.port = metrics, queues, host, port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("health at http://%s:%d/healthz, metrics at /metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(reader.readline(), 5.0)
                status, kind, body = await self._answer(request.decode("latin-1").split())
            except ValueError:  # a request line past the reader's 64 kB
                status, kind, body = "414 URI Too Long", "text/plain", b"request line too long\n"
            head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        except (
            TimeoutError,
            ConnectionError,
        ):  # a client that says nothing or leaves: nothing to answer
            pass
        finally:
            writer.close()

    async def _answer(self, request: list[str]) -> tuple[str, str, bytes]:
        if len(request) < 2 or request[0] != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        path = request[1].split("?", 1)[0]
        if path not in ("/healthz", "/metrics"):
            return "404 Not Found", "text/plain", b"/healthz or /metrics\n"
        try:
            queues = await asyncio.wait_for(self._queues(), STORE_TIMEOUT_S)
        except (
            Exception
        ):  # the store is the bot's one dependency that must answer: its failure is the finding
            # The detail goes to the log only: an exception's text can name the store's path, a host or a user
            # (a PostgreSQL URL), and anything on this machine may ask /healthz (issue 31).
            log.warning("/healthz: the store does not answer", exc_info=True)
            body = {"ok": False, "problem": "store unavailable"}
            return "503 Service Unavailable", "application/json", json.dumps(body).encode()
        if path == "/metrics":
            return (
                "200 OK",
                "text/plain; version=0.0.4",
                render_metrics(self.metrics, queues).encode(),
            )
        body = {
            "ok": True,
            "turns": self.metrics.turns,
            "extraction_queue": queues.pending,
            "dead_letters": queues.dead_letters,
        }
        return "200 OK", "application/json", json.dumps(body).encode()

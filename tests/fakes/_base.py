"""Shared plumbing for the in-process fake servers.

Every fake is an aiohttp application bound to 127.0.0.1 on an ephemeral port and
started inside the test's own event loop, so the real client libraries can talk
to it over real sockets without any network access or monkeypatched transports.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

# The longest a test waits for something that must happen (a request, a sent message, a state change). Far
# beyond what a loaded machine needs (the suite ran at load 10 on two cores), and only ever spent in full when
# the behaviour is broken: tests assert what happens, never how fast.
WAIT_S = 30.0
POLL_S = 0.05  # how often wait_until reads its condition again between recordings

JSON_CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class FakeFile:
    """A file a person attaches (a photo): served by the fake's file server; ``size`` is what the platform declares
    (default: the real length), so a 30 MB file can be declared without being served."""

    name: str
    data: bytes
    content_type: str | None = "image/png"
    size: int | None = None
    gone: bool = False  # its URL answers 404 (an upload deleted before the bot fetched it)

    @property
    def declared(self) -> int:
        return len(self.data) if self.size is None else self.size


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """Answer JSON with a Content-Type of exactly ``application/json``.

    ``web.json_response`` appends ``; charset=utf-8`` and discord.py compares the
    header verbatim, so a charset suffix would make it treat bodies as text.
    """
    merged = {"Content-Type": JSON_CONTENT_TYPE, **(headers or {})}
    return web.Response(body=json.dumps(data).encode(), status=status, headers=merged)


class Waitable:
    """ "Wait until something was recorded": the recorder calls ``_notify()``, tests call ``wait_until()``."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        """Wake every waiter so it re-checks its condition."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Wait until ``predicate()`` is true, re-checking after each recording and every
        ``POLL_S`` (a predicate on the store changes with no recording here: without the poll it
        was read again only at the deadline, and passed there, 30 s late).

        Raises ``TimeoutError`` (asyncio's) instead of hanging a test forever.
        """
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout}s")
            event = self._changed
            try:
                await asyncio.wait_for(event.wait(), min(remaining, POLL_S))
            except TimeoutError:
                continue


class FakeServer(Waitable):
    """Lifecycle, URL and "wait until something was recorded" for a fake.

    Subclasses fill ``self.app`` with routes in ``_setup_routes`` and call
    ``self._notify()`` whenever they record something tests may wait for.
    """

    def __init__(self) -> None:
        super().__init__()
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self._setup_routes(self.app.router)
        self.app.on_shutdown.append(self._on_shutdown)

    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        raise NotImplementedError

    async def _on_shutdown(self, app: web.Application) -> None:
        """Hook for closing long-lived connections (websockets) before cleanup."""

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self.port is None:
            raise RuntimeError("server not started: use `async with` or await start()")
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Bind an ephemeral port; handlers are cancelled when clients hang up.

        ``handler_cancellation`` lets a scripted delay end as soon as the client
        times out, and the short shutdown timeout keeps teardown fast.
        """
        self._runner = web.AppRunner(
            self.app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Close connections and release the port; safe to call twice."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


async def read_body(request: web.Request) -> dict[str, Any]:
    """Parse a request body whether it is JSON, url-encoded or multipart.

    Query-string parameters are merged in underneath, because the Telegram Bot
    API (and some SDK calls) accept parameters in either place.
    """
    body: dict[str, Any] = dict(request.query)
    if not request.can_read_body:
        return body
    ctype = request.content_type
    if ctype == JSON_CONTENT_TYPE:
        parsed = await request.json()
        if isinstance(parsed, dict):
            body.update(parsed)
        else:
            body["_json"] = parsed
    elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, value in form.items():
            body[key] = value if isinstance(value, str) else getattr(value, "filename", "file")
            if not isinstance(value, str) and hasattr(
                value, "file"
            ):  # an uploaded file: its bytes kept too
                body.setdefault("_uploads", {})[key] = value.file.read()
    else:
        text = await request.text()
        if text:
            body["_raw"] = text
    return body

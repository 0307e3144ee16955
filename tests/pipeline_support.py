"""Helpers for the conversation-pipeline tests: a runtime against the fake OpenAI server, message builders."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from conftest import HashEmbedder

from bot.composition import build_runtime as compose
from bot.config import load_settings
from bot.runtime import Runtime
from bot.types import IncomingMessage
from memory.clock import FakeClock


def build_runtime(db: Path, srv, clock: FakeClock, **overrides: Any) -> Runtime:
    # The fake model answers in milliseconds; the timeout is for a test that waits on a model that hangs, never a
    # limit a busy machine may reach (at load 10 on two cores one of fifty replies took over the 2 s it once was).
    # A test about timeouts sets a short one itself.
    overrides.setdefault("llm_timeout_s", 60.0)
    embedder = (
        overrides.pop("embedder", None) or HashEmbedder()
    )  # a real model, where meaning counts
    settings = load_settings(
        db_path=db,
        llm_base_url=srv.base_url,
        llm_api_key="test-key",
        embeddings="none",
        scheduler_enabled=False,
        **overrides,
    )
    return compose(settings, clock=clock, embedder=embedder, backoff_s=0.0)


def dm(
    platform: str, user: str, text: str, *, name: str = "Alice", mid: str | None = None
) -> IncomingMessage:
    return IncomingMessage(
        platform=platform,
        channel_id=f"dm-{user}",
        author_id=user,
        author_name=name,
        text=text,
        message_id=mid,
    )


def group(
    platform: str,
    guild: str,
    user: str,
    text: str,
    *,
    name: str = "Alice",
    channel: str = "general",
    mid: str | None = None,
) -> IncomingMessage:
    return IncomingMessage(
        platform=platform,
        channel_id=f"{guild}-{channel}",
        author_id=user,
        author_name=name,
        text=text,
        guild_id=guild,
        message_id=mid,
    )


def facts(*items: dict[str, Any]) -> str:
    """An extraction answer: a JSON array of memory candidates."""
    return json.dumps(
        [{"type": "semantic", "kind": "profile", "importance": 7, **item} for item in items]
    )


def system_prompts(srv) -> list[str]:
    return [
        body["messages"][0]["content"]
        for body in srv.chat_requests
        if body["messages"][0]["role"] == "system"
    ]


def last_reply_prompt(srv) -> str:
    """Everything the model was shown for the latest reply (system prompt, history and the user message)."""
    body = srv.chat_requests[-1]
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


@asynccontextmanager
async def platforms(
    tmp_path: Path, guilds: Callable[[Any], None], *, budgeted: bool = False, **overrides: Any
) -> AsyncIterator[tuple[Runtime, Any, Any, Any]]:
    """The bot on both platforms at once: python-telegram-bot and discord.py against local fake servers, the
    real runtime against a scripted model. ``guilds(dc)`` configures the fake Discord before it connects;
    ``budgeted``: the adapters talk to the orchestrator behind the daily budgets, as in a real run;
    ``overrides`` are settings. Yields (runtime, llm, tg, dc)."""
    from bot.adapters.discord_adapter import DiscordAdapter
    from bot.adapters.telegram_adapter import TelegramAdapter
    from bot.composition import budgeted as behind_budgets
    from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram

    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        guilds(dc)
        restore = dc.patch_discord()
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock(), **overrides)
        await runtime.start(background_loop=False)
        door = behind_budgets(runtime) if budgeted else runtime.orchestrator
        telegram = TelegramAdapter(
            door,
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
        )
        discord_ = DiscordAdapter(door, "discord-token", guild_ready_timeout=0.05, ready_timeout=30)
        await telegram.start()
        await discord_.start()
        try:
            yield runtime, llm, tg, dc
        finally:
            llm.default = lambda body: "[]"
            await discord_.stop()
            await telegram.stop()
            await runtime.stop()
            restore()

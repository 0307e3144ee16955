"""``companion run`` with a platform that cannot connect (OPS-5): it is retried with backoff, one line per
failure, and the other platform serves meanwhile. The real python-telegram-bot against a closed port, the
real discord.py against the local fake."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.adapters.common import AdapterError, LoginRejected
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.launch import keep_starting, retry_delay, serve
from memory.clock import FakeClock
from tests.fakes import FakeDiscord, FakeOpenAI
from tests.pipeline_support import build_runtime

CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port


class GiveUp(Exception):
    pass


def offline_telegram(conversation) -> TelegramAdapter:
    return TelegramAdapter(
        conversation,
        "123456:" + "A" * 35,
        base_url=f"{CLOSED}/bot",
        base_file_url=f"{CLOSED}/file/bot",
    )


class Refused:
    """An adapter whose token the platform refuses."""

    platform = "discord"

    async def start(self) -> None:
        raise LoginRejected("discord refused the bot token")

    async def stop(self) -> None:
        pass


class NeedsIntent:
    """An adapter whose platform wants a switch turned on in its developer portal: waiting will not help."""

    platform = "discord"

    async def start(self) -> None:
        class PrivilegedIntentsRequired(Exception):
            pass

        try:
            raise PrivilegedIntentsRequired("enable the Message Content intent")
        except PrivilegedIntentsRequired as exc:
            raise AdapterError("discord did not become ready") from exc

    async def stop(self) -> None:
        pass


def test_the_wait_doubles_from_two_seconds_up_to_two_minutes() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4, 7, 30)] == [2, 4, 8, 16, 120, 120]


async def test_telegram_without_network_is_retried_with_one_line_per_failure(
    tmp_path, caplog
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            raise GiveUp

    async with FakeOpenAI() as srv:
        runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
        adapter = offline_telegram(runtime.orchestrator)
        with caplog.at_level(logging.INFO), pytest.raises(GiveUp):
            await keep_starting(adapter, sleep=sleep)
        await adapter.stop()
        runtime.engine.close()
        runtime.runner.shutdown()
    assert waits == [2, 4, 8]
    lines = [r for r in caplog.records if r.name == "bot.launch"]
    assert len(lines) == 3 and all(
        r.levelno == logging.WARNING and r.exc_info is None for r in lines
    )
    assert (
        "telegram: cannot connect (NetworkError" in lines[0].getMessage()
        and "try 1, next in 2 s" in lines[0].getMessage()
    )
    assert all("\n" not in r.getMessage() for r in lines) and "Traceback" not in caplog.text


async def test_discord_serves_while_telegram_keeps_failing(tmp_path, caplog) -> None:
    async with FakeOpenAI() as srv, FakeDiscord() as dc:
        restore = dc.patch_discord()
        runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
        await runtime.start(background_loop=False)
        telegram = offline_telegram(runtime.orchestrator)
        discord_ = DiscordAdapter(
            runtime.orchestrator, "discord-token", guild_ready_timeout=0.05, ready_timeout=30
        )
        stop = asyncio.Event()
        with caplog.at_level(logging.WARNING, logger="bot.launch"):
            serving = asyncio.create_task(serve([telegram, discord_], stop, first=0.05))
            for _ in range(200):
                failures = [
                    r
                    for r in caplog.records
                    if r.getMessage().startswith("telegram: cannot connect")
                ]
                if discord_.client.is_ready() and len(failures) >= 2:
                    break
                await asyncio.sleep(0.05)
            # one serves, the other keeps trying
            assert discord_.client.is_ready() and len(failures) >= 2
            stop.set()
            await asyncio.wait_for(serving, 5)
        await discord_.stop()
        await telegram.stop()
        srv.default = lambda body: "[]"
        await runtime.stop()
        restore()


async def test_a_refused_token_ends_the_run_at_once_instead_of_being_retried() -> None:
    with pytest.raises(LoginRejected, match="discord refused"):
        await asyncio.wait_for(serve([Refused()], asyncio.Event()), 5)


async def test_a_missing_developer_portal_switch_is_not_waited_for() -> None:
    with pytest.raises(AdapterError):
        await asyncio.wait_for(serve([NeedsIntent()], asyncio.Event()), 5)

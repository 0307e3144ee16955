"""SEC-7 through the real adapters: discord.py and python-telegram-bot against the local fakes tell the bot it was
removed from a server or group (GUILD_DELETE; my_chat_member "kicked"/"left"), and the scheduled retention job
purges the place after the grace period and not before; adding the bot back (GUILD_CREATE; my_chat_member
"member") cancels the purge. The clock is a fake: days pass by advancing it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import count
from pipeline_support import build_runtime

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.config import load_settings
from bot.retention import RetentionJob
from bot.runtime import Runtime
from memory.clock import DAY, FakeClock
from memory.models import NewMemory, Scope
from memory.storage.messages import NewMessage
from memory.upkeep.retention import Departures
from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram
from tests.fakes.telegram_server import BOT_USER

GUILD, GROUP = 7001, -100777


@dataclass
class World:
    runtime: Runtime
    clock: FakeClock
    tg: Any
    dc: Any


async def until(runtime: Runtime, predicate: Callable[[], bool]) -> None:
    """Wait for the adapter to have handled the event (read on the memory thread, an event loop turn at a time;
    never a timed assertion)."""
    for _ in range(1000):
        if await runtime.runner.run(predicate):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the event was not handled")


async def kept_now(runtime: Runtime, guild: str) -> int:
    return await runtime.runner.run(kept, runtime, guild)


def plant(runtime: Runtime, platform: str, guild: str) -> None:
    engine = runtime.engine
    message = NewMessage(
        platform,
        f"{guild}-general",
        "55",
        f"the {platform} place keeps a heliotrope",
        guild_id=guild,
        author_name="Bo",
    )
    engine.messages.add(message)
    engine.memories.add(
        NewMemory(
            content=f"The {platform} place meets on Fridays",
            subject="meetings",
            scope=Scope.GUILD,
            scope_id=guild,
        )
    )


def kept(runtime: Runtime, guild: str) -> int:
    return count(runtime.engine, "messages", "guild_id = ?", (guild,)) + count(
        runtime.engine, "memories", "scope_id = ?", (guild,)
    )


def departure(runtime: Runtime, guild: str):
    return Departures(runtime.engine, 30).get(guild)


@pytest.fixture
async def world(tmp_path) -> AsyncIterator[World]:
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        dc.add_guild(GUILD, "Garden club", channels=[(7101, "general")])
        restore = dc.patch_discord()
        clock = FakeClock()
        runtime = build_runtime(tmp_path / "bot.db", llm, clock, leave_grace_days=30)
        await runtime.start(background_loop=False)
        telegram = TelegramAdapter(
            runtime.orchestrator,
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
            places=runtime.places,
        )
        discord_ = DiscordAdapter(
            runtime.orchestrator,
            "discord-token",
            guild_ready_timeout=0.05,
            ready_timeout=5,
            places=runtime.places,
        )
        await telegram.start()
        await discord_.start()
        try:
            yield World(runtime, clock, tg, dc)
        finally:
            await discord_.stop()
            await telegram.stop()
            await runtime.stop()
            restore()


def membership(chat_id: int, status: str) -> dict[str, Any]:
    bot = {k: BOT_USER[k] for k in ("id", "is_bot", "first_name", "username")}
    admin = {"id": 9, "is_bot": False, "first_name": "Admin"}
    change = {
        "chat": {"id": chat_id, "type": "supergroup", "title": "Garden group"},
        "from": admin,
        "date": int(time.time()),
        "old_chat_member": {"user": bot, "status": "member" if status != "member" else "left"},
        "new_chat_member": {
            "user": bot,
            "status": status,
            **({"until_date": 0} if status == "kicked" else {}),
        },
    }
    return {"my_chat_member": change}


async def test_a_discord_server_that_removes_the_bot_is_purged_by_the_job_after_30_days_and_not_before(
    world,
):
    runtime, guild = world.runtime, str(GUILD)
    await runtime.runner.run(plant, runtime, "discord", guild)
    await world.dc.dispatch("GUILD_DELETE", {"id": guild})
    await until(runtime, lambda: departure(runtime, guild) is not None)
    assert runtime.retention is not None
    world.clock.advance(29 * DAY)
    await runtime.retention.run()
    assert await kept_now(runtime, guild) == 2
    world.clock.advance(DAY)
    report = await runtime.retention.run()
    assert report is not None and report.purged == 1
    assert await kept_now(runtime, guild) == 0 and departure(runtime, guild) is None


async def test_a_discord_server_that_adds_the_bot_back_is_not_purged(world):
    runtime, guild = world.runtime, str(GUILD)
    await runtime.runner.run(plant, runtime, "discord", guild)
    await world.dc.dispatch("GUILD_DELETE", {"id": guild})
    await until(runtime, lambda: departure(runtime, guild) is not None)
    world.clock.advance(5 * DAY)
    await world.dc.dispatch("GUILD_CREATE", world.dc._guilds[GUILD])
    await until(runtime, lambda: departure(runtime, guild) is None)
    world.clock.advance(60 * DAY)
    assert runtime.retention is not None and (await runtime.retention.run()).purged == 0
    assert await kept_now(runtime, guild) == 2


@pytest.mark.parametrize("status", ["kicked", "left"])
async def test_a_telegram_group_that_removes_the_bot_is_purged_after_the_grace_period(
    world, status
):
    runtime, group = world.runtime, str(GROUP)
    await runtime.runner.run(plant, runtime, "telegram", group)
    world.tg.push_update(membership(GROUP, status))
    await until(runtime, lambda: departure(runtime, group) is not None)
    assert runtime.retention is not None
    world.clock.advance(30 * DAY - 1)
    assert (await runtime.retention.run()).purged == 0 and await kept_now(runtime, group) == 2
    world.clock.advance(1)
    assert (await runtime.retention.run()).purged == 1 and await kept_now(runtime, group) == 0


async def test_a_telegram_group_that_adds_the_bot_back_cancels_the_purge_and_a_blocked_dm_is_no_place(
    world,
):
    runtime, group = world.runtime, str(GROUP)
    await runtime.runner.run(plant, runtime, "telegram", group)
    world.tg.push_update(membership(GROUP, "kicked"))
    await until(runtime, lambda: departure(runtime, group) is not None)
    world.tg.push_update(membership(GROUP, "member"))
    await until(runtime, lambda: departure(runtime, group) is None)
    blocked = membership(42, "kicked")
    blocked["my_chat_member"]["chat"] = {"id": 42, "type": "private", "first_name": "Alice"}
    world.tg.push_update(blocked)
    world.tg.push_message(42, 42, "/start")
    await world.tg.wait_for_sent(1)  # the block was handled before this later update
    assert await runtime.runner.run(count, runtime.engine, "place_departures") == 0
    world.clock.advance(60 * DAY)
    assert (await runtime.retention.run()).purged == 0 and await kept_now(runtime, group) == 2


async def test_the_retention_job_runs_once_across_processes_and_is_on_the_scheduler(
    world, tmp_path
):
    runtime = world.runtime
    assert runtime.retention is not None
    other = RetentionJob(
        runtime.engine, runtime.runner, runtime.retention.departures, 90, holder="another process"
    )
    claims = runtime.engine.claims
    assert await runtime.runner.run(claims.claim, "retention", "another process", 60)
    assert await runtime.retention.run() is None  # the other process is running it
    await runtime.runner.run(claims.release, "retention", "another process")
    assert await other.run() is not None
    assert runtime._scheduler().get_job("retention") is not None


def test_the_settings_take_a_number_of_days_or_off_and_refuse_a_window_shorter_than_the_daily_look_back(
    tmp_path,
):
    from bot.config import ConfigError

    assert load_settings(db_path=tmp_path / "x.db").message_retention_days == 90
    assert load_settings(db_path=tmp_path / "x.db").leave_grace_days == 30
    assert (
        load_settings(
            db_path=tmp_path / "x.db", message_retention_days="off"
        ).message_retention_days
        == 0
    )
    assert (
        load_settings(db_path=tmp_path / "x.db", message_retention_days="0").message_retention_days
        == 0
    )
    for bad in ("3", "soon", "-5"):
        with pytest.raises(ConfigError, match="MESSAGE_RETENTION_DAYS"):
            load_settings(db_path=tmp_path / "x.db", message_retention_days=bad)

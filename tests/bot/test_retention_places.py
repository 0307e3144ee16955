"""SEC-7 through the real adapters: discord.py and python-telegram-bot against the local fakes tell the bot it was
removed from a server or group (GUILD_DELETE; my_chat_member "kicked"/"left"), and the scheduled retention job
purges the place after the grace period and not before; adding the bot back (GUILD_CREATE; my_chat_member
"member") cancels the purge. The clock is a fake: days pass by advancing it.

What is purged was said through the same adapters first (issue 44: rows planted under the
platform's own id passed while the pipeline's rows, keyed "discord:7001", stayed): a fact with a
word found nowhere else, the bot's reply, the fact the model extracted, its journal lines, the
chat's summary and a reminder set in the place. After the purge no file under the store's folder
(the store, its -wal, the journals) and no FTS shadow table holds the word."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import count
from pipeline_support import build_runtime

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.config import load_settings
from bot.jobs import JobRunner
from bot.retention import RetentionJob
from bot.runtime import Runtime
from memory.clock import DAY, FakeClock
from memory.upkeep.retention import Departures
from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram
from tests.fakes.telegram_server import BOT_USER

GUILD, CHANNEL, GROUP = 7001, 7101, -100777
BO = {"discord": 7300, "telegram": 7400}
KEY = {"discord": f"discord:{GUILD}", "telegram": f"telegram:{GROUP}"}
MARK = {"discord": "zorblatt", "telegram": "quembrillow"}  # said nowhere else


@dataclass
class World:
    runtime: Runtime
    clock: FakeClock
    tg: Any
    dc: Any
    root: Path


async def until(runtime: Runtime, predicate: Callable[[], bool]) -> None:
    """Wait for the adapter to have handled the event (read on the memory thread, an event loop turn at a time;
    never a timed assertion)."""
    for _ in range(1000):
        if await runtime.runner.run(predicate):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the event was not handled")


def model(body: dict[str, Any]) -> str:
    """A faithful model: a reply repeats the place's word, extraction files the fact said, a
    reflection's summary names it too."""
    said = json.dumps(body)
    mark = next((m for m in MARK.values() if m in said), "nothing")
    if "tools" in body:
        return f"A {mark} heron, how lovely!"
    if "session has ended" in said:
        return json.dumps({"facts": [], "summary": f"Bo told of the club's {mark} heron"})
    prompt = str(body["messages"][-1].get("content") or "")
    lines = re.findall(rf"^#(\d+) \[(P\d+)\] [^\n]*?: \"[^\n]*{mark}", prompt, re.MULTILINE)
    return json.dumps(
        [
            {
                "speaker": tag,
                "lines": [int(line)],
                "subject": "mascot",
                "content": f"Bo's garden club has a {mark} heron as its mascot",
                "type": "semantic",
                "kind": "profile",
                "importance": 7,
            }
            for line, tag in lines[:1]
        ]
    )


async def told(world: World, platform: str) -> None:
    """Bo tells the place its word (the bot answers), the fact is extracted and the chat reflected
    on, and Bo sets a reminder carrying the word: every row keyed as the pipeline keys it."""
    mark, runtime = MARK[platform], world.runtime
    said, remind = f"our club mascot is a {mark} heron", f"in 40 days feed the {mark}"
    if platform == "discord":
        sent = len(world.dc.sent)
        await world.dc.dispatch_message(
            CHANNEL, BO[platform], said, guild_id=GUILD, mentions_bot=True, username="bo"
        )
        await world.dc.wait_for_sent(sent + 1)
        when, what = remind.split(" feed ")
        await world.dc.dispatch_interaction(
            "remind",
            user_id=BO[platform],
            channel_id=CHANNEL,
            guild_id=GUILD,
            options={"when": when, "what": "feed " + what},
            username="bo",
        )
        answer = (await world.dc.wait_for_interaction_responses(1))[-1]["data"]["content"]
    else:
        sent = len(world.tg.sent)
        world.tg.push_message(
            GROUP, BO[platform], said, chat_type="supergroup", first_name="Bo", mention=True
        )
        await world.tg.wait_for_sent(sent + 1)
        command = [{"type": "bot_command", "offset": 0, "length": len("/remind")}]
        world.tg.push_message(
            GROUP,
            BO[platform],
            f"/remind {remind}",
            chat_type="supergroup",
            first_name="Bo",
            entities=command,
        )
        answer = (await world.tg.wait_for_sent(sent + 2))[-1]["text"]
    assert answer.startswith("Reminder set"), answer
    world.clock.advance(31)
    await runtime.background.tick()
    assert await runtime.runner.run(kept, runtime, platform) == {
        "memories": 1,
        "messages": 2,
        "reminders": 1,
        "summaries": 1,
    }
    assert await leftovers(world, mark)  # the word is in the files: the check below can see it


def kept(runtime: Runtime, platform: str) -> dict[str, int]:
    """Rows of the place that hold its word, by table."""
    like = (f"%{MARK[platform]}%",)
    return {
        "memories": count(runtime.engine, "memories", "content LIKE ?", like),
        "messages": count(runtime.engine, "messages", "content LIKE ?", like),
        "reminders": count(runtime.engine, "reminders", "text LIKE ?", like),
        "summaries": count(runtime.engine, "session_summaries", "text LIKE ?", like),
    }


async def leftovers(world: World, word: str) -> list[str]:
    """Where the word's bytes are: any file under the store's folder (the store and its -wal as
    they are, no checkpoint here; the journals, flushed), and any row of an FTS shadow table."""
    engine, needle = world.runtime.engine, word.encode()
    if engine.journals is not None:
        await world.runtime.runner.run(engine.journals.flush)
    found = [
        str(p.relative_to(world.root))
        for p in sorted(world.root.rglob("*"))
        if p.is_file() and needle in p.read_bytes()
    ]
    return found + await world.runtime.runner.run(shadow_rows, world.runtime, needle)


def shadow_rows(runtime: Runtime, needle: bytes) -> list[str]:
    db = runtime.engine.db
    tables = [
        t
        for (t,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%fts_%'"
        )
    ]
    return [
        f"{table} row"
        for table in tables
        for row in db.execute(f"SELECT * FROM {table}")
        if any(needle in (v if isinstance(v, bytes) else str(v).encode()) for v in row)
    ]


def departure(runtime: Runtime, platform: str):
    return Departures(runtime.engine, 30).get(KEY[platform])


@pytest.fixture
async def world(tmp_path) -> AsyncIterator[World]:
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        llm.default = model
        dc.add_guild(GUILD, "Garden club", channels=[(CHANNEL, "general")])
        restore = dc.patch_discord()
        clock = FakeClock()
        runtime = build_runtime(
            tmp_path / "bot.db", llm, clock, leave_grace_days=30, reflection_silence_s=0
        )
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
            yield World(runtime, clock, tg, dc, tmp_path)
        finally:
            llm.default = lambda body: "[]"
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


async def removed(world: World, platform: str, status: str = "kicked") -> None:
    if platform == "discord":
        await world.dc.dispatch("GUILD_DELETE", {"id": str(GUILD)})
    else:
        world.tg.push_update(membership(GROUP, status))
    await until(world.runtime, lambda: departure(world.runtime, platform) is not None)


async def added_back(world: World, platform: str) -> None:
    if platform == "discord":
        await world.dc.dispatch("GUILD_CREATE", world.dc._guilds[GUILD])
    else:
        world.tg.push_update(membership(GROUP, "member"))
    await until(world.runtime, lambda: departure(world.runtime, platform) is None)


@pytest.mark.parametrize(
    ("platform", "status"), [("discord", ""), ("telegram", "kicked"), ("telegram", "left")]
)
async def test_a_place_that_removes_the_bot_is_purged_to_the_last_byte_after_the_grace_period(
    world, platform, status
):
    runtime = world.runtime
    await told(world, platform)
    await removed(world, platform, status)
    assert runtime.retention is not None
    world.clock.advance(30 * DAY - 1)
    report = await runtime.retention.run()
    assert report is not None and report.purged == 0
    assert await runtime.runner.run(kept, runtime, platform) == {
        "memories": 1,
        "messages": 2,
        "reminders": 1,
        "summaries": 1,
    }
    world.clock.advance(1)
    report = await runtime.retention.run()
    assert report is not None and report.purged == 1 and report.rows >= 4
    assert await runtime.runner.run(kept, runtime, platform) == {
        "memories": 0,
        "messages": 0,
        "reminders": 0,
        "summaries": 0,
    }
    assert await leftovers(world, MARK[platform]) == []
    assert departure(runtime, platform) is None
    [audit] = [e for e in runtime.engine.audit.recent() if e.action == "guild.purge"]
    assert audit.target == KEY[platform] and audit.who == "retention"
    detail = audit.detail
    assert detail["memories"] == 1 and detail["messages"] == 2 and detail["reminders"] == 1
    assert detail["rows"] == report.rows


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_a_place_that_adds_the_bot_back_within_the_grace_period_keeps_everything(
    world, platform
):
    runtime = world.runtime
    await told(world, platform)
    await removed(world, platform)
    world.clock.advance(29 * DAY)
    await added_back(world, platform)
    world.clock.advance(60 * DAY)
    assert runtime.retention is not None and (await runtime.retention.run()).purged == 0
    assert await runtime.runner.run(kept, runtime, platform) == {
        "memories": 1,
        "messages": 2,
        "reminders": 1,
        "summaries": 1,
    }
    assert any("memory/" in found for found in await leftovers(world, MARK[platform]))


async def test_a_blocked_dm_is_no_place(world):
    blocked = membership(42, "kicked")
    blocked["my_chat_member"]["chat"] = {"id": 42, "type": "private", "first_name": "Alice"}
    world.tg.push_update(blocked)
    world.tg.push_message(42, 42, "/start")
    await world.tg.wait_for_sent(1)  # the block was handled before this later update
    assert await world.runtime.runner.run(count, world.runtime.engine, "place_departures") == 0


async def test_the_retention_job_runs_once_across_processes_and_is_on_the_scheduler(
    world, tmp_path
):
    runtime = world.runtime
    assert runtime.retention is not None
    retention = runtime.retention
    elsewhere = JobRunner(
        runtime.engine, runtime.runner, retention.jobs.model, holder="another process"
    )
    other = RetentionJob(elsewhere, retention.upkeep, retention.leaving, 90)
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

"""Reminders across processes (ORCH-13, SCALE-1). The bots run in child processes with the real adapters' sending
(python-telegram-bot and discord.py talking to the local fakes in this process) and the real reminder job.

    two processes on PostgreSQL    40 due reminders (half Telegram, half Discord), both processes running the job
                                   at once: each reminder reaches its chat exactly once
    SIGKILL (SQLite)               killed when a reminder was due but not claimed, or claimed but not sent: the
                                   restart sends it, once; killed after the platform took it and before it was
                                   recorded: the restart sends it again, saying it may be a repeat (delivery is at
                                   least once: ``memory.storage.reminders`` says why)
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HashEmbedder

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.jobs import LEASE_S
from memory.clock import FakeClock, SystemClock
from memory.engine import MemoryEngine
from memory.storage.reminders import NewReminder, ReminderPlace
from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram
from tests.pipeline_support import build_runtime

pytestmark = pytest.mark.asyncio
ROOT = Path(__file__).resolve().parents[2]
TG_USER, DC_USER, GUILD, CHANNEL = 55, 7001, 8000, 8001

CHILD = """
import asyncio, sys
sys.path.insert(0, {root!r})
import discord
discord.http.Route.BASE = {discord_api!r}
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.composition import build_runtime as compose
from bot.config import load_settings
from tests.conftest import HashEmbedder

class Stalled:
    # The real adapter, with the process left hanging at the step the test kills it in.
    def __init__(self, post, step):
        self.post, self.step = post, step
    async def send_to_channel(self, channel_id, text, mention_user_id=None):
        if self.step == "after-claim":
            print("claimed", flush=True)
            await asyncio.sleep(3600)
        await self.post.send_to_channel(channel_id, text, mention_user_id)
        if self.step == "after-send":
            print("sent", flush=True)
            await asyncio.sleep(3600)
    async def send_to_user(self, user_id, text):
        await self.post.send_to_user(user_id, text)

async def main():
    settings = load_settings({store}, llm_base_url={url!r}, llm_api_key="k", embeddings="none", scheduler_enabled=False)
    runtime = compose(settings, embedder=HashEmbedder())
    await runtime.start(background_loop=False)
    telegram = TelegramAdapter(runtime.orchestrator, "123:abc", base_url={tg!r} + "/bot", base_file_url={tg!r} + "/file/bot")
    await telegram.app.initialize()
    discord_ = DiscordAdapter(runtime.orchestrator, "discord-token")
    await discord_.client.login("discord-token")  # sending needs no gateway
    step = {step!r}
    runtime.reminders.posts.update(telegram=Stalled(telegram, step), discord=discord_)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    if step == "before-claim":
        await asyncio.sleep(3600)  # the reminder is due, and the job has not run
    sent = 0
    for _ in range(5):
        sent += (await runtime.reminders.run()).sent
    print("sent", sent, flush=True)
    await discord_.stop()
    await telegram.app.shutdown()
    await runtime.stop()

asyncio.run(main())
"""


def child(
    store: str, llm: FakeOpenAI, tg: FakeTelegram, dc: FakeDiscord, step: str = ""
) -> subprocess.Popen:
    script = CHILD.format(
        root=str(ROOT),
        discord_api=f"{dc.url}/api/v10",
        store=store,
        url=llm.base_url,
        tg=tg.url,
        step=step,
    )
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, **pipes)  # type: ignore[call-overload]


async def line_from(proc: subprocess.Popen, wanted: str, timeout: float = 60.0) -> str:
    """Wait (off the event loop, which serves the fakes) for a line of the child's starting with ``wanted``."""

    def read() -> str:
        assert proc.stdout is not None
        while not (line := proc.stdout.readline().decode().strip()).startswith(wanted):
            assert line, (
                f"the child ended before {wanted!r}: {proc.stderr.read().decode()[-3000:] if proc.stderr else ''}"
            )
        return line

    return await asyncio.wait_for(asyncio.to_thread(read), timeout)


def go(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.flush()


def plant(store: str, texts: list[tuple[ReminderPlace, str]], due_at: float) -> None:
    """Reminders due at ``due_at``, as /remind would have stored them."""
    with MemoryEngine(store, HashEmbedder(), SystemClock()) as engine:
        reminders = engine.reminders
        for place, text in texts:
            reminders.add(
                NewReminder(
                    f"{place.platform}:{place.platform_user_id}", place, text, "UTC", due_at
                )
            )


TELEGRAM_DM = ReminderPlace("telegram", str(TG_USER), str(TG_USER))
DISCORD_CHANNEL = ReminderPlace(
    "discord", str(CHANNEL), str(DC_USER), f"discord:{GUILD}", is_dm=False
)
# a member may have 10 reminders posting in a server a day (issue 44): 20 are two members'
DISCORD_OTHER = ReminderPlace(
    "discord", str(CHANNEL), str(DC_USER + 1), f"discord:{GUILD}", is_dm=False
)


async def test_two_processes_on_postgresql_send_each_due_reminder_once(pg_url):
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        dc.add_guild(GUILD, "Guild", channels=[(CHANNEL, "general")])
        planted = [(TELEGRAM_DM, f"telegram thing {n}") for n in range(20)] + [
            (DISCORD_CHANNEL if n % 2 else DISCORD_OTHER, f"discord thing {n}") for n in range(20)
        ]
        plant(pg_url, planted, time.time() - 1)
        store = f"database_url={pg_url!r}"
        bots = [child(store, llm, tg, dc), child(store, llm, tg, dc)]
        try:
            for bot in bots:
                await line_from(bot, "ready")
            for bot in bots:
                go(bot)
            counts = [int((await line_from(bot, "sent")).split()[1]) for bot in bots]
        finally:
            for bot in bots:
                bot.kill()
        texts = [m["text"] for m in tg.sent] + [m["content"] for m in dc.sent]
    assert sum(counts) == 40
    assert sorted(texts) == sorted(
        f"<@{place.platform_user_id}> \u23f0 Reminder: {text}"
        if not place.is_dm
        else f"\u23f0 Reminder: {text}"
        for place, text in planted
    )
    with MemoryEngine(pg_url, HashEmbedder(), SystemClock()) as engine:
        assert engine.reminders.mine(f"telegram:{TG_USER}") == []


@pytest.mark.parametrize("step", ["before-claim", "after-claim", "after-send"])
async def test_a_reminder_killed_at_any_step_is_never_lost(tmp_path, step):
    db = tmp_path / "bot.db"
    plant(str(db), [(TELEGRAM_DM, "call mum")], time.time() - 1)
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        bot = child(f"db_path={str(db)!r}", llm, tg, dc, step)
        try:
            await line_from(bot, "ready")
            go(bot)
            if step != "before-claim":
                await line_from(bot, "claimed" if step == "after-claim" else "sent")
            bot.send_signal(signal.SIGKILL)
            assert await asyncio.to_thread(bot.wait, 10) == -signal.SIGKILL
        finally:
            bot.kill()
        before = [m["text"] for m in tg.sent]
        # the bot again, in this process, once the dead one's claim has run out
        runtime = build_runtime(db, llm, FakeClock(time.time() + LEASE_S + 1))
        telegram = TelegramAdapter(
            runtime.orchestrator,
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
        )
        await runtime.start(background_loop=False)
        await telegram.app.initialize()
        try:
            assert runtime.reminders is not None
            runtime.reminders.posts["telegram"] = telegram
            sent = (await runtime.reminders.run()).sent
            assert (await runtime.reminders.run()).sent == 0
            # delivered: the row and its words went
            assert runtime.engine.reminders.mine(f"telegram:{TG_USER}") == []
        finally:
            await telegram.app.shutdown()
            await runtime.stop()
        after = [m["text"] for m in tg.sent][len(before) :]
    late = "\n(This was due "
    repeat = "\n(If you already got this one, it's a repeat: I was restarted while sending it.)"
    assert sent == 1 and all(m["chat_id"] == TG_USER for m in tg.sent)
    if step == "before-claim":
        assert before == [] and [a.split(late)[0] for a in after] == ["\u23f0 Reminder: call mum"]
    elif (
        step == "after-claim"
    ):  # never sent before the kill; the restart cannot know, so it says it may be a repeat
        assert (
            before == []
            and len(after) == 1
            and after[0].startswith("\u23f0 Reminder: call mum")
            and after[0].endswith(repeat)
        )
    else:  # the one duplicate at-least-once allows, and it says so
        assert (
            before == ["\u23f0 Reminder: call mum"]
            and len(after) == 1
            and after[0].endswith(repeat)
        )

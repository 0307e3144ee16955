"""Two ``companion run`` processes on one PostgreSQL store share one bot (SCALE-1): Discord shard 0 and Telegram in
one, Discord shard 1 in the other, against the fake Discord (which routes each server to its shard), the fake
Telegram and the fake model, all in this test's process. 200 messages over both shards and Telegram: each is
stored once and extracted exactly once (read from the fake model's extraction prompts), none is lost, and a
/forget answered by one process is absent from the very next prompt the other builds.

The children run the real command line (``bot.cli.main(["run"])``); the only difference from production is a
bootstrap that points discord.py and python-telegram-bot at the local fakes, as ``FakeDiscord.patch_discord``
does in process.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram
from tests.pipeline_support import facts

ROOT = Path(__file__).resolve().parents[1]
DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB"
TELEGRAM_TOKEN = "123456:" + "A" * 35
# (guild_id >> 22) % 2 picks the shard: two servers on each
GUILDS = {0: (1001, (2 << 22) + 1001), 1: ((1 << 22) + 1001, (3 << 22) + 1001)}
ALICE, ALICE_DM = 3003, 5005
MARK = re.compile(r"\bm\d{3}x\b")

BOOT = """
import os, sys
import discord, yarl
from telegram.ext import ApplicationBuilder

discord.http.Route.BASE = os.environ["FAKE_DISCORD_API"]
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["FAKE_DISCORD_GATEWAY"])
_build = ApplicationBuilder.build

def build(self):
    telegram = os.environ["FAKE_TELEGRAM"]
    return _build(self.base_url(telegram + "/bot").base_file_url(telegram + "/file/bot"))

ApplicationBuilder.build = build
from bot.cli import main
sys.exit(main(["run"]))
"""


def model(body: dict[str, Any]) -> str:
    """Replies say "noted"; extraction learns Alice's kayak when it reads of it, nothing else."""
    first = body["messages"][0]
    if first["role"] == "system" and first["content"].startswith("You extract memories"):
        if "Moonbeam" in body["messages"][-1]["content"]:
            return facts(
                {"content": "Alice's kayak is called Moonbeam", "subject": "kayak", "speaker": "P1"}
            )
        return "[]"
    return "noted"


def extraction_prompts(srv: FakeOpenAI) -> list[str]:
    return [
        b["messages"][-1]["content"]
        for b in srv.chat_requests
        if b["messages"][0]["content"].startswith("You extract memories")
    ]


def reply_prompt(srv: FakeOpenAI, asked: str) -> str:
    """Everything the model was shown for the latest reply to ``asked``."""
    bodies = [
        b
        for b in srv.chat_requests
        if b.get("tools") and asked in str(b["messages"][-1].get("content"))
    ]
    assert bodies, f"no reply was asked for {asked!r}"
    return "\n".join(str(m.get("content") or "") for m in bodies[-1]["messages"])


def child_env(
    tmp_path: Path, pg_url: str, srv: FakeOpenAI, dsc: FakeDiscord, tg: FakeTelegram, shard: int
) -> dict[str, str]:
    home = tmp_path / f"home{shard}"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("COMPANION_") and k not in ("DISCORD_TOKEN", "TELEGRAM_TOKEN")
    }
    return env | {
        "PYTHONPATH": str(ROOT),
        "COMPANION_HOME": str(home),
        "COMPANION_DATABASE_URL": pg_url,
        "DISCORD_TOKEN": DISCORD_TOKEN,
        "TELEGRAM_TOKEN": TELEGRAM_TOKEN,
        "COMPANION_DISCORD_SHARD_COUNT": "2",
        "COMPANION_DISCORD_SHARDS": str(shard),
        "COMPANION_TELEGRAM": "on" if shard == 0 else "off",  # one poller: getUpdates admits one
        "OPENAI_BASE_URL": srv.base_url,
        # the jobs on a server of their own (the same fake, spelt apart): with one shared local
        # server a reply cancels a running extraction and it is asked again (bot.model.gate, its
        # own tests), which this test would count as a message extracted twice (under load)
        "COMPANION_EXTRACTION_BASE_URL": srv.base_url + "/",
        "OPENAI_API_KEY": "test-key",
        "COMPANION_EMBEDDINGS": "none",
        "COMPANION_EXTRACTION_DEBOUNCE_S": "1",
        "COMPANION_SCHEDULER_ENABLED": "false",
        "COMPANION_VOICE_ENABLED": "false",
        "COMPANION_HEALTH_ENABLED": "false",
        "COMPANION_JOURNALS": "false",
        "FAKE_DISCORD_API": f"{dsc.url}/api/v10",
        "FAKE_DISCORD_GATEWAY": f"{dsc.ws_url}/gateway",
        "FAKE_TELEGRAM": tg.url,
    }


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeOpenAI, FakeDiscord, FakeTelegram]]:
    async with FakeOpenAI() as srv, FakeDiscord() as dsc, FakeTelegram() as tg:
        srv.default = model
        for shard, guilds in GUILDS.items():
            for guild in guilds:
                dsc.add_guild(
                    guild,
                    f"server {guild} (shard {shard})",
                    channels=[(guild + 1, "general"), (guild + 2, "random")],
                )
        yield srv, dsc, tg


@pytest.fixture
async def bots(tmp_path, pg_url, fakes) -> AsyncIterator[list[subprocess.Popen]]:
    srv, dsc, tg = fakes
    children = []
    for shard in (0, 1):
        log = open(tmp_path / f"bot{shard}.log", "w")  # noqa: SIM115  # the child writes it; closed with the child
        env = child_env(tmp_path, pg_url, srv, dsc, tg, shard)
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", BOOT],
                env=env,
                cwd=tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        log.close()
    yield children
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    # waited for off the event loop: the fakes the children say goodbye to run on it
    for shard, child in enumerate(children):
        try:
            await asyncio.to_thread(child.wait, 20)
        except subprocess.TimeoutExpired:
            child.kill()
        print(f"--- bot{shard} ---\n" + (tmp_path / f"bot{shard}.log").read_text()[-200000:])


def count(pg_url: str, sql: str, *params: Any) -> int:
    with psycopg.connect(pg_url) as con:
        return int(con.execute(sql, params or None).fetchone()[0])


async def until(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` (the children work in their own time) until true; fail naming ``what``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_two_processes_share_the_work_extract_each_message_once_and_honour_each_others_forgets(
    pg_url, fakes, bots
) -> None:
    srv, dsc, tg = fakes
    await dsc.wait_for_gateway(timeout=30, sessions=2)
    await tg.wait_until(
        lambda: any(c.get("method", "").lower() == "getupdates" for c in tg.calls), 30
    )

    # 160 Discord messages over eight channels of four servers (two per shard), half of them to the bot; 40 Telegram
    # DMs. About 30 turns a channel: a crowded channel (60) would also be read by compaction's own extraction pass
    marks, replies = [], 0
    for i in range(160):
        shard, which = i % 2, (i // 2) % 2
        guild = GUILDS[shard][which]
        channel = guild + 1 + (i // 4) % 2
        mark = f"m{i:03d}x"
        marks.append(mark)
        addressed = i % 4 < 2
        replies += addressed
        await dsc.dispatch_message(
            channel,
            4000 + i % 16,
            f"note {mark} about the weather",
            guild_id=guild,
            mentions_bot=addressed,
        )
    for i in range(160, 200):
        mark = f"m{i:03d}x"
        marks.append(mark)
        tg.push_message(
            7000 + i % 10, 7000 + i % 10, f"note {mark} about the garden", first_name=f"T{i % 10}"
        )
    await dsc.wait_for_sent(replies, timeout=60)
    await tg.wait_for_sent(40, timeout=60)

    def extracted() -> collections.Counter[str]:
        return collections.Counter(
            m for prompt in extraction_prompts(srv) for m in set(MARK.findall(prompt))
        )

    await until(lambda: set(extracted()) == set(marks), 60, "every message's extraction")
    await until(
        lambda: count(pg_url, "SELECT count(*) FROM extraction_buffer") == 0,
        30,
        "an empty extraction buffer",
    )
    stored = count(
        pg_url, "SELECT count(*) FROM messages WHERE role = 'user' AND content LIKE 'note m%'"
    )
    assert (
        stored == 200
        and count(
            pg_url, "SELECT count(DISTINCT content) FROM messages WHERE content LIKE 'note m%'"
        )
        == 200
    )
    assert [
        m for m, n in extracted().items() if n != 1
    ] == []  # none extracted twice, by either process

    # Alice tells shard 1's process about her kayak; it is learned; she asks there, and the prompt has it
    guild = GUILDS[1][0]
    await dsc.dispatch_message(
        guild + 1, ALICE, "my kayak is called Moonbeam", guild_id=guild, mentions_bot=True
    )
    await until(
        lambda: count(pg_url, "SELECT count(*) FROM memories WHERE content LIKE '%Moonbeam%'") == 1,
        30,
        "the kayak memory",
    )
    sent = len(dsc.sent)
    await dsc.dispatch_message(
        guild + 1, ALICE, "what is my kayak called?", guild_id=guild, mentions_bot=True
    )
    await dsc.wait_for_sent(sent + 1, timeout=30)
    assert "Moonbeam" in reply_prompt(srv, "what is my kayak called?")

    # she forgets everything in a DM: shard 0's process answers; shard 1's very next prompt knows nothing of it
    await dsc.dispatch_interaction(
        "forget", user_id=ALICE, channel_id=ALICE_DM, options={"text": "everything confirm"}
    )
    answers = await dsc.wait_for_interaction_responses(1, timeout=30)
    assert "forgot everything" in str(answers[-1])
    sent = len(dsc.sent)
    await dsc.dispatch_message(
        guild + 1, ALICE, "remind me, what is my kayak named?", guild_id=guild, mentions_bot=True
    )
    await dsc.wait_for_sent(sent + 1, timeout=30)
    assert "Moonbeam" not in reply_prompt(srv, "remind me, what is my kayak named?")
    assert count(pg_url, "SELECT count(*) FROM memories WHERE content LIKE '%Moonbeam%'") == 0

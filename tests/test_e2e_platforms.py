"""Both platforms at once, end to end: python-telegram-bot and discord.py against local servers, the real
orchestrator and store, the openai SDK against a scripted model. Assertions are on what the model saw."""

from __future__ import annotations

import re

import pytest

from tests.pg_support import ON_BOTH_ENGINES
from tests.pipeline_support import facts, platforms

pytestmark = pytest.mark.asyncio
TG_USER, DC_USER, DC_DM = 55, 7001, 9100


def guilds(dc) -> None:
    dc.add_guild(8000, "Guild", channels=[(8001, "general")])


@pytest.fixture
async def world(tmp_path, runtime_store):
    async with platforms(tmp_path, guilds, **runtime_store) as parts:
        yield parts


def telegram_command(tg, text: str) -> None:
    command = text.split()[0]
    tg.push_message(
        TG_USER,
        TG_USER,
        text,
        entities=[{"type": "bot_command", "offset": 0, "length": len(command)}],
    )


async def tell_on_telegram(runtime, llm, tg, text: str, fact: str) -> None:
    """Alice says something in her Telegram DM; after the debounce the model extracts ``fact`` from it."""
    llm.script("Noted.")
    sent = len(tg.sent)
    tg.push_message(TG_USER, TG_USER, text, first_name="Alice")
    await tg.wait_for_sent(sent + 1)
    runtime.engine.clock.advance(31)
    llm.script(facts({"about": "Alice", "subject": "fact", "content": fact}))
    assert (await runtime.background.tick())["extracted"] == 1


async def link_telegram_to_discord(tg, dc) -> dict:
    """/link on Telegram, then /link CODE as a Discord slash command; returns Discord's answer."""
    sent = len(tg.sent)
    telegram_command(tg, "/link")
    code = re.search(r"code is (\S+)", (await tg.wait_for_sent(sent + 1))[-1]["text"]).group(1)
    await dc.dispatch_interaction("link", user_id=DC_USER, channel_id=DC_DM, options={"code": code})
    return (await dc.wait_for_interaction_responses(1))[-1]


@ON_BOTH_ENGINES
async def test_a_telegram_fact_reaches_a_discord_dm_after_link(world):
    runtime, llm, tg, dc = world
    await tell_on_telegram(
        runtime, llm, tg, "I work at Acme as a baker", "Alice works at Acme as a baker"
    )
    row = runtime.engine.db.one("SELECT scope_id, provenance FROM memories")
    assert (
        row["scope_id"] == f"telegram:{TG_USER}" and '"platform": "telegram"' in row["provenance"]
    )
    llm.script("I don't know yet.")
    await dc.dispatch_message(DC_DM, DC_USER, "where do I work?", username="alice")
    await dc.wait_for_sent(1)
    # not linked yet: another person
    assert "Acme" not in llm.chat_requests[-1]["messages"][0]["content"]
    assert "Linked" in (await link_telegram_to_discord(tg, dc))["data"]["content"]
    llm.script("You work at Acme, as a baker.")
    await dc.dispatch_message(DC_DM, DC_USER, "where do I work?", username="alice")
    await dc.wait_for_sent(2)
    assert "Alice works at Acme as a baker" in llm.chat_requests[-1]["messages"][0]["content"]


@ON_BOTH_ENGINES
async def test_a_private_telegram_fact_never_reaches_a_discord_guild(world):
    runtime, llm, tg, dc = world
    await tell_on_telegram(
        runtime, llm, tg, "My diagnosis is private: I have diabetes", "Alice has diabetes"
    )
    await link_telegram_to_discord(tg, dc)
    llm.script("Hi!")
    await dc.dispatch_message(
        8001,
        DC_USER,
        "hey bot, what about my health and diabetes?",
        guild_id=8000,
        mentions_bot=True,
        username="alice",
    )
    await dc.wait_for_sent(1)
    assert "diabetes" not in llm.chat_requests[-1]["messages"][0]["content"]
    llm.script("You told me about your diabetes.")
    await dc.dispatch_message(DC_DM, DC_USER, "what about my health?", username="alice")
    await dc.wait_for_sent(2)
    assert "Alice has diabetes" in llm.chat_requests[-1]["messages"][0]["content"]


async def test_fifty_telegram_conversations_at_once_store_every_message(world):
    runtime, llm, tg, dc = world
    llm.default = lambda body: "hello " + body["messages"][-1]["content"][-6:]
    for user in range(1000, 1050):
        tg.push_message(user, user, f"hi from {user}", first_name=f"user{user}")
    sent = await tg.wait_for_sent(50, timeout=30)
    assert {s["chat_id"] for s in sent} == set(range(1000, 1050))
    stored = runtime.engine.db.rows("SELECT author_id, content FROM messages WHERE role = 'user'")
    assert {(r["author_id"], r["content"]) for r in stored} == {
        (f"telegram:{u}", f"hi from {u}") for u in range(1000, 1050)
    }
    assert runtime.background.buffer.pending() == 50

"""Edits and deletes at the source, and time (issue 11, items 5 and 6): through the real adapters (discord.py,
python-telegram-bot) against the local fake servers, the real orchestrator and store, and a scripted model."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.types import IncomingMessage
from memory.clock import DAY, FakeClock
from memory.write.sources import EDIT_SETTLE_S
from tests.fakes import FakeOpenAI
from tests.fakes.discord_payloads import BOT_ID, member, message, user
from tests.pipeline_support import build_runtime, dm, facts, platforms

pytestmark = pytest.mark.asyncio
ALICE_TG, ALICE_DC, BOB_DC = 55, 7001, 7003
GUILD, GENERAL = 8000, 8001


def guilds(dc) -> None:
    dc.add_guild(GUILD, "Support group", channels=[(GENERAL, "general")])


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, guilds) as parts:
        yield parts


def contents(runtime) -> list[str]:
    return [
        r["content"] for r in runtime.engine.db.rows("SELECT content FROM memories ORDER BY rid")
    ]


def stored_texts(runtime) -> list[str]:
    return [
        r["content"] for r in runtime.engine.db.rows("SELECT content FROM messages ORDER BY rid")
    ]


def extraction_prompts(llm) -> list[str]:
    return [
        b["messages"][-1]["content"]
        for b in llm.chat_requests
        if "You extract memories" in b["messages"][0]["content"]
    ]


def no_file_holds(tmp_path, word: str) -> bool:
    return all(
        word.lower().encode() not in p.read_bytes().lower()
        for p in tmp_path.iterdir()
        if p.is_file()
    )


async def said_and_learned(runtime, llm, dc, text: str, fact: str) -> dict:
    """Alice says ``text`` to the bot in the server; the model answers, then extraction learns ``fact`` from it."""
    llm.script("Noted!")
    sent = len(dc.sent)
    data = await dc.dispatch_message(GENERAL, ALICE_DC, text, mentions_bot=True, username="alice")
    await dc.wait_for_sent(sent + 1)
    runtime.engine.clock.advance(31)
    llm.script(facts({"speaker": "P1", "subject": "pet", "content": fact}))
    assert (await runtime.background.tick())["extracted"] == 1
    return data


# -- deletes -------------------------------------------------------------------------------------------------
async def test_a_message_deleted_on_discord_takes_its_reply_and_the_memory_learned_only_from_it_down_to_the_bytes(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    data = await said_and_learned(
        runtime, llm, dc, "my axolotl is called Zyqxolotl", "Alice's axolotl is called Zyqxolotl"
    )
    assert (
        contents(runtime) == ["Alice's axolotl is called Zyqxolotl"]
        and len(stored_texts(runtime)) == 2
    )
    runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not no_file_holds(tmp_path, "Zyqxolotl")
    await dc.dispatch_delete(data)
    await dc.wait_until(lambda: not stored_texts(runtime))  # the message and the bot's reply to it
    assert contents(runtime) == []
    assert (
        runtime.engine.db.scalar(
            "SELECT COUNT(*) FROM message_fts WHERE message_fts MATCH 'Zyqxolotl'"
        )
        == 0
    )
    assert no_file_holds(tmp_path, "Zyqxolotl")


async def test_a_memory_with_another_source_left_survives_a_delete_and_loses_only_that_source(
    world,
):
    runtime, llm, tg, dc = world
    first = await dc.dispatch_message(GENERAL, ALICE_DC, "I adopted a greyhound", username="alice")
    await dc.dispatch_message(GENERAL, ALICE_DC, "the greyhound is called Comet", username="alice")
    await dc.wait_until(lambda: len(stored_texts(runtime)) == 2)
    runtime.engine.clock.advance(31)
    llm.script(
        facts({"speaker": "P1", "subject": "dog", "content": "Alice has a greyhound called Comet"})
    )
    assert (await runtime.background.tick())["extracted"] == 1
    ids = [r["id"] for r in runtime.engine.db.rows("SELECT id FROM messages ORDER BY rid")]
    await dc.dispatch_delete(first)
    await dc.wait_until(lambda: stored_texts(runtime) == ["the greyhound is called Comet"])
    (memory,) = runtime.engine.db.rows("SELECT content, provenance FROM memories")
    assert memory["content"] == "Alice has a greyhound called Comet"
    assert json.loads(memory["provenance"])["sources"] == [ids[1]]


async def test_a_bulk_delete_removes_every_message_it_names_and_no_other(world):
    runtime, llm, tg, dc = world
    sent = [
        await dc.dispatch_message(GENERAL, ALICE_DC, f"spam number {n}", username="alice")
        for n in range(3)
    ]
    await dc.dispatch_message(GENERAL, BOB_DC, "a word from Bob", username="bob")
    await dc.wait_until(lambda: len(stored_texts(runtime)) == 4)
    await dc.dispatch_delete(*sent[:2])
    await dc.wait_until(lambda: len(stored_texts(runtime)) == 2)
    assert stored_texts(runtime) == ["spam number 2", "a word from Bob"]
    # the deleted ones are not extracted
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM extraction_buffer") == 2


async def test_a_message_discord_py_never_cached_is_deleted_and_edited_too(world):
    runtime, llm, tg, dc = world
    said = IncomingMessage(
        "discord",
        str(GENERAL),
        str(ALICE_DC),
        "alice",
        "before the restart",
        guild_id=str(GUILD),
        message_id="555",
    )
    # stored by an earlier run of the bot: not in this client's cache
    await runtime.orchestrator.observe(said)
    await runtime.orchestrator.observe(replace(said, text="also before", message_id="556"))
    payload = {"id": "555", "channel_id": str(GENERAL), "guild_id": str(GUILD)}
    await dc.dispatch_edit(
        message(556, GENERAL, user(ALICE_DC, "alice"), "", guild_id=str(GUILD), member=member()),
        "edited after",
    )
    await dc.wait_until(lambda: "edited after" in stored_texts(runtime))
    await dc.dispatch_delete(payload)
    await dc.wait_until(lambda: stored_texts(runtime) == ["edited after"])


async def test_a_delete_of_a_message_never_stored_changes_nothing(world):
    runtime, llm, tg, dc = world
    await dc.dispatch_message(GENERAL, ALICE_DC, "hello there", username="alice")
    await dc.wait_until(lambda: len(stored_texts(runtime)) == 1)
    await dc.dispatch_delete(
        {"id": "123456789", "channel_id": str(GENERAL), "guild_id": str(GUILD)}
    )
    # the chat's events stay in order
    await dc.dispatch_message(GENERAL, ALICE_DC, "still here", username="alice")
    await dc.wait_until(lambda: len(stored_texts(runtime)) == 2)
    assert stored_texts(runtime) == ["hello there", "still here"]


# -- edits ---------------------------------------------------------------------------------------------------
async def test_an_edit_on_discord_replaces_the_text_withdraws_its_memory_and_extracts_the_new_words(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    data = await said_and_learned(
        runtime, llm, dc, "my axolotl is called Zyqxolotl", "Alice's axolotl is called Zyqxolotl"
    )
    runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not no_file_holds(tmp_path, "Zyqxolotl")
    # edited days later: the new text is still dated when it was said
    runtime.engine.clock.advance(3 * DAY)
    await dc.dispatch_edit(data, f"<@{BOT_ID}> my axolotl is called Pebble")
    await dc.wait_until(lambda: stored_texts(runtime)[0] == "my axolotl is called Pebble")
    assert contents(runtime) == []  # superseded by the edit, not kept live
    assert (
        runtime.engine.db.scalar(
            "SELECT COUNT(*) FROM message_fts WHERE message_fts MATCH 'content:Pebble'"
        )
        == 1
    )
    assert no_file_holds(tmp_path, "Zyqxolotl")
    runtime.engine.clock.advance(EDIT_SETTLE_S + 1)  # an edit settles before it is extracted
    llm.script(
        facts({"speaker": "P1", "subject": "pet", "content": "Alice's axolotl is called Pebble"})
    )
    assert (await runtime.background.tick())["extracted"] == 1
    prompt = extraction_prompts(llm)[-1]
    assert "Pebble" in prompt and "Zyqxolotl" not in prompt
    said, edited = (
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")
        for t in (1_700_000_000, runtime.engine.clock.now())
    )
    assert said in prompt and edited not in prompt
    assert contents(runtime) == ["Alice's axolotl is called Pebble"]


async def test_an_edited_telegram_message_replaces_the_stored_text_and_is_extracted_again(world):
    runtime, llm, tg, dc = world
    llm.script("Lovely!")
    update = tg.push_message(ALICE_TG, ALICE_TG, "I moved to Porto")
    await tg.wait_for_sent(1)
    runtime.engine.clock.advance(31)
    llm.script(facts({"speaker": "P1", "subject": "home", "content": "Alice lives in Porto"}))
    assert (await runtime.background.tick())["extracted"] == 1
    tg.push_edit(update, "I moved to Lisbon")
    await tg.wait_until(lambda: stored_texts(runtime)[0] == "I moved to Lisbon")
    # withdrawn, and the edit is not answered as a new message
    assert contents(runtime) == [] and len(tg.sent) == 1
    runtime.engine.clock.advance(EDIT_SETTLE_S + 1)
    llm.script(facts({"speaker": "P1", "subject": "home", "content": "Alice lives in Lisbon"}))
    assert (await runtime.background.tick())["extracted"] == 1
    assert "Lisbon" in extraction_prompts(llm)[-1] and "Porto" not in extraction_prompts(llm)[-1]
    assert contents(runtime) == ["Alice lives in Lisbon"]


@pytest.mark.parametrize("platform", ["telegram", "discord"])
async def test_ten_edits_31_s_apart_cost_one_extraction_of_the_last_words(world, platform):
    """Issue 44 item 11: each edit was extracted 31 s later, a model call each. An edit now waits
    until its message has settled; the old words are withdrawn at once all the same."""
    runtime, llm, tg, dc = world
    if platform == "telegram":
        llm.script("Lovely!")
        sent = tg.push_message(ALICE_TG, ALICE_TG, "I moved to Porto")
        await tg.wait_for_sent(1)
        runtime.engine.clock.advance(31)
        llm.script(facts({"speaker": "P1", "subject": "home", "content": "Alice lives in Porto"}))
        await runtime.background.tick()
    else:
        sent = await said_and_learned(runtime, llm, dc, "I moved to Porto", "Alice lives in Porto")
    assert contents(runtime) == ["Alice lives in Porto"]
    asked = len(extraction_prompts(llm))
    llm.default = lambda body: facts(
        {"speaker": "P1", "subject": "home", "content": "Alice lives in Faro"}
    )
    towns = [f"Town{n}" for n in range(9)] + ["Faro"]
    for town in towns:
        if platform == "telegram":
            tg.push_edit(sent, f"I moved to {town}")
        else:
            await dc.dispatch_edit(sent, f"<@{BOT_ID}> I moved to {town}")
        await tg.wait_until(lambda town=town: stored_texts(runtime)[0].endswith(town))
        assert contents(runtime) == []  # the old words are withdrawn at once
        runtime.engine.clock.advance(31)
        await runtime.background.tick()
    assert len(extraction_prompts(llm)) == asked  # no extraction while the person keeps editing
    runtime.engine.clock.advance(EDIT_SETTLE_S)
    await runtime.background.tick()
    # one extraction for the ten edits (a session's end reflection may run too: not the edits' cost)
    assert len(extraction_prompts(llm)) == asked + 1
    extraction = extraction_prompts(llm)[-1]
    assert "Faro" in extraction and "Town8" not in extraction
    assert contents(runtime) == ["Alice lives in Faro"]


# -- time ----------------------------------------------------------------------------------------------------
async def test_yesterday_in_a_message_from_last_month_is_read_against_last_month_s_date(tmp_path):
    async with FakeOpenAI() as llm:
        clock = FakeClock(datetime(2026, 10, 22, 12, tzinfo=UTC).timestamp())
        runtime = build_runtime(tmp_path / "bot.db", llm, clock)
        await runtime.start(background_loop=False)
        try:
            llm.script("Congratulations!")
            await runtime.orchestrator.reply(
                dm("telegram", "7", "I passed my driving test yesterday", mid="1")
            )
            # extracted a month later (the bot was down, or the batch was retried)
            clock.advance(31 * DAY)
            llm.script(
                facts(
                    {
                        "speaker": "P1",
                        "subject": "driving",
                        "content": "Alice passed her driving test",
                        "valid_from": "2026-10-21",
                    }
                )
            )
            assert (await runtime.background.tick())["extracted"] == 1
        finally:
            await runtime.stop()
    prompt = extraction_prompts(llm)[-1]
    assert "2026-10-22 (Thursday)" in prompt and "2026-11-22" not in prompt
    assert "yesterday" in prompt.lower()


async def test_a_fact_dated_by_the_model_becomes_true_on_that_date(tmp_path):
    async with FakeOpenAI() as llm:
        clock = FakeClock(datetime(2026, 10, 22, 12, tzinfo=UTC).timestamp())
        runtime = build_runtime(tmp_path / "bot.db", llm, clock)
        await runtime.start(background_loop=False)
        try:
            llm.script("Congratulations!")
            await runtime.orchestrator.reply(
                dm("telegram", "7", "I passed my driving test yesterday", mid="1")
            )
            clock.advance(31)
            llm.script(
                facts(
                    {
                        "speaker": "P1",
                        "subject": "driving",
                        "content": "Alice passed her driving test",
                        "valid_from": "2026-10-21",
                    }
                )
            )
            assert (await runtime.background.tick())["extracted"] == 1
            (valid_from,) = [
                r["valid_from"] for r in runtime.engine.db.rows("SELECT valid_from FROM memories")
            ]
        finally:
            await runtime.stop()
    assert valid_from == datetime(2026, 10, 21, tzinfo=UTC).timestamp()

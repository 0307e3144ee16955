"""A message delivered twice (Telegram re-sends updates it did not see confirmed, e.g. after a crash) is stored
once, buffered for extraction once and answered once (issue 20, finding 6)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import apsw
import pytest
from conftest import HashEmbedder, count

from bot.adapters.telegram_adapter import TelegramAdapter
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.messages import NewMessage
from memory.storage.migrations import MIGRATIONS
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.pipeline_support import build_runtime, dm

ALICE = 55


def said(text: str, mid: str | None = "7") -> NewMessage:
    return NewMessage(
        platform="telegram",
        channel_id="55",
        author_id="alice",
        content=text,
        dm_person_id="alice",
        platform_message_id=mid,
    )


# -- the store ---------------------------------------------------------------------------------------------
def test_a_message_stored_again_under_its_platform_id_is_one_row_with_one_id(engine):
    first = engine.messages.add(said("I adopted a cat named Miso"))
    again = engine.messages.add(said("I adopted a cat named Miso"))
    assert again == first and count(engine, "messages") == 1
    assert engine.messages.delivered("telegram", "55", "7") == (first, False)


def test_the_same_platform_id_in_another_chat_or_without_an_id_is_another_message(engine):
    engine.messages.add(said("hello"))
    engine.messages.add(
        NewMessage(
            platform="telegram",
            channel_id="56",
            author_id="bob",
            content="hello",
            dm_person_id="bob",
            platform_message_id="7",
        )
    )
    engine.messages.add(said("hello", mid=None))
    engine.messages.add(said("hello", mid=None))
    assert count(engine, "messages") == 4


def test_the_migration_keeps_copies_stored_before_it_and_then_stores_each_platform_id_once(
    tmp_path, clock
):
    path = tmp_path / "m.db"
    with MemoryEngine(path, HashEmbedder(), clock) as engine:
        engine.messages.add(said("I adopted a cat named Miso", mid="7"))
        engine.messages.add(said("I adopted a cat named Miso", mid="8"))
    # as a re-delivery left it
    _undo_last_migration(path, "UPDATE messages SET platform_message_id = '7'")

    with MemoryEngine(path, HashEmbedder(), clock) as engine:
        assert count(engine, "messages") == 2  # kept: either may be a memory's source
        # a delete at the source finds both
        assert len(engine.messages.rids_by_platform_id("telegram", "55", ["7"])) == 2
        engine.messages.add(said("I adopted a cat named Miso", mid="7"))
        assert count(engine, "messages") == 2


def _undo_last_migration(path: Path, change: str) -> None:
    """The store as the program before M009 left it, with ``change`` made to it (the migrations after it undone too:
    they are applied by position)."""
    first = next(
        n for n, m in enumerate(MIGRATIONS, start=1) if m.name == "m009_message_idempotence"
    )
    con = apsw.Connection(str(path))
    try:
        for later in MIGRATIONS[first:]:
            for table in re.findall(r"CREATE TABLE (\w+)", later.sql):
                con.execute(f"DROP TABLE {table}")
            for index in re.findall(r"CREATE INDEX (\w+)", later.sql):
                con.execute(f"DROP INDEX IF EXISTS {index}")
            for table, column in re.findall(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", later.sql):
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("DROP INDEX messages_delivered; ALTER TABLE messages DROP COLUMN legacy_copy")
        con.execute(change)
        con.execute("DELETE FROM schema_version WHERE version >= ?", (first,))
    finally:
        con.close()


# -- the orchestrator --------------------------------------------------------------------------------------
async def test_a_message_stored_before_a_crash_is_answered_on_redelivery_without_a_second_copy(
    tmp_path,
):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        try:
            message = dm("telegram", "55", "I adopted a cat named Miso", mid="7")
            # stored, then the process died
            await runtime.orchestrator.replying.arrive(message)
            llm.script("Hello Miso!")
            reply = await runtime.orchestrator.reply(message)
            llm.script("unused")
            again = await runtime.orchestrator.reply(message)
        finally:
            await runtime.runner.run(runtime.engine.close)
            runtime.runner.shutdown()
    assert reply.text == "Hello Miso!" and again.text == ""
    assert len(llm.chat_requests) == 1
    db = MemoryEngine(tmp_path / "bot.db", HashEmbedder())
    try:
        assert (
            count(db, "messages", "role = 'user'") == 1
            and count(db, "messages", "role = 'assistant'") == 1
        )
        assert count(db, "extraction_buffer") == 1
    finally:
        db.close()


# -- through Telegram --------------------------------------------------------------------------------------
@asynccontextmanager
async def telegram_bot(tmp_path: Path) -> AsyncIterator[tuple]:
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        adapter = TelegramAdapter(
            runtime.orchestrator,
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
        )
        await adapter.start()
        try:
            yield runtime, llm, tg
        finally:
            await adapter.stop()
            await runtime.stop()


@pytest.mark.asyncio
async def test_a_telegram_update_delivered_again_is_stored_and_answered_once(tmp_path):
    async with telegram_bot(tmp_path) as (runtime, llm, tg):
        llm.script("Hello Miso!", "Glad to help.")
        first = tg.push_message(ALICE, ALICE, "I adopted a cat named Miso")
        await tg.wait_for_sent(1)
        tg.push_update({"message": first["message"]})  # the same message again, as after a crash
        # answered after the re-delivery was handled (one chat, in order)
        tg.push_message(ALICE, ALICE, "thanks")
        sent = await tg.wait_for_sent(2)
        user_turns = await runtime.runner.run(
            runtime.engine.db.rows, "SELECT content FROM messages WHERE role = 'user' ORDER BY rid"
        )
        buffered = await runtime.runner.run(count, runtime.engine, "extraction_buffer")
        asked = len(llm.chat_requests)  # (stopping then extracts what is buffered)
    assert [m["text"] for m in sent] == ["Hello Miso!", "Glad to help."]
    assert [r["content"] for r in user_turns] == ["I adopted a cat named Miso", "thanks"]
    assert buffered == 2 and asked == 2

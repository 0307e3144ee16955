"""``memory.turns.Turns``: a turn's books on a real store, through the memory thread, as the bot awaits them."""

from __future__ import annotations

import asyncio

import pytest
from conftest import count, dm_ctx, guild_ctx

from memory.models import Arrival, Withdrawn
from memory.scopes import Said
from memory.storage.db import AsyncRunner
from memory.turns import Turns

WORD = "Quetzalnimbus"


@pytest.fixture
async def turns(engine):
    runner = AsyncRunner()
    yield Turns(engine, runner, engine.buffer, engine.privacy, engine.channels)
    runner.shutdown()


def dm(text: str, mid: str | None = "1", person: str = "alice") -> Said:
    return Said(dm_ctx(person), f"discord:dm-{person}", person.title(), text, mid)


async def test_a_message_arrives_stored_and_held_and_its_reply_is_kept_with_it(turns, engine):
    said = dm(f"my boat is called {WORD}")
    arrival = await turns.arrive(said)
    assert (
        arrival.stored_id
        and arrival.buffer_id is not None
        and arrival.remembered
        and not arrival.answered
    )
    # not extracted while the reply is made
    assert count(engine, "extraction_buffer", "held = 1") == 1
    await turns.finish(said, arrival, "What a name!", replier="Pip")
    assert (
        count(engine, "extraction_buffer", "held = 1") == 0
        and count(engine, "extraction_buffer") == 1
    )
    rows = engine.db.rows(
        "SELECT author_id, author_name, role, partition_key FROM messages ORDER BY rid"
    )
    assert [(r["author_id"], r["author_name"], r["role"]) for r in rows] == [
        ("alice", "Alice", "user"),
        ("bot", "Pip", "assistant"),
    ]
    assert {r["partition_key"] for r in rows} == {"dm|alice"}  # both in Alice's DM partition


async def test_two_deliveries_of_one_message_at_once_store_it_once_and_a_third_sees_it_answered(
    turns, engine
):
    said = dm("I adopted a cat named Miso", mid="7")
    first, second = await asyncio.gather(turns.arrive(said), turns.arrive(said))
    assert first.stored_id == second.stored_id and (first.buffer_id is None) != (
        second.buffer_id is None
    )
    held = first if first.buffer_id is not None else second
    await turns.finish(said, held, "Hello Miso!", replier="Pip")
    assert await turns.arrive(said) == Arrival(stored_id=first.stored_id, answered=True)
    assert (
        count(engine, "messages", "role = 'user'") == 1 and count(engine, "extraction_buffer") == 1
    )


async def test_after_privacy_off_nothing_of_the_turn_is_kept_not_even_the_reply(turns, engine):
    turns.privacy.set_person("alice", False)
    said = dm(f"my boat is called {WORD}")
    arrival = await turns.arrive(said)
    assert arrival == Arrival(remembered=False)
    await turns.finish(said, arrival, f"{WORD} is a fine name", replier="Pip")
    assert await turns.observe(said) == Arrival(remembered=False)
    assert (
        count(engine, "messages") == 0
        and count(engine, "extraction_buffer") == 0
        and count(engine, "channel_state") == 0
    )


async def test_a_group_switched_off_keeps_nothing_of_anyone_in_it(turns, engine):
    turns.privacy.set_place("g1", False)
    said = Said(guild_ctx("g1", "bob"), "discord:g1-general", "Bob", f"the code is {WORD}", "9")
    assert await turns.arrive(said) == Arrival(remembered=False)
    assert count(engine, "messages") == 0


async def test_a_turn_that_forgot_something_keeps_none_of_its_words(turns, engine):
    said = dm(f"forget that my boat is called {WORD}")
    arrival = await turns.arrive(said)
    await turns.finish(said, arrival, f"Done, {WORD} is forgotten", replier="Pip", forgot=True)
    # its buffered copy too
    assert count(engine, "messages") == 0 and count(engine, "extraction_buffer") == 0


async def test_nothing_readable_is_not_stored_and_an_observed_message_is_released_at_once(
    turns, engine
):
    assert await turns.arrive(dm("", mid="2")) == Arrival()
    arrival = await turns.observe(
        Said(guild_ctx("g1", "bob"), "discord:g1-general", "Bob", "lunch?", "3")
    )
    assert arrival.stored_id and count(engine, "extraction_buffer", "held = 0") == 1
    assert await turns.observe(
        Said(guild_ctx("g1", "bob"), "discord:g1-general", "Bob", "lunch?", "3")
    ) == Arrival(stored_id=arrival.stored_id)  # re-delivered: not stored, not buffered twice
    assert count(engine, "messages") == 1 and count(engine, "extraction_buffer") == 1


async def test_edits_and_deletes_of_unknown_messages_change_nothing(turns, engine):
    said = dm("hello", mid="5")
    await turns.arrive(said)
    assert not await turns.known("discord", "dm-alice", "6") and not await turns.known(
        "discord", "dm-alice", None
    )
    assert await turns.known("discord", "dm-alice", "5")
    assert await turns.edited(dm("changed", mid="6")) is None
    assert await turns.edited(dm("changed", mid=None)) is None
    assert await turns.deleted("discord", "dm-alice", ("6", "")) == Withdrawn()
    # another chat's message 5 is not this one
    assert await turns.deleted("discord", "dm-bob", ("5",)) == Withdrawn()
    assert count(engine, "messages") == 1


async def test_an_edit_replaces_the_words_and_a_delete_takes_the_message_and_its_reply(
    turns, engine
):
    said = dm(f"my boat is called {WORD}", mid="5")
    arrival = await turns.arrive(said)
    await turns.finish(said, arrival, "Nice", replier="Pip")
    assert await turns.edited(dm("my boat is called Nimbus", mid="5")) == Withdrawn()
    assert (
        engine.db.scalar("SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{WORD}%",)) == 0
    )
    done = await turns.deleted("discord", "dm-alice", ("5",))
    assert done.messages == 2 and count(engine, "messages") == 0  # the reply to it goes with it


async def test_an_edit_after_privacy_off_is_withdrawn_as_a_delete(turns, engine):
    said = dm(f"my boat is called {WORD}", mid="5")
    await turns.arrive(said)
    turns.privacy.set_person("alice", False)
    done = await turns.edited(dm("my boat is called Nimbus", mid="5"))
    assert done is not None and done.messages == 1 and count(engine, "messages") == 0

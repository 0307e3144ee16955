"""SEC-6: a reply for a shared place is checked for the distinctive words of memories that place may not see.

The memory-side check (``memory.recall.leaks``) on a real store, then the whole way out: the real adapters against the
fake Discord and Telegram servers, the real orchestrator, and a scripted model told to repeat a DM secret."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import dm_ctx, guild_ctx, remember, say

from bot.turn.leak_guard import WITHHELD
from memory.models import Scope, Visibility
from tests.pipeline_support import build_runtime, group, platforms

PASSPORT = "my passport number is X4471Q"
MOVING = "I'm secretly moving to Reykjavik"
COFFEE = "I love coffee in the morning and walking my dog after work"


def plant(engine) -> dict[str, str]:
    """Bob's DM-private facts, his facts in another server, the owner's and another server's lore."""
    ids = {
        text: remember(engine, text, scope_id="bob", visibility=Visibility.PRIVATE).id
        for text in (PASSPORT, MOVING, COFFEE)
    }
    ids["other-server"] = remember(
        engine, "Bob's band is called Glasswyrm", scope_id="bob", guild_id="g2"
    ).id
    ids["owner"] = remember(
        engine, "the owner's boat sits at berth 88214", scope=Scope.OWNER, scope_id="root"
    ).id
    ids["lore"] = remember(
        engine, "g2 meets at the Quillon pub", scope=Scope.GUILD, scope_id="g2"
    ).id
    return ids


# -- the check itself ----------------------------------------------------------------------------------
@pytest.fixture
def engine(any_engine):
    """The check reads the word index: FTS5 on SQLite, the GIN tsvector on PostgreSQL (SCALE-1). Both, every test."""
    return any_engine


def test_a_dm_private_passport_number_repeated_in_a_server_is_a_leak_named_by_memory_and_kind(
    engine,
):
    ids = plant(engine)
    leaks = engine.leaks.check(guild_ctx("g1", "bob"), "Sure Bob, your passport number is X4471Q.")
    assert [(leak.memory_id, leak.kind) for leak in leaks] == [(ids[PASSPORT], "dm-private")]
    assert "x4471q" in leaks[0].words


def test_one_rare_word_of_a_secret_is_enough(engine):
    plant(engine)
    assert [
        leak.kind
        for leak in engine.leaks.check(guild_ctx("g1", "bob"), "Bob, have fun in Reykjavik!")
    ] == ["dm-private"]


@pytest.mark.parametrize(
    "reply, kind",
    [
        ("Is Glasswyrm playing tonight?", "server"),
        ("Try berth 88214 for the boat.", "owner"),
        ("See you at the Quillon!", "other-server-lore"),
    ],
)
def test_another_server_s_facts_the_owner_s_memory_and_another_server_s_lore_are_leaks_too(
    engine, reply, kind
):
    plant(engine)
    assert [leak.kind for leak in engine.leaks.check(guild_ctx("g1", "alice"), reply)] == [kind]


def test_common_words_of_a_private_memory_are_no_leak(engine):
    plant(engine)
    for reply in (
        "I love coffee in the morning too!",
        "Walking the dog after work is great.",
        "Moving house is hard.",
        "It's 10am.",
    ):
        assert engine.leaks.check(guild_ctx("g1", "bob"), reply) == (), reply


def test_the_same_words_said_in_that_server_are_no_leak(engine):
    plant(engine)
    say(
        engine,
        "big news: I'm moving to Reykjavik, passport number X4471Q is ready",
        author="bob",
        guild="g1",
    )
    assert (
        engine.leaks.check(guild_ctx("g1", "bob"), "Reykjavik! Your passport X4471Q is ready then.")
        == ()
    )
    # another server
    assert (
        engine.leaks.check(guild_ctx("g3", "bob"), "Reykjavik! Your passport X4471Q is ready then.")
        != ()
    )


def test_words_the_place_may_see_in_its_memories_or_the_turn_are_no_leak(engine):
    plant(engine)
    remember(engine, "Bob plays in Glasswyrm on Fridays", scope_id="bob", guild_id="g1")
    assert engine.leaks.check(guild_ctx("g1", "bob"), "Is Glasswyrm playing tonight?") == ()
    assert (
        engine.leaks.check(
            guild_ctx("g1", "bob"), "Reykjavik, you said?", said="what about Reykjavik?"
        )
        == ()
    )


def test_another_person_saying_the_words_of_a_dm_only_fact_does_not_make_a_repeat_fine(engine):
    """Bob's DM fact: Alice saying "Reykjavik" in the group, in this turn or stored, is her guess
    (or a leak she carried in, in words or a photo's caption), not Bob's word: the reply is held."""
    plant(engine)
    alice = guild_ctx("g1", "alice")
    assert engine.leaks.check(alice, "Reykjavik, you said?", said="what about Reykjavik?") != ()
    say(engine, "is Bob moving to Reykjavik?", author="alice", guild="g1")
    assert engine.leaks.check(alice, "Yes, Reykjavik!") != ()
    say(engine, "yes, I'm moving to Reykjavik", author="bob", guild="g1")
    assert engine.leaks.check(alice, "Yes, Reykjavik!") == ()


def test_in_the_dm_it_was_said_in_nothing_leaks(engine):
    plant(engine)
    assert (
        engine.leaks.check(
            dm_ctx("bob"), "Your passport number is X4471Q and you're moving to Reykjavik."
        )
        == ()
    )


def test_a_forgotten_memory_no_longer_counts(engine):
    ids = plant(engine)
    engine.memories.delete(ids[MOVING])
    assert engine.leaks.check(guild_ctx("g1", "bob"), "Bob, have fun in Reykjavik!") == ()


def test_query_syntax_in_a_reply_is_only_words_and_the_secret_is_still_found(engine):
    ids = plant(engine)
    for reply in (
        "X4471Q:* & !(passport) | <-> Reykjavik",
        '"X4471Q" AND ptoken : *',
        "x4471q' OR '1'='1",
    ):
        assert ids[PASSPORT] in {
            leak.memory_id for leak in engine.leaks.check(guild_ctx("g1", "bob"), reply)
        }, reply


# -- the way out: the real adapters, the orchestrator, a model that repeats the secret ------------------------
BOB_DC, DM_BOB_DC, GUILD, GENERAL = 7001, 9100, 8000, 8001
BOB_TG, GROUP_TG = 55, -1001


def guilds(dc) -> None:
    dc.add_guild(GUILD, "Guild", channels=[(GENERAL, "general")])


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, guilds) as parts:
        yield parts


async def tell_in_dms(runtime, dc, tg) -> None:
    """Bob /remembers his secrets in his Discord DM and his Telegram DM: both filed DM-private."""
    await dc.dispatch_interaction(
        "remember", user_id=BOB_DC, channel_id=DM_BOB_DC, options={"text": PASSPORT}, username="bob"
    )
    await dc.dispatch_interaction(
        "remember", user_id=BOB_DC, channel_id=DM_BOB_DC, options={"text": MOVING}, username="bob"
    )
    await dc.wait_for_interaction_responses(2)
    tg.push_message(
        BOB_TG,
        BOB_TG,
        f"/remember {PASSPORT}",
        first_name="Bob",
        entities=[{"type": "bot_command", "offset": 0, "length": 9}],
    )
    await tg.wait_for_sent(1)
    assert (
        runtime.engine.db.scalar("SELECT COUNT(*) FROM memories WHERE visibility = 'private'") == 3
    )


def posted(dc, tg) -> str:
    return json.dumps([m.get("content") or m.get("text") for m in [*dc.sent, *tg.sent]]).lower()


@pytest.mark.asyncio
async def test_a_dm_secret_the_model_repeats_never_reaches_the_discord_server_or_the_telegram_group(
    world, caplog
):
    runtime, llm, tg, dc = world
    await tell_in_dms(runtime, dc, tg)
    caplog.set_level(logging.WARNING, logger="bot.orchestrator")
    leaky = "Bob, your passport number is X4471Q and you're moving to Reykjavik!"
    llm.script(leaky, leaky)
    await dc.dispatch_message(
        GENERAL, BOB_DC, "what's new with me?", guild_id=GUILD, mentions_bot=True, username="bob"
    )
    assert (await dc.wait_for_sent(1))[-1]["content"] == WITHHELD
    llm.script(leaky, "Not much I can say here!")
    tg.push_message(
        GROUP_TG,
        BOB_TG,
        "what's new with me?",
        chat_type="supergroup",
        mention=True,
        first_name="Bob",
    )
    assert (await tg.wait_for_sent(2))[-1]["text"] == "Not much I can say here!"
    assert "x4471q" not in posted(dc, tg) and "reykjavik" not in posted(dc, tg)
    retries = [b for b in llm.chat_requests if "could not be posted" in json.dumps(b)]
    # instructed generally
    assert len(retries) == 2 and all("x4471q" not in json.dumps(b).lower() for b in retries)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert (
        "dm-private" in logged
        and "x4471q" not in logged.lower()
        and "reykjavik" not in logged.lower()
    )
    history = json.dumps(
        runtime.engine.db.rows("SELECT content FROM messages WHERE role = 'assistant'")
    ).lower()
    assert "x4471q" not in history  # the withheld draft is not kept either


@pytest.mark.asyncio
async def test_the_same_secret_repeated_in_the_dm_is_posted(world):
    runtime, llm, tg, dc = world
    await tell_in_dms(runtime, dc, tg)
    llm.script("Your passport number is X4471Q.")
    await dc.dispatch_message(DM_BOB_DC, BOB_DC, "what's my passport number?", username="bob")
    assert (await dc.wait_for_sent(1))[-1]["content"] == "Your passport number is X4471Q."
    assert len(llm.chat_requests) == 1


@pytest.mark.asyncio
async def test_words_said_in_the_server_itself_are_posted(world):
    runtime, llm, tg, dc = world
    await tell_in_dms(runtime, dc, tg)
    llm.script("Reykjavik, wow!")
    await dc.dispatch_message(
        GENERAL,
        BOB_DC,
        "I'm moving to Reykjavik!",
        guild_id=GUILD,
        mentions_bot=True,
        username="bob",
    )
    assert (await dc.wait_for_sent(1))[-1]["content"] == "Reykjavik, wow!"


@pytest.mark.asyncio
async def test_a_streamed_reply_in_a_shared_place_never_streams_the_secret(tmp_path, srv):
    from memory.clock import FakeClock

    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await runtime.start(background_loop=False)
    try:
        remember(runtime.engine, PASSPORT, scope_id="discord:7", visibility=Visibility.PRIVATE)
        streamed: list[str] = []

        async def sink(delta: str) -> None:
            streamed.append(delta)

        leaky = "Hello Bob. Nice to see you here. Your passport number is X4471Q. Anything else?"
        srv.script(leaky, "Hello Bob. Nice to see you here.")
        reply = await runtime.orchestrator.reply(
            group("discord", "g1", "7", "hi", name="Bob"), sink
        )
        assert "x4471q" not in "".join(streamed).lower()
        # the sentences before it went out
        assert "".join(streamed).startswith("Hello Bob. Nice to see you here.")
        assert reply.text == "Hello Bob. Nice to see you here."
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()

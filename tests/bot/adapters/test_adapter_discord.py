"""The Discord adapter, run for real (discord.py gateway + REST) against the local fake Discord."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.adapters.common import COMMANDS, ERROR_APOLOGY, LoginRejected
from bot.adapters.discord_adapter import DiscordAdapter
from bot.types import Reply, Verdict
from tests.adapter_support import ScriptedConversation, wait_for_logged_error
from tests.fakes import DISCORD_BOT_ID, FakeDiscord
from tests.fakes import discord_payloads as payloads

GUILD, CHANNEL, BOT_CHANNEL, DM_CHANNEL = 1001, 2002, 2003, 5005
ALICE, BOB, CAROL, OTHER_BOT = 3003, 3004, 3005, 3999
EPHEMERAL = 64


@pytest.fixture
def conv() -> ScriptedConversation:
    return ScriptedConversation()


@pytest.fixture
async def dsc():
    async with FakeDiscord() as srv:
        srv.add_guild(
            GUILD, "Test guild", channels=[(CHANNEL, "general"), (BOT_CHANNEL, "companion")]
        )
        restore = srv.patch_discord()
        try:
            yield srv
        finally:
            restore()


@pytest.fixture
async def bot(dsc, conv):
    """A started adapter that answers freely in #companion; always stopped."""
    adapter = DiscordAdapter(
        conv,
        "bot-token",
        channels=[str(BOT_CHANNEL)],
        guild_ready_timeout=0.05,
        ready_timeout=5,
        defer_after=0.2,
    )
    await adapter.start()
    try:
        yield adapter
    finally:
        await adapter.stop()


async def settle(dsc: FakeDiscord, conv: ScriptedConversation) -> None:
    """Events are handled in order: once a later, unaddressed message is observed, earlier ones are done."""
    count = len(conv.observed)
    await dsc.dispatch_message(CHANNEL, CAROL, "(sentinel)", guild_id=GUILD, username="carol")
    await conv.wait_until(lambda: len(conv.observed) > count)


async def test_start_syncs_the_slash_commands(bot, dsc):
    assert bot.client.user.id == DISCORD_BOT_ID
    # every command but /start
    assert sorted(c["name"] for c in dsc.commands[None]) == sorted(set(COMMANDS) - {"start"})
    link = next(c for c in dsc.commands[None] if c["name"] == "link")
    assert [(o["name"], o.get("required", False)) for o in link["options"]] == [("code", False)]


async def test_dm_gets_a_reply_after_typing(bot, dsc, conv):
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "psst")
    sent = await dsc.wait_for_sent(1)
    assert sent[0]["channel_id"] == DM_CHANNEL and sent[0]["content"] == "echo: psst"
    assert "message_reference" not in sent[0]
    assert sent[0]["allowed_mentions"]["parse"] == []  # model output can never ping @everyone
    assert dsc.typing == [DM_CHANNEL]
    calls = [c["path"] for c in dsc.rest_calls]
    assert calls.index(f"/api/v10/channels/{DM_CHANNEL}/typing") < calls.index(
        f"/api/v10/channels/{DM_CHANNEL}/messages"
    )
    (msg,) = conv.replies
    assert (
        msg.platform,
        msg.channel_id,
        msg.guild_id,
        msg.author_id,
        msg.author_name,
        msg.text,
    ) == (
        "discord",
        str(DM_CHANNEL),
        None,
        str(ALICE),
        "alice",
        "psst",
    )
    assert msg.is_dm and msg.message_id and msg.created_at > 0


async def test_guild_mention_gets_a_reply_without_the_mention(bot, dsc, conv):
    data = await dsc.dispatch_message(
        CHANNEL, ALICE, f"hey <@{DISCORD_BOT_ID}>, how are you?", guild_id=GUILD, mentions_bot=True
    )
    sent = await dsc.wait_for_sent(1)
    (msg,) = conv.replies
    assert (
        msg.text == "hey how are you?"
        and msg.guild_id == str(GUILD)
        and msg.channel_id == str(CHANNEL)
    )
    assert sent[0]["channel_id"] == CHANNEL and int(
        sent[0]["message_reference"]["message_id"]
    ) == int(data["id"])
    assert dsc.typing == [CHANNEL] and conv.observed == []


async def test_configured_channel_gets_replies_without_mention(bot, dsc, conv):
    await dsc.dispatch_message(BOT_CHANNEL, ALICE, "good morning", guild_id=GUILD)
    sent = await dsc.wait_for_sent(1)
    assert sent[0]["channel_id"] == BOT_CHANNEL and [m.text for m in conv.replies] == [
        "good morning"
    ]


async def test_unaddressed_guild_message_is_only_observed(bot, dsc, conv):
    await dsc.dispatch_message(CHANNEL, BOB, "lunch anyone?", guild_id=GUILD, username="bob")
    await conv.wait_until(lambda: conv.observed)
    (msg,) = conv.observed
    assert (msg.text, msg.author_id, msg.guild_id) == ("lunch anyone?", str(BOB), str(GUILD))
    assert conv.replies == [] and dsc.sent == [] and dsc.typing == []


async def test_reply_to_the_bot_gets_a_reply(bot, dsc, conv):
    await dsc.dispatch_message(CHANNEL, ALICE, "hi", guild_id=GUILD, mentions_bot=True)
    first = await dsc.wait_for_sent(1)
    await dsc.dispatch_message(
        CHANNEL, ALICE, "and you?", guild_id=GUILD, reply_to=first[0]["message_id"]
    )
    await dsc.wait_for_sent(2)
    assert [m.text for m in conv.replies] == ["hi", "and you?"] and conv.observed == []


async def test_own_and_other_bots_messages_are_ignored(bot, dsc, conv):
    await dsc.dispatch_message(CHANNEL, ALICE, "hi", guild_id=GUILD, mentions_bot=True)
    await dsc.wait_for_sent(1)  # the fake echoes this post back over the gateway, as Discord does
    other_bot = payloads.message(
        payloads.snowflake(),
        CHANNEL,
        payloads.user(OTHER_BOT, "otherbot", bot=True),
        f"<@{DISCORD_BOT_ID}> beep",
        guild_id=str(GUILD),
        member=payloads.member(),
        mentions=[payloads.bot_user()],
    )
    await dsc.dispatch("MESSAGE_CREATE", other_bot)
    await settle(dsc, conv)
    assert [m.text for m in conv.replies] == ["hi"]
    assert [m.text for m in conv.observed] == ["(sentinel)"] and len(dsc.sent) == 1


async def test_long_reply_is_split_into_three_parts(bot, dsc, conv):
    long_text = ("chunk " * 750).strip()  # 4499 characters
    conv.script.append(Reply(text=long_text))
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "tell me everything")
    # answered after it: one channel, in order
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "thanks")
    sent = await dsc.wait_for_sent(4)
    assert sent[3]["content"] == "echo: thanks"
    parts = [m["content"] for m in sent[:3]]
    assert all(len(p) <= 2000 for p in parts) and " ".join(parts) == long_text


async def test_participants_are_the_recent_other_speakers(bot, dsc, conv):
    await dsc.dispatch_message(CHANNEL, BOB, "I'm back from Lisbon", guild_id=GUILD, username="bob")
    await dsc.dispatch_message(CHANNEL, CAROL, "welcome back!", guild_id=GUILD, username="carol")
    await dsc.dispatch_message(CHANNEL, BOB, "thanks", guild_id=GUILD, username="bob")
    await dsc.dispatch_message(
        CHANNEL, ALICE, "what did Bob do?", guild_id=GUILD, mentions_bot=True
    )
    await dsc.wait_for_sent(1)
    (msg,) = conv.replies
    # distinct, newest last, no bot
    assert msg.participants == (
        (str(CAROL), "carol"),
        (str(BOB), "bob"),
    )
    assert conv.observed[0].participants == ()
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "hi")
    await dsc.wait_for_sent(2)
    assert conv.replies[1].participants == ()  # per channel


async def test_slash_remember_answers_ephemerally(bot, dsc, conv):
    await dsc.dispatch_interaction(
        "remember",
        user_id=ALICE,
        channel_id=CHANNEL,
        guild_id=GUILD,
        options={"text": "I take my tea with milk"},
    )
    (response,) = await dsc.wait_for_interaction_responses(1)
    assert response["type"] == 4 and response["data"]["flags"] == EPHEMERAL
    assert response["data"]["content"] == "remember: I take my tea with milk"
    (command,) = conv.commands
    assert (command.name, command.argument) == ("remember", "I take my tea with milk")
    msg = command.message
    assert (msg.platform, msg.author_id, msg.author_name, msg.guild_id, msg.channel_id) == (
        "discord",
        str(ALICE),
        "alice",
        str(GUILD),
        str(CHANNEL),
    )
    assert msg.text == "/remember I take my tea with milk"


async def test_slash_link_with_and_without_a_code(bot, dsc, conv):
    await dsc.dispatch_interaction("link", user_id=ALICE, channel_id=DM_CHANNEL)
    await dsc.wait_for_interaction_responses(1)
    await dsc.dispatch_interaction(
        "link", user_id=ALICE, channel_id=DM_CHANNEL, options={"code": "XK-42"}
    )
    responses = await dsc.wait_for_interaction_responses(2)
    assert [(c.name, c.argument, c.message.guild_id) for c in conv.commands] == [
        ("link", "", None),
        ("link", "XK-42", None),
    ]
    assert [r["data"]["content"] for r in responses] == ["link:", "link: XK-42"]
    assert all(r["data"]["flags"] == EPHEMERAL for r in responses)


async def test_slash_memories_forget_export_are_routed(bot, dsc, conv):
    await dsc.dispatch_interaction("memories", user_id=ALICE, channel_id=DM_CHANNEL)
    await dsc.dispatch_interaction(
        "forget", user_id=ALICE, channel_id=DM_CHANNEL, options={"text": "tea"}
    )
    await dsc.dispatch_interaction("export", user_id=ALICE, channel_id=DM_CHANNEL)
    await dsc.wait_for_interaction_responses(3)
    assert sorted((c.name, c.argument) for c in conv.commands) == [
        ("export", ""),
        ("forget", "tea"),
        ("memories", ""),
    ]


async def test_slow_command_is_deferred_then_followed_up(bot, dsc, conv):
    release = asyncio.Event()

    async def slow(name, argument):
        await release.wait()
        return "exported 12 memories"

    conv.command_script.append(slow)
    await dsc.dispatch_interaction("export", user_id=ALICE, channel_id=DM_CHANNEL)
    (response,) = await dsc.wait_for_interaction_responses(1)
    # "thinking...", only for them
    assert response["type"] == 5 and response["data"]["flags"] == EPHEMERAL
    release.set()
    await dsc.wait_until(lambda: dsc.followups)
    assert dsc.followups[0]["content"] == "exported 12 memories"


async def test_very_long_command_answer_is_attached_as_a_file(bot, dsc, conv):
    conv.command_script.append("memory line\n" * 600)  # 7200 characters
    await dsc.dispatch_interaction("export", user_id=ALICE, channel_id=DM_CHANNEL)
    (response,) = await dsc.wait_for_interaction_responses(1)
    assert "attached" in response["data"]["content"] and response["data"]["flags"] == EPHEMERAL
    (callback,) = [c for c in dsc.rest_calls if c["path"].endswith("/callback")]
    assert callback["body"]["_files"] == ["export.txt"]


async def test_a_failing_conversation_does_not_kill_the_client(bot, dsc, conv, caplog):
    conv.script.append(RuntimeError("the orchestrator broke"))
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "first")
    await dsc.wait_for_sent(1)
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "second")
    sent = await dsc.wait_for_sent(2)
    assert [m["content"] for m in sent] == [ERROR_APOLOGY, "echo: second"]
    await wait_for_logged_error(caplog, "the orchestrator broke")


async def test_a_failing_event_is_logged_and_the_client_goes_on(bot, dsc, conv, caplog):
    conv.observe_error = ValueError("store is down")
    await dsc.dispatch_message(CHANNEL, BOB, "chatter", guild_id=GUILD, username="bob")
    await dsc.dispatch_message(DM_CHANNEL, ALICE, "still alive?")
    sent = await dsc.wait_for_sent(1)
    assert sent[0]["content"] == "echo: still alive?"
    record = await wait_for_logged_error(caplog, "store is down")
    assert record.levelno == logging.ERROR and "on_message" in record.getMessage()


async def test_a_failing_command_answers_with_an_apology(bot, dsc, conv, caplog):
    conv.command_script.append(RuntimeError("no such table"))
    await dsc.dispatch_interaction("memories", user_id=ALICE, channel_id=DM_CHANNEL)
    (response,) = await dsc.wait_for_interaction_responses(1)
    assert response["data"]["content"] == ERROR_APOLOGY and response["data"]["flags"] == EPHEMERAL
    await wait_for_logged_error(caplog, "no such table")


async def test_a_wrong_token_is_rejected_cleanly(conv):
    async with FakeDiscord(token="good") as srv:
        restore = srv.patch_discord()
        try:
            adapter = DiscordAdapter(conv, "bad", guild_ready_timeout=0.05)
            with pytest.raises(LoginRejected):
                await adapter.start()
            await adapter.stop()
        finally:
            restore()
    assert adapter.client.is_closed()


async def test_the_voice_skip_rule_lets_the_bot_stay_silent_on_unaddressed_text_in_a_configured_channel(
    bot, dsc, conv
):
    conv.script.append(Reply("", skipped=True))
    await dsc.dispatch_message(BOT_CHANNEL, ALICE, "anyone up for lunch?", guild_id=GUILD)
    await dsc.dispatch_message(
        BOT_CHANNEL, ALICE, f"<@{DISCORD_BOT_ID}> are you?", guild_id=GUILD, mentions_bot=True
    )
    await dsc.wait_for_sent(1)
    skipped, mentioned = conv.replies
    # the model may stay silent only on the first
    assert (skipped.addressed, mentioned.addressed) == (
        False,
        True,
    )
    # the silence sent nothing, not even an empty message
    assert [m["content"] for m in dsc.sent] == ["echo: are you?"]


# -- ORCH-10/12: manners, acknowledgements, reactions ---------------------------------------------------------------
async def test_server_talk_not_spoken_to_the_bot_asks_the_manners_listing_where_the_operator_listed_it(
    bot, dsc, conv
):
    conv.verdicts = [Verdict(False), Verdict(True)]
    await dsc.dispatch_message(CHANNEL, BOB, "lunch?", guild_id=GUILD, username="bob")
    await dsc.dispatch_message(
        BOT_CHANNEL, BOB, "how do knots work?", guild_id=GUILD, username="bob"
    )
    await dsc.wait_for_sent(1)
    assert [(m.text, listening) for m, listening in conv.asked_manners] == [
        ("lunch?", False),
        ("how do knots work?", True),
    ]
    assert [m.text for m in conv.observed] == ["lunch?"] and [m.text for m in conv.replies] == [
        "how do knots work?"
    ]
    await dsc.dispatch_message(
        CHANNEL, BOB, "hi", guild_id=GUILD, mentions_bot=True, username="bob"
    )
    await dsc.wait_for_sent(2)
    assert len(conv.asked_manners) == 2  # a mention is answered without asking


async def test_a_light_acknowledgement_is_a_reaction_on_the_message_and_a_failing_one_costs_nothing(
    bot, dsc, conv
):
    conv.verdicts = [Verdict(False, "👍")]
    said = await dsc.dispatch_message(CHANNEL, BOB, "thanks!", guild_id=GUILD, username="bob")
    await dsc.wait_until(lambda: dsc.reactions)
    assert dsc.reactions == [{"channel_id": CHANNEL, "message_id": int(said["id"]), "emoji": "👍"}]
    assert [m.text for m in conv.observed] == ["thanks!"] and dsc.sent == []
    # refused by Discord (the fake: 404); logged, stored anyway
    conv.verdicts = [Verdict(False, "not-an-emoji/../x")]
    await dsc.dispatch_message(CHANNEL, BOB, "ok", guild_id=GUILD, username="bob")
    await settle(dsc, conv)
    assert [m.text for m in conv.observed][:2] == ["thanks!", "ok"]


async def test_the_posts_of_a_reply_are_reported_with_the_message_they_answer(bot, dsc, conv):
    conv.script = ["x" * 2500]  # two posts
    said = await dsc.dispatch_message(
        CHANNEL, ALICE, "long one please", guild_id=GUILD, mentions_bot=True
    )
    await conv.wait_until(lambda: conv.posted_ids)
    (message, posts), sent = conv.posted_ids[0], dsc.sent
    assert (
        message.message_id == said["id"]
        and posts == tuple(str(s["message_id"]) for s in sent)
        and len(posts) == 2
    )


async def test_reactions_of_people_reach_the_conversation_and_the_bots_own_do_not(bot, dsc, conv):
    await dsc.dispatch_reaction(CHANNEL, 777, DISCORD_BOT_ID, "👍", username="companion")
    await dsc.dispatch_reaction(CHANNEL, 777, ALICE, "👎", username="alice")
    await dsc.dispatch_reaction(DM_CHANNEL, 778, BOB, "❤️", username="bob")
    # the server's owner: may move its lore (ORCH-12)
    await dsc.dispatch_reaction(CHANNEL, 777, payloads.OWNER_ID, "👍", username="owner")
    await conv.wait_until(lambda: len(conv.reactions) == 3)
    first, second, third = conv.reactions
    assert [r.by_admin for r in conv.reactions] == [False, False, True]
    assert (
        first.platform,
        first.channel_id,
        first.post_id,
        first.user_id,
        first.emoji,
        first.guild_id,
    ) == (
        "discord",
        str(CHANNEL),
        "777",
        str(ALICE),
        "👎",
        str(GUILD),
    )
    assert (second.channel_id, second.user_id, second.emoji, second.guild_id) == (
        str(DM_CHANNEL),
        str(BOB),
        "❤️",
        None,
    )

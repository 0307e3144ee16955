"""The Telegram adapter, run for real (python-telegram-bot polling) against the local fake Bot API."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from bot.adapters.common import COMMANDS, ERROR_APOLOGY, LoginRejected
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.types import Reply, Verdict
from tests.adapter_support import ScriptedConversation, wait_for_logged_error
from tests.fakes import TELEGRAM_BOT_ID, FakeTelegram

TOKEN = "123456:SECRET-TEST-TOKEN"
ALICE, BOB, GROUP = 111, 222, -100


@pytest.fixture
def conv() -> ScriptedConversation:
    return ScriptedConversation()


@pytest.fixture
async def tg(conv):
    """A fake Bot API server with a started adapter; always stopped."""
    async with FakeTelegram(token=TOKEN) as srv:
        adapter = TelegramAdapter(
            conv,
            TOKEN,
            base_url=f"{srv.url}/bot",
            base_file_url=f"{srv.url}/file/bot",
            typing_interval=0.05,
        )
        await adapter.start()
        try:
            yield srv
        finally:
            await adapter.stop()


def push_command(srv: FakeTelegram, chat_id: int, user_id: int, text: str, **kwargs) -> None:
    """A command message as Telegram sends it: a bot_command entity over the leading /word."""
    command = text.split(maxsplit=1)[0]
    srv.push_message(
        chat_id,
        user_id,
        text,
        entities=[{"type": "bot_command", "offset": 0, "length": len(command)}],
        **kwargs,
    )


def methods(srv: FakeTelegram) -> list[str]:
    return [c["method"] for c in srv.calls if c["method"] != "getUpdates"]


async def test_dm_gets_a_reply_after_typing(tg, conv):
    before = time.time()
    tg.push_message(ALICE, ALICE, "hello there", username="alice")
    sent = await tg.wait_for_sent(1)
    assert sent[0]["chat_id"] == ALICE and sent[0]["text"] == "echo: hello there"
    assert "reply_parameters" not in sent[0]  # no quoting in a private chat
    assert tg.actions[0] == {"chat_id": ALICE, "action": "typing"}
    assert methods(tg).index("sendChatAction") < methods(tg).index("sendMessage")
    (msg,) = conv.replies
    assert (msg.platform, msg.channel_id, msg.guild_id, msg.author_id, msg.author_name) == (
        "telegram",
        str(ALICE),
        None,
        str(ALICE),
        "Alice",
    )
    assert msg.is_dm and msg.message_id is not None and msg.created_at >= int(before) - 1
    assert tg.unknown_calls == []


async def test_group_chatter_is_only_observed(tg, conv):
    tg.push_message(GROUP, BOB, "anyone seen my keys?", chat_type="group", first_name="Bob")
    await conv.wait_until(lambda: conv.observed)
    (msg,) = conv.observed
    assert (
        msg.text == "anyone seen my keys?"
        and msg.guild_id == str(GROUP)
        and msg.channel_id == str(GROUP)
    )
    assert conv.replies == [] and tg.sent == [] and tg.actions == []


async def test_group_mention_gets_a_reply_without_the_mention(tg, conv):
    tg.push_message(GROUP, BOB, "I lost my keys", chat_type="supergroup", first_name="Bob")
    tg.push_message(
        GROUP,
        ALICE,
        "hey @companion_bot, where are Bob's keys?",
        chat_type="supergroup",
        mention=True,
    )
    sent = await tg.wait_for_sent(1)
    (msg,) = conv.replies
    assert msg.text == "hey where are Bob's keys?" and msg.guild_id == str(GROUP)
    assert msg.participants == ((str(BOB), "Bob"),)
    assert sent[0]["reply_parameters"]["message_id"] == int(msg.message_id)  # quoted in groups
    assert [m.text for m in conv.observed] == ["I lost my keys"]


async def test_reply_to_the_bot_gets_a_reply(tg, conv):
    tg.push_message(GROUP, ALICE, "@companion_bot hi", chat_type="group", mention=True)
    await tg.wait_for_sent(1)
    tg.push_message(GROUP, ALICE, "and how are you?", chat_type="group", reply_to_bot=True)
    sent = await tg.wait_for_sent(2)
    assert [m.text for m in conv.replies] == ["hi", "and how are you?"]
    assert sent[1]["text"] == "echo: and how are you?" and conv.observed == []


@pytest.mark.parametrize(
    "text, name, argument",
    [
        ("/start", "start", ""),
        (
            "/remember I take my tea with milk\nand no sugar",
            "remember",
            "I take my tea with milk\nand no sugar",
        ),
        ("/forget tea", "forget", "tea"),
        ("/memories", "memories", ""),
        ("/link ABC-123", "link", "ABC-123"),
        ("/export", "export", ""),
    ],
)
async def test_each_command_is_routed_with_its_argument(tg, conv, text, name, argument):
    push_command(tg, ALICE, ALICE, text)
    sent = await tg.wait_for_sent(1)
    (command,) = conv.commands
    assert (command.name, command.argument) == (name, argument)
    assert command.message.platform == "telegram" and command.message.author_id == str(ALICE)
    assert sent[0]["text"] == f"{name}: {argument}".strip()
    assert conv.replies == [] and conv.observed == []


async def test_group_command_addressed_to_the_bot_by_username(tg, conv):
    push_command(
        tg, GROUP, ALICE, "/remember@companion_bot the meeting is on Friday", chat_type="group"
    )
    await tg.wait_for_sent(1)
    assert [(c.name, c.argument, c.message.guild_id) for c in conv.commands] == [
        ("remember", "the meeting is on Friday", str(GROUP))
    ]


async def test_commands_are_announced_at_start(tg):
    (commands,) = tg.commands.values()
    assert [c["command"] for c in commands] == list(COMMANDS)


async def test_long_reply_is_split_at_4096(tg, conv):
    long_text = ("word " * 1000).strip()  # 4999 characters
    conv.script.append(Reply(text=long_text))
    tg.push_message(ALICE, ALICE, "tell me everything")
    tg.push_message(ALICE, ALICE, "thanks")  # answered after the long reply (one chat, in order)
    sent = await tg.wait_for_sent(3)
    assert sent[2]["text"] == "echo: thanks"
    assert [len(m["text"]) for m in sent[:2]] == [4094, 904]
    assert " ".join(m["text"] for m in sent[:2]) == long_text


async def test_typing_is_refreshed_while_a_slow_reply_is_built(tg, conv):
    release = asyncio.Event()

    async def slow(message):
        await release.wait()
        return "done thinking"

    conv.script.append(slow)
    tg.push_message(ALICE, ALICE, "think hard")
    # first action + two refreshes (every 0.05 s here)
    await tg.wait_until(lambda: len(tg.actions) >= 3)
    release.set()
    await tg.wait_for_sent(1)
    after = len(tg.actions)
    # four refresh intervals: a refresher left running would add about four
    await asyncio.sleep(0.2)
    assert tg.sent[0]["text"] == "done thinking"
    # (one request may have been in flight when it was cancelled)
    assert len(tg.actions) <= after + 1


async def test_a_failing_conversation_does_not_stop_the_bot(tg, conv, caplog):
    conv.script.append(RuntimeError("the orchestrator broke"))
    tg.push_message(ALICE, ALICE, "first")
    await tg.wait_for_sent(1)
    tg.push_message(ALICE, ALICE, "second")
    sent = await tg.wait_for_sent(2)
    assert [m["text"] for m in sent] == [ERROR_APOLOGY, "echo: second"]
    failure = await wait_for_logged_error(caplog, "the orchestrator broke")
    assert failure.levelno == logging.ERROR


async def test_a_failing_observe_is_logged_and_polling_goes_on(tg, conv, caplog):
    conv.observe_error = ValueError("store is down")
    tg.push_message(GROUP, BOB, "chatter", chat_type="group")
    tg.push_message(ALICE, ALICE, "still alive?")
    sent = await tg.wait_for_sent(1)
    assert sent[0]["text"] == "echo: still alive?"
    assert (await wait_for_logged_error(caplog, "store is down")).levelno == logging.ERROR


async def test_the_token_never_reaches_the_logs(conv, caplog):
    caplog.set_level(logging.DEBUG)
    async with FakeTelegram(token=TOKEN) as srv:
        adapter = TelegramAdapter(conv, TOKEN, base_url=f"{srv.url}/bot")
        await adapter.start()
        try:
            srv.push_message(ALICE, ALICE, "hi")
            await srv.wait_for_sent(1)
        finally:
            await adapter.stop()
    assert "getMe" in caplog.text and "sendMessage" in caplog.text  # httpx did log the requests...
    assert TOKEN not in caplog.text and "SECRET" not in caplog.text  # ...without the token


async def test_a_wrong_token_fails_start_and_cleans_up(conv):
    async with FakeTelegram(token=TOKEN) as srv:
        adapter = TelegramAdapter(conv, "999:WRONG", base_url=f"{srv.url}/bot")
        with pytest.raises(LoginRejected) as raised:
            await adapter.start()
        assert not adapter.app.running
    assert "WRONG" not in str(raised.value) and raised.value.__cause__ is None


async def test_stop_confirms_handled_updates(conv):
    async with FakeTelegram(token=TOKEN) as srv:
        adapter = TelegramAdapter(conv, TOKEN, base_url=f"{srv.url}/bot")
        await adapter.start()
        srv.push_message(ALICE, ALICE, "hi")
        await srv.wait_for_sent(1)
        await adapter.stop()
        await adapter.stop()  # idempotent
    assert srv.pending_updates == 0 and TELEGRAM_BOT_ID == 999


# -- ORCH-10/12: manners, acknowledgements, reactions ---------------------------------------------------------------
async def test_group_talk_asks_the_manners_and_an_acknowledgement_is_a_reaction(tg, conv):
    conv.verdicts = [Verdict(False, "👍"), Verdict(True)]
    first = tg.push_message(GROUP, BOB, "thanks!", chat_type="group", first_name="Bob")
    tg.push_message(GROUP, BOB, "how do knots work?", chat_type="group", first_name="Bob")
    await tg.wait_for_sent(1)
    assert [(m.text, m.addressed, listening) for m, listening in conv.asked_manners] == [
        ("thanks!", False, False),
        ("how do knots work?", False, False),
    ]
    assert tg.reactions == [
        {
            "chat_id": GROUP,
            "message_id": first["message"]["message_id"],
            "reaction": [{"type": "emoji", "emoji": "👍"}],
        }
    ]
    assert [m.text for m in conv.observed] == ["thanks!"] and [m.text for m in conv.replies] == [
        "how do knots work?"
    ]
    await conv.wait_until(lambda: conv.posted_ids)
    assert conv.posted_ids[0][1] == (str(tg.sent[0]["message_id"]),)


async def test_reactions_people_add_reach_the_conversation_and_polling_asks_for_them(tg, conv):
    tg.admins[GROUP] = [BOB]  # an admin's reaction may move the group's lore (ORCH-12)
    tg.push_reaction(GROUP, 41, BOB, "👎", first_name="Bob")
    # anonymous
    tg.push_update(
        {
            "message_reaction": {
                "chat": {"id": GROUP, "type": "supergroup", "title": "g"},
                "message_id": 42,
                "date": 1,
                "actor_chat": {"id": GROUP, "type": "supergroup", "title": "g"},
                "old_reaction": [],
                "new_reaction": [{"type": "emoji", "emoji": "👍"}],
            }
        }
    )
    tg.push_reaction(ALICE, 43, ALICE, "❤", chat_type="private")
    await conv.wait_until(lambda: len(conv.reactions) == 2)
    # the group's waits for its admins to be read: either may come first
    first, second = sorted(conv.reactions, key=lambda r: r.guild_id is None)
    assert (
        first.platform,
        first.channel_id,
        first.post_id,
        first.user_id,
        first.emoji,
        first.guild_id,
        first.by_admin,
    ) == (
        "telegram",
        str(GROUP),
        "41",
        str(BOB),
        "👎",
        str(GROUP),
        True,
    )
    assert (second.channel_id, second.user_id, second.guild_id, second.by_admin) == (
        str(ALICE),
        str(ALICE),
        None,
        False,
    )
    polls = [c["params"] for c in tg.calls if c["method"] == "getUpdates"]
    assert "message_reaction" in polls[0]["allowed_updates"]

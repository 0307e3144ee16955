"""The fakes are only useful if the REAL client libraries accept them.

These tests drive the unmodified openai SDK, python-telegram-bot and discord.py
against the in-process servers in tests/fakes, so the end-to-end tests built on
top of them fail for product reasons, not because a fake drifted from the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math

import discord
import openai
import pytest
from discord import app_commands
from openai import AsyncOpenAI
from telegram import Bot, Update
from telegram.error import InvalidToken
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from tests.fakes import (
    DISCORD_BOT_ID,
    TELEGRAM_BOT_ID,
    Delay,
    FakeDiscord,
    FakeOpenAI,
    FakeTelegram,
    HTTPError,
    ToolCall,
    embed,
)

TG_TOKEN = "123456:TEST-TOKEN"
GUILD, CHANNEL, USER, DM_CHANNEL = 1001, 2002, 3003, 5005


# ----------------------------------------------------------------- OpenAI --
@pytest.fixture
async def ai():
    async with FakeOpenAI() as srv:
        yield srv


def _openai(srv: FakeOpenAI, **kwargs) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0, **kwargs)


async def test_openai_text_reply_is_recorded(ai):
    ai.script("Hello there")
    async with _openai(ai) as client:
        resp = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "my cat is called Miso"}]
        )
    assert resp.choices[0].message.content == "Hello there"
    assert resp.choices[0].finish_reason == "stop"
    assert "Miso" in ai.all_prompt_text()
    assert ai.chat_requests[0]["model"] == "m"


async def test_openai_tool_calls_are_parsed_by_sdk(ai):
    ai.script([ToolCall("remember", {"fact": "likes tea"})], ToolCall("remember", "{not json"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "remember",
                "parameters": {"type": "object", "properties": {"fact": {"type": "string"}}},
            },
        }
    ]
    async with _openai(ai) as client:
        first = await client.chat.completions.create(
            model="m", tools=tools, messages=[{"role": "user", "content": "I like tea"}]
        )
        second = await client.chat.completions.create(
            model="m", tools=tools, messages=[{"role": "user", "content": "again"}]
        )
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "remember" and json.loads(call.function.arguments) == {
        "fact": "likes tea"
    }
    assert second.choices[0].message.tool_calls[0].function.arguments == "{not json"


async def test_openai_streams_text_and_tool_calls(ai):
    ai.script("streamed reply here", [ToolCall("remember", {"fact": "x"})])
    async with _openai(ai) as client:
        stream = await client.chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "hi"}]
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        async with client.chat.completions.stream(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "remember", "parameters": {}}}],
        ) as s:
            final = await s.get_final_completion()
    assert text == "streamed reply here"
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "remember" and json.loads(call.function.arguments) == {"fact": "x"}


async def test_openai_errors_timeouts_and_default(ai):
    ai.script(HTTPError(500), HTTPError(429), Delay(5, then="too late"))
    ai.default = lambda body: f"echo {body['messages'][-1]['content']}"
    msgs = [{"role": "user", "content": "ping"}]
    async with _openai(ai, timeout=0.3) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="m", messages=msgs)
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="m", messages=msgs)
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=msgs)
        resp = await client.chat.completions.create(model="m", messages=msgs)
    assert resp.choices[0].message.content == "echo ping"
    assert ai.pending == 0 and len(ai.chat_requests) == 4


async def test_openai_embeddings_base64_default_and_float(ai):
    async with _openai(ai) as client:
        b64 = await client.embeddings.create(model="e", input=["tea with milk", "a dog"])
        flt = await client.embeddings.create(
            model="e", input="tea with milk", encoding_format="float"
        )
    assert ai.embedding_requests[0]["encoding_format"] == "base64"
    vectors = [d.embedding for d in b64.data]
    assert [len(v) for v in vectors] == [384, 384]
    assert math.isclose(math.fsum(x * x for x in vectors[0]), 1.0, rel_tol=1e-5)
    assert flt.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
    assert flt.data[0].embedding == pytest.approx(embed("tea with milk"), abs=1e-6)


# --------------------------------------------------------------- Telegram --
@contextlib.asynccontextmanager
async def _polling(app: Application):
    """Run PTB exactly as production polling does, and always shut it down."""
    await app.initialize()
    await app.start()
    await app.updater.start_polling(poll_interval=0, timeout=1)
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


def _telegram_app(srv: FakeTelegram, seen: list[Update]) -> Application:
    app = (
        ApplicationBuilder()
        .token(TG_TOKEN)
        .base_url(f"{srv.url}/bot")
        .base_file_url(f"{srv.url}/file/bot")
        .build()
    )

    async def reply(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        seen.append(update)
        await context.bot.send_chat_action(update.effective_chat.id, "typing")
        await update.message.reply_text(f"you said: {update.message.text}")

    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, reply))
    return app


async def test_telegram_dm_roundtrip():
    seen: list[Update] = []
    async with FakeTelegram() as srv, _polling(_telegram_app(srv, seen)) as app:
        assert app.bot.username == "companion_bot" and app.bot.id == TELEGRAM_BOT_ID
        srv.push_message(111, 111, "hello", username="alice")
        sent = await srv.wait_for_sent(1)
    assert sent[0]["chat_id"] == 111 and sent[0]["text"] == "you said: hello"
    assert srv.actions[0]["action"] == "typing"
    assert seen[0].effective_user.username == "alice" and srv.unknown_calls == []


async def test_telegram_group_mention_and_reply_to_bot():
    seen: list[Update] = []
    async with FakeTelegram() as srv, _polling(_telegram_app(srv, seen)):
        srv.push_message(-100, 7, "hi there", chat_type="group", mention=True)
        await srv.wait_for_sent(1)
        srv.push_message(-100, 7, "and you?", chat_type="group", reply_to_bot=True)
        await srv.wait_for_sent(2)
    first, second = (u.message for u in seen)
    assert first.chat.type == "group" and first.text == "@companion_bot hi there"
    assert list(first.parse_entities(["mention"]).values()) == ["@companion_bot"]
    assert second.reply_to_message.from_user.id == TELEGRAM_BOT_ID
    assert second.reply_to_message.message_id == srv.sent[0]["message_id"]
    assert srv.pending_updates == 0


async def test_telegram_unfaked_method_is_a_recorded_404():
    async with FakeTelegram() as srv, Bot(TG_TOKEN, base_url=f"{srv.url}/bot") as bot:
        with pytest.raises(InvalidToken):  # PTB maps any 404 to InvalidToken
            await bot.get_chat(111)
    assert [c["method"] for c in srv.unknown_calls] == ["getChat"]


# ---------------------------------------------------------------- Discord --
@pytest.fixture
async def dsc():
    async with FakeDiscord() as srv:
        srv.add_guild(GUILD, "Test guild", channels=[(CHANNEL, "general")])
        restore = srv.patch_discord()
        try:
            yield srv
        finally:
            restore()


def _discord_client() -> discord.Client:
    intents = discord.Intents.default()
    intents.message_content = True
    return discord.Client(intents=intents, guild_ready_timeout=0.05)


@contextlib.asynccontextmanager
async def _connected(client: discord.Client, token: str = "bot-token"):
    """Log in and connect as production does; wait for on_ready; always close."""
    ready = asyncio.Event()
    client.event(_set_on_ready(ready))
    await client.login(token)
    task = asyncio.create_task(client.connect(reconnect=False))
    try:
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({waiter, task}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()
        assert ready.is_set(), "discord client never became ready"
        yield client
    finally:
        await client.close()
        await asyncio.wait_for(task, 5)


def _set_on_ready(ready: asyncio.Event):
    async def on_ready() -> None:
        ready.set()

    return on_ready


async def test_discord_guild_mention_and_dm_replies(dsc):
    client = _discord_client()

    @client.event
    async def on_message(message: discord.Message) -> None:
        if message.author == client.user:
            return
        if message.guild is None:
            await message.author.send(f"dm: {message.content}")
        elif client.user.mentioned_in(message):
            await message.channel.send(f"hi {message.author.name}")
        elif message.reference and message.reference.resolved.author == client.user:
            await message.reply("you replied to me")

    async with _connected(client):
        assert client.user.id == DISCORD_BOT_ID and client.application_id == 4243
        assert client.get_guild(GUILD).name == "Test guild"
        assert client.get_channel(CHANNEL).name == "general"
        own_echo = asyncio.ensure_future(
            client.wait_for("message", check=lambda m: m.author == client.user, timeout=5)
        )
        await dsc.dispatch_message(CHANNEL, USER, "hello", guild_id=GUILD, mentions_bot=True)
        await dsc.wait_for_sent(1)
        assert (await own_echo).guild.id == GUILD
        await dsc.dispatch_message(DM_CHANNEL, USER, "psst")
        await dsc.wait_for_sent(2)
        nice = await dsc.dispatch_message(CHANNEL, USER, "nice", reply_to=dsc.sent[0]["message_id"])
        sent = await dsc.wait_for_sent(3)
    assert sent[0]["channel_id"] == CHANNEL and sent[0]["content"] == "hi alice"
    assert sent[1]["channel_id"] == DM_CHANNEL and sent[1]["content"] == "dm: psst"
    assert int(sent[2]["message_reference"]["message_id"]) == int(nice["id"])
    assert sent[2]["content"] == "you replied to me"
    assert dsc.unknown_calls == []
    assert dsc.identifies[0]["token"] == "bot-token"
    # discord.py always asks for a compressed stream; the fake answers with text
    # frames, which discord.py parses without decompressing.
    assert dsc.gateway_params[0]["encoding"] == "json"


async def test_discord_slash_command_through_command_tree(dsc):
    client = _discord_client()
    tree = app_commands.CommandTree(client)
    original: list[str] = []

    @tree.command(name="remember", description="Store a fact")
    async def remember(interaction: discord.Interaction, fact: str) -> None:
        await interaction.response.send_message(f"noted: {fact}", ephemeral=True)
        original.append((await interaction.original_response()).content)
        await interaction.followup.send("anything else?")

    async with _connected(client):
        synced = await tree.sync()
        assert [c.name for c in synced] == ["remember"] and synced[0].id
        await dsc.dispatch_interaction(
            "remember",
            user_id=USER,
            channel_id=CHANNEL,
            guild_id=GUILD,
            options={"fact": "likes tea"},
        )
        await dsc.dispatch_interaction(
            "remember", user_id=USER, channel_id=DM_CHANNEL, options={"fact": "in a DM"}
        )
        responses = await dsc.wait_for_interaction_responses(2)
        await dsc.wait_until(lambda: len(dsc.followups) >= 2)
    assert [r["type"] for r in responses] == [4, 4]
    assert [r["data"]["content"] for r in responses] == ["noted: likes tea", "noted: in a DM"]
    assert responses[0]["data"]["flags"] == 64
    assert original == ["noted: likes tea", "noted: in a DM"]
    assert [f["content"] for f in dsc.followups] == ["anything else?"] * 2


async def test_discord_wrong_token_fails_login():
    async with FakeDiscord(token="good") as srv:
        restore = srv.patch_discord()
        client = _discord_client()
        try:
            with pytest.raises(discord.LoginFailure):
                await client.login("bad")
        finally:
            await client.close()
            restore()


async def test_openai_raw_answer_is_served_verbatim(ai):
    from tests.fakes.openai_server import RawAnswer

    ai.script(
        RawAnswer("not a completion", content_type="text/plain"),
        RawAnswer({"choices": []}),
        RawAnswer({"error": {"message": "teapot"}}, status=418),
    )
    msgs = [{"role": "user", "content": "hi"}]
    async with _openai(ai) as client:
        assert await client.chat.completions.create(model="m", messages=msgs) == "not a completion"
        assert (await client.chat.completions.create(model="m", messages=msgs)).choices == []
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(model="m", messages=msgs)
    assert err.value.status_code == 418 and ai.pending == 0


async def test_openai_raw_stream_sends_its_events_and_can_be_cut(ai):
    from tests.fakes.openai_server import RawStream

    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}],
    }
    ai.script(
        RawStream((chunk, "data: [DONE]\n\n")),
        RawStream((chunk,), cut=True),
        RawStream(("data: {{{\n\n",)),
    )
    msgs = [{"role": "user", "content": "hi"}]
    async with _openai(ai) as client:
        whole = [
            c
            async for c in await client.chat.completions.create(
                model="m", messages=msgs, stream=True
            )
        ]
        seen = []
        with pytest.raises(openai.APIConnectionError):
            async for c in await client.chat.completions.create(
                model="m", messages=msgs, stream=True
            ):
                seen.append(c)
        with pytest.raises(json.JSONDecodeError):
            async for _ in await client.chat.completions.create(
                model="m", messages=msgs, stream=True
            ):
                pass
    assert [c.choices[0].delta.content for c in whole] == ["Hel"]
    assert [c.choices[0].delta.content for c in seen] == ["Hel"]

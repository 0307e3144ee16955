"""How a check-in reaches a person (ORCH-8): each adapter's ``send_direct``, run for real against the local fake
platform, sends to a DM and refuses anything else, whoever asks."""

from __future__ import annotations

import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from tests.adapter_support import ScriptedConversation
from tests.fakes import FakeDiscord, FakeTelegram

GUILD, CHANNEL, DM_CHANNEL, ALICE = 1001, 2002, 5005, 3003


async def test_telegram_sends_a_checkin_to_a_private_chat_and_refuses_a_group():
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(
            ScriptedConversation(),
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
        )
        await adapter.app.initialize()
        try:
            await adapter.send_direct("7", "How did the race go?")
            with pytest.raises(ValueError, match="group"):
                await adapter.send_direct("-1007", "How did the race go?")
        finally:
            await adapter.app.shutdown()
    assert [(m["chat_id"], m["text"]) for m in tg.sent] == [(7, "How did the race go?")]


async def test_discord_sends_a_checkin_to_a_dm_and_refuses_a_server_channel():
    async with FakeDiscord() as dsc:
        dsc.add_guild(GUILD, "Test guild", channels=[(CHANNEL, "general")])
        restore = dsc.patch_discord()
        adapter = DiscordAdapter(
            ScriptedConversation(), "bot-token", guild_ready_timeout=0.05, ready_timeout=30
        )
        await adapter.start()
        try:
            # Alice's DM exists once she wrote there
            await dsc.dispatch_message(DM_CHANNEL, ALICE, "hi")
            await dsc.wait_for_sent(1)
            await adapter.send_direct(str(DM_CHANNEL), "How did the race go?")
            with pytest.raises(ValueError, match="not a DM"):
                await adapter.send_direct(str(CHANNEL), "How did the race go?")
        finally:
            await adapter.stop()
            restore()
    assert [(m["channel_id"], m["content"]) for m in dsc.sent] == [
        (DM_CHANNEL, "echo: hi"),
        (DM_CHANNEL, "How did the race go?"),
    ]

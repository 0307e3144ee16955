"""Discord shards (SCALE-1): each process connects some shards of the bot, and the fake Discord routes a server's
events to shard ``(guild_id >> 22) % count`` and DMs to shard 0, as Discord does. Two real discord.py clients here
stand for two ``companion run`` processes."""

from __future__ import annotations

import pytest

from bot.adapters.discord_adapter import DiscordAdapter, Shards
from bot.config import ConfigError, load_settings
from tests.adapter_support import ScriptedConversation
from tests.fakes import FakeDiscord

EVEN_GUILD, ODD_GUILD = 1001, (1 << 22) + 1001  # (id >> 22) % 2: 0 and 1
EVEN_CHANNEL, ODD_CHANNEL, DM_CHANNEL = 2002, 2003, 5005
ALICE = 3003


async def sharded(conv: ScriptedConversation, shard: int) -> DiscordAdapter:
    adapter = DiscordAdapter(
        conv, "bot-token", guild_ready_timeout=0.05, ready_timeout=5, shards=Shards(2, (shard,))
    )
    await adapter.start()
    return adapter


async def test_each_process_gets_only_its_shards_servers_and_only_shard_zero_gets_dms() -> None:
    first, second = ScriptedConversation(), ScriptedConversation()
    async with FakeDiscord() as dsc:
        dsc.add_guild(EVEN_GUILD, "even", channels=[(EVEN_CHANNEL, "general")])
        dsc.add_guild(ODD_GUILD, "odd", channels=[(ODD_CHANNEL, "general")])
        restore = dsc.patch_discord()
        zero, one = await sharded(first, 0), await sharded(second, 1)
        try:
            assert sorted(d["shard"] for d in dsc.identifies) == [[0, 2], [1, 2]]
            assert [g.id for g in zero.client.guilds] == [EVEN_GUILD] and [
                g.id for g in one.client.guilds
            ] == [ODD_GUILD]
            await dsc.dispatch_message(
                EVEN_CHANNEL, ALICE, "even here", guild_id=EVEN_GUILD, mentions_bot=True
            )
            await dsc.dispatch_message(
                ODD_CHANNEL, ALICE, "odd here", guild_id=ODD_GUILD, mentions_bot=True
            )
            await dsc.dispatch_message(DM_CHANNEL, ALICE, "a secret")
            await dsc.wait_for_sent(3)
            assert [m.text for m in first.replies] == ["even here", "a secret"]
            # each message answered once, by its shard
            assert [m.text for m in second.replies] == ["odd here"]
        finally:
            await zero.stop()
            await one.stop()
            restore()


@pytest.mark.parametrize(
    ("shards", "count", "problem"),
    [
        ("0,4", "4", "outside 0..3"),
        ("1,1", "4", "twice"),
        ("0", "", "needs COMPANION_DISCORD_SHARD_COUNT"),
        ("-1", "2", "outside 0..1"),
    ],
)
def test_shard_settings_that_cannot_work_stop_start_up_naming_the_variable(
    monkeypatch, shards, count, problem
) -> None:
    monkeypatch.setenv("COMPANION_DISCORD_SHARDS", shards)
    if count:
        monkeypatch.setenv("COMPANION_DISCORD_SHARD_COUNT", count)
    with pytest.raises(ConfigError, match="COMPANION_DISCORD_SHARDS") as caught:
        load_settings(_env_file=None)
    assert problem in str(caught.value)


def test_shards_are_read_as_a_sorted_list_and_empty_means_every_shard(monkeypatch) -> None:
    monkeypatch.setenv("COMPANION_DISCORD_SHARDS", "3, 1")
    monkeypatch.setenv("COMPANION_DISCORD_SHARD_COUNT", "4")
    assert load_settings(_env_file=None).discord_shards == [1, 3]
    monkeypatch.setenv("COMPANION_DISCORD_SHARDS", "")
    settings = load_settings(_env_file=None)
    assert settings.discord_shards == [] and settings.discord_shard_count == 4

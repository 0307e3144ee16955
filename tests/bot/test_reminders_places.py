"""Reminders in a server or group (issue 44, item 7 and two LOW items), through discord.py and
python-telegram-bot against the local fakes, the real runtime and store, and a fake clock.

One member's 50 daily reminders posted 150 times in three days: the admin's ``/reminders`` said
"You have no reminders", nothing listed or cancelled others' reminders in a place, and they fired
after the member was banned or had left. Here: an admin lists and cancels any reminder set in their
place (a member cannot, a DM shows no one else's); a member's repeating reminders and a place's
posts a day are bounded; a setter who left or was banned posts nothing; NUL and bidi overrides never
reach the store or the post; ``/privacy off`` cancels the person's pending reminders and says how
many.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.clock import FakeClock
from memory.storage.reminders import MAX_MEMBER_DAY, MAX_PLACE_DAY, MAX_REPEATING_HERE
from tests.bot.test_reminders import CHANNEL, DC_USER, GUILD, at, reminders_in, running
from tests.bot.test_reminders import fakes as fakes  # the fixture: both fakes and a server
from tests.fakes import FakeDiscord, FakeTelegram
from tests.fakes.discord_payloads import OWNER_ID

pytestmark = pytest.mark.asyncio
CAROL = 7002  # a plain member of the server, beside Bob (DC_USER)
GROUP, ADA, BEN, CY = -1001, 61, 62, 63  # a Telegram group; Ada administers it
NOON = at(2026, 11, 26, 12, 0)  # Thursday, UTC


async def slash_as(
    dc: FakeDiscord, user: int, name: str, channel: int | None = None, **opts
) -> str:
    """A slash command by ``user`` in the server's channel (or, with ``channel=None``, their DM)."""
    answered = len(dc.interaction_responses)
    where = channel if channel is not None else 9000 + user % 1000
    await dc.dispatch_interaction(
        name,
        user_id=user,
        channel_id=where,
        guild_id=GUILD if channel is not None else None,
        options=opts or None,
        username={DC_USER: "bob", CAROL: "carol", OWNER_ID: "owner"}[user],
    )
    return str((await dc.wait_for_interaction_responses(answered + 1))[-1]["data"]["content"])


async def in_group(tg: FakeTelegram, user: int, text: str, chat: int = GROUP) -> str:
    """``user`` sends the command ``text`` in the group (or their DM); returns the bot's answer."""
    sent, command = len(tg.sent), text.split()[0]
    kind = "supergroup" if chat < 0 else "private"
    name = {ADA: "Ada", BEN: "Ben", CY: "Cy"}.get(user, f"u{user}")
    entities = [{"type": "bot_command", "offset": 0, "length": len(command)}]
    tg.push_message(chat, user, text, chat_type=kind, first_name=name, entities=entities)
    return str((await tg.wait_for_sent(sent + 1))[-1]["text"])


def on_disk(folder: Path, words: str) -> int:
    """How often ``words`` occur in any file the bot wrote (the store, its WAL), any case."""
    needle = words.lower().encode()
    return sum(p.read_bytes().lower().count(needle) for p in folder.rglob("*") if p.is_file())


def count(runtime, sql: str = "SELECT COUNT(*) FROM reminders") -> int:
    return int(runtime.engine.db.scalar(sql))


async def test_an_admin_lists_and_cancels_a_members_reminder_in_the_server_a_member_cannot(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    clock = FakeClock(NOON)
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        said = await slash_as(
            dc, DC_USER, "remind", CHANNEL, when="every day at 8", what="buy PUMPCOIN now"
        )
        assert said.startswith("Reminder set")
        # Carol, a plain member, sees only her own and cannot cancel Bob's
        assert (await slash_as(dc, CAROL, "reminders", CHANNEL)).startswith(
            "You have no reminders."
        )
        assert await slash_as(dc, CAROL, "reminders", CHANNEL, cancel=1) == (
            "You have no reminders to cancel."
        )
        # the admin's DM never shows others' reminders
        assert (await slash_as(dc, OWNER_ID, "reminders")).startswith("You have no reminders.")
        listed = await slash_as(dc, OWNER_ID, "reminders", CHANNEL)
        assert listed.startswith("Every reminder set here (you're an admin")
        assert (
            "1. bob (discord user 7001): buy PUMPCOIN now \u2014 every day at 08:00 (UTC)" in listed
        )
        assert await slash_as(dc, OWNER_ID, "reminders", CHANNEL, cancel=1) == (
            "Cancelled bob's reminder: buy PUMPCOIN now"
        )
        assert count(runtime) == 0
        audit = runtime.engine.db.one(
            "SELECT who, action, target, person_id, detail FROM dashboard_audit "
            "WHERE action = 'reminder.cancel'"
        )
        assert (audit["action"], audit["target"]) == ("reminder.cancel", f"discord:{GUILD}")
        assert "PUMPCOIN" not in str(audit)
        clock.t = at(2026, 11, 27, 8, 0)
        assert (await runtime.reminders.run()).sent == 0
    assert reminders_in(tg, dc) == [] and on_disk(tmp_path, "PUMPCOIN") == 0


async def test_a_telegram_group_admin_sees_and_cancels_a_members_reminder(tmp_path, fakes):
    llm, tg, dc = fakes
    tg.admins[GROUP] = [ADA]
    async with running(tmp_path / "bot.db", fakes, FakeClock(NOON)) as runtime:
        assert (await in_group(tg, BEN, "/remind every day at 9 spam spam")).startswith(
            "Reminder set"
        )
        assert (await in_group(tg, CY, "/reminders")).startswith("You have no reminders.")
        assert (await in_group(tg, ADA, "/reminders", chat=ADA)).startswith(
            "You have no reminders."
        )
        listed = await in_group(tg, ADA, "/reminders")
        assert f"1. Ben (telegram user {BEN}): spam spam" in listed
        assert (
            await in_group(tg, ADA, "/reminders cancel 1") == "Cancelled Ben's reminder: spam spam"
        )
        assert count(runtime) == 0


async def test_a_members_sixth_repeating_reminder_in_a_place_is_refused_and_a_day_is_bounded(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    async with running(tmp_path / "bot.db", fakes, FakeClock(NOON)) as runtime:
        for hour in range(MAX_REPEATING_HERE):
            said = await slash_as(
                dc, DC_USER, "remind", CHANNEL, when=f"every day at {hour + 7}", what="x"
            )
            assert said.startswith("Reminder set"), said
        said = await slash_as(dc, DC_USER, "remind", CHANNEL, when="every day at 13", what="x")
        assert "you have 5 repeating reminders in this server or group already" in said
        assert "Reminder set" not in said
        # in the member's own DM it disturbs nobody: the 6th is set there
        said = await slash_as(dc, DC_USER, "remind", when="every day at 13", what="x")
        assert said.startswith("Reminder set")
        # with 5 daily ones, 5 one-offs make the member's 10 posts a day here; the 11th is refused
        for minutes in range(MAX_MEMBER_DAY - MAX_REPEATING_HERE):
            said = await slash_as(
                dc, DC_USER, "remind", CHANNEL, when=f"in {minutes + 1} hours", what="y"
            )
            assert said.startswith("Reminder set"), said
        said = await slash_as(dc, DC_USER, "remind", CHANNEL, when="in 20 hours", what="y")
        assert f"more than {MAX_MEMBER_DAY} of your reminders posted here within a day" in said
        # two days on, the day is free again
        said = await slash_as(dc, DC_USER, "remind", CHANNEL, when="in 3 days", what="y")
        assert said.startswith("Reminder set")
        assert count(runtime) == MAX_MEMBER_DAY + 2


async def test_a_place_gets_at_most_its_posts_a_day_whoever_sets_them(tmp_path, fakes):
    llm, tg, dc = fakes
    async with running(tmp_path / "bot.db", fakes, FakeClock(NOON)):
        members = [100 + i for i in range(MAX_PLACE_DAY // MAX_MEMBER_DAY)]
        for user in members:
            for n in range(MAX_MEMBER_DAY):
                said = await in_group(tg, user, f"/remind in {n + 1} hours drink water")
                assert said.startswith("Reminder set"), said
        said = await in_group(tg, 199, "/remind in 5 hours drink water")
        assert f"this server or group has {MAX_PLACE_DAY} reminders posting within a day" in said


async def test_a_member_who_left_or_was_banned_gets_nothing_posted_and_their_reminders_go(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    clock = FakeClock(NOON)
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        await slash_as(dc, DC_USER, "remind", CHANNEL, when="every day at 13", what="LEAVERSPAM")
        await slash_as(dc, DC_USER, "remind", CHANNEL, when="tomorrow at 14", what="LEAVERSPAM 2")
        await slash_as(dc, DC_USER, "remind", when="every day at 13", what="Bob's own pill")
        await slash_as(dc, CAROL, "remind", CHANNEL, when="today at 13", what="carol's standup")
        await in_group(tg, BEN, "/remind today at 13 BANNEDSPAM")
        await in_group(tg, CY, "/remind today at 13 cy's lunch")
        dc.member_leaves(GUILD, DC_USER)  # left the server (or banned: Discord answers alike)
        tg.departed[GROUP] = {BEN: "kicked"}  # banned from the group
        sent_before = (len(dc.sent), len(tg.sent))
        clock.t = at(2026, 11, 26, 13, 0)
        report = await runtime.reminders.run()
        posted = [text for _, _, text in reminders_in(tg, dc)]
        assert sorted(posted) == sorted(
            [
                "\u23f0 Reminder: Bob's own pill",
                f"<@{CAROL}> \u23f0 Reminder: carol's standup",
                "\u23f0 Reminder: cy's lunch",
            ]
        )
        assert not any(
            "SPAM" in str(m) for m in dc.sent[sent_before[0] :] + tg.sent[sent_before[1] :]
        )
        assert (report.sent, report.dropped) == (3, 2)
        # Bob's other reminder in the server went with it; his DM one stays
        assert [t for (t,) in runtime.engine.db.execute("SELECT text FROM reminders")] == [
            "Bob's own pill"
        ]
    assert on_disk(tmp_path, "LEAVERSPAM") == 0 and on_disk(tmp_path, "BANNEDSPAM") == 0


async def test_nul_and_bidi_overrides_are_stripped_from_a_reminders_text(tmp_path, fakes):
    llm, tg, dc = fakes
    clock = FakeClock(NOON)
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        said = await in_group(
            tg,
            BEN,
            "/remind in 20 minutes pay\x00 the \u202eexe.txt\u202c rent\u2066 now\u2069\u200f",
        )
        assert said.startswith("Reminder set") and "pay the exe.txt rent now" in said
        assert runtime.engine.db.scalar("SELECT text FROM reminders") == "pay the exe.txt rent now"
        clock.advance(20 * 60)
        assert (await runtime.reminders.run()).sent == 1
    [(_, _, posted)] = reminders_in(tg, dc)
    assert posted == "\u23f0 Reminder: pay the exe.txt rent now"
    bad = ["\x00", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
    assert not any(c in posted for c in bad)


async def test_privacy_off_cancels_the_persons_pending_reminders_and_says_so(tmp_path, fakes):
    llm, tg, dc = fakes
    clock = FakeClock(NOON)
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        await in_group(tg, BEN, "/remind in 20 minutes PRIVATEWORDS one", chat=BEN)
        await in_group(tg, BEN, "/remind every day at 13 PRIVATEWORDS two")
        await in_group(tg, CY, "/remind in 20 minutes cy's tea")
        said = await in_group(tg, BEN, "/privacy off", chat=BEN)
        assert said.endswith(" 2 reminders cancelled: a reminder keeps your words.")
        assert said.startswith("OK: from now on I won't keep anything you say")
        assert count(runtime) == 1
        clock.t = at(2026, 11, 26, 13, 0)
        assert (await runtime.reminders.run()).sent == 1
        assert "PRIVATEWORDS" not in str(reminders_in(tg, dc))
        # already off, nothing left: the answer does not speak of reminders
        assert "reminder" not in await in_group(tg, BEN, "/privacy off", chat=BEN)
    assert on_disk(tmp_path, "PRIVATEWORDS") == 0

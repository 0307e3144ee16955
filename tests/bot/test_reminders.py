"""Reminders fire (ORCH-13), end to end: python-telegram-bot and discord.py against the local fakes, the real
runtime and store, a scripted model, and an injected clock (nothing sleeps).

A reminder set on Telegram (a daily one, in Lisbon) and one set on Discord (a one-off, in New York, in a server
channel) each fire once at the local time asked, across both zones' DST changes and a restart in between; a reply
that claims a reminder the model never stored is corrected; /forget and /reminders cancel; a reminder that cannot
be delivered is tried again and then reported to the person in their DM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.reminders.claims import NOT_NEW
from bot.reminders.commands import NOT_HERE
from bot.runtime import Runtime
from memory.clock import FakeClock
from memory.storage.reminders import MAX_ATTEMPTS
from tests.fakes import FakeDiscord, FakeOpenAI, FakeTelegram, ToolCall
from tests.pipeline_support import build_runtime

TG_USER, DC_USER, DC_DM, GUILD, CHANNEL, GONE_CHANNEL = 55, 7001, 9100, 8000, 8001, 8099
ANNOUNCE = 8002  # members read it, only the server's owner posts in it


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeOpenAI, FakeTelegram, FakeDiscord]]:
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        dc.add_guild(
            GUILD,
            "Guild",
            channels=[(CHANNEL, "general"), (ANNOUNCE, "announcements")],
            read_only=(ANNOUNCE,),
        )
        restore = dc.patch_discord()
        try:
            yield llm, tg, dc
        finally:
            llm.default = lambda body: "[]"
            restore()


@asynccontextmanager
async def running(db: Path, fakes, clock: FakeClock) -> AsyncIterator[Runtime]:
    """One life of the bot on ``db``: the runtime, both adapters started, and the reminder job's posts."""
    llm, tg, dc = fakes
    runtime = build_runtime(db, llm, clock)
    await runtime.start(background_loop=False)
    telegram = TelegramAdapter(
        runtime.orchestrator,
        "123:abc",
        base_url=f"{tg.url}/bot",
        base_file_url=f"{tg.url}/file/bot",
    )
    discord_ = DiscordAdapter(
        runtime.orchestrator, "discord-token", guild_ready_timeout=0.05, ready_timeout=5
    )
    await telegram.start()
    await discord_.start()
    assert runtime.reminders is not None
    # as bot.composition.build_channels does
    runtime.reminders.posts.update({"telegram": telegram, "discord": discord_})
    try:
        yield runtime
    finally:
        await discord_.stop()
        await telegram.stop()
        await runtime.stop()


async def on_telegram(tg: FakeTelegram, text: str) -> str:
    """Alice says ``text`` in her Telegram DM; returns the bot's answer."""
    sent = len(tg.sent)
    command = text.split()[0]
    entities = (
        [{"type": "bot_command", "offset": 0, "length": len(command)}]
        if text.startswith("/")
        else []
    )
    tg.push_message(TG_USER, TG_USER, text, entities=entities, first_name="Alice")
    return str((await tg.wait_for_sent(sent + 1))[-1]["text"])


async def slash(dc: FakeDiscord, name: str, channel: int = DC_DM, **options: object) -> str:
    """Bob runs a Discord slash command; returns its (ephemeral) answer."""
    answered = len(dc.interaction_responses)
    guild = GUILD if channel != DC_DM else None
    await dc.dispatch_interaction(
        name,
        user_id=DC_USER,
        channel_id=channel,
        guild_id=guild,
        options=options or None,
        username="bob",
    )
    return str((await dc.wait_for_interaction_responses(answered + 1))[-1]["data"]["content"])


def reminders_in(tg: FakeTelegram, dc: FakeDiscord) -> list[tuple[str, int, str]]:
    """Every reminder the platforms received: (platform, chat, text)."""
    found = [("telegram", m["chat_id"], m["text"]) for m in tg.sent if "Reminder:" in m["text"]]
    return found + [
        ("discord", m["channel_id"], m["content"])
        for m in dc.sent
        if "Reminder:" in (m.get("content") or "")
    ]


async def test_reminders_fire_once_at_the_local_time_across_dst_changes_and_a_restart(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    db, clock = tmp_path / "bot.db", FakeClock(at(2026, 10, 23, 12, 0))  # Friday 23 October 2026
    async with running(db, fakes, clock) as runtime:
        await on_telegram(tg, "/timezone Europe/Lisbon")
        said = await on_telegram(tg, "/remind every day at 8 stretch")
        assert said.startswith(
            "Reminder set for every day at 08:00 (Europe/Lisbon), next on Saturday 24 October: stretch. ("
        )
        assert "New_York" in await slash(dc, "timezone", zone="America/New_York")
        said = await slash(dc, "remind", CHANNEL, when="on 2 November at 9:00", what="standup")
        assert said.startswith(
            "Reminder set for Monday 2 November 2026, 09:00 (America/New_York): standup. I'll post it in this channel"
        )
        clock.t = at(2026, 10, 24, 6, 59)  # 07:59 in Lisbon (summer time, UTC+1)
        assert (await runtime.reminders.run()).sent == 0
        clock.t = at(2026, 10, 24, 7, 0)  # 08:00 in Lisbon
        assert (await runtime.reminders.run()).sent == 1
        assert (await runtime.reminders.run()).sent == 0
    assert reminders_in(tg, dc) == [("telegram", TG_USER, "\u23f0 Reminder: stretch")]

    async with running(
        db, fakes, clock
    ) as runtime:  # a restart; Lisbon leaves summer time on 25 October
        clock.t = at(2026, 10, 25, 7, 0)  # 24 hours later: 07:00 in Lisbon now, not 08:00
        assert (await runtime.reminders.run()).sent == 0
        clock.t = at(2026, 10, 25, 8, 0)
        assert (await runtime.reminders.run()).sent == 1
        listed = await on_telegram(tg, "/reminders")
        assert (
            "1. stretch — every day at 08:00 (Europe/Lisbon), next on Monday 26 October" in listed
        )
        assert (await on_telegram(tg, "/reminders cancel 1")) == "Cancelled: stretch"
        clock.t = at(2026, 11, 2, 13, 0)  # New York left summer time on 1 November: 08:00 there
        assert (await runtime.reminders.run()).sent == 0
        clock.t = at(2026, 11, 2, 14, 0)  # 09:00 in New York
        assert (await runtime.reminders.run()).sent == 1
        assert (await runtime.reminders.run()).sent == 0
    assert reminders_in(tg, dc) == [
        ("telegram", TG_USER, "\u23f0 Reminder: stretch"),
        ("telegram", TG_USER, "\u23f0 Reminder: stretch"),
        (
            "discord",
            CHANNEL,
            f"<@{DC_USER}> \u23f0 Reminder: standup",
        ),  # in the channel it was asked in, to Bob
    ]
    standup = next(m for m in dc.sent if "standup" in (m.get("content") or ""))
    assert (
        standup["allowed_mentions"]["users"] == [DC_USER]
        and standup["allowed_mentions"]["parse"] == []
    )


async def test_a_reply_claiming_a_reminder_the_model_never_set_is_corrected_and_nothing_is_stored(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    async with running(tmp_path / "bot.db", fakes, FakeClock(at(2026, 11, 26, 12, 0))) as runtime:
        llm.script("Sure! I'll remind you on Friday at 9 to call mum. Say hi from me.")
        said = await on_telegram(tg, "Friday at 9 I need to call mum, don't let me forget")
        assert (
            "remind you" not in said
            and "I haven't set a reminder" in said
            and "Say hi from me." in said
        )
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 0
        assert "I'll remind you" not in runtime.engine.db.scalar(
            "SELECT group_concat(content) FROM messages"
        )
        # the tool refused a time it could not read: the model's claim after the refusal is corrected too
        llm.script(
            ToolCall("reminder_set", {"when": "at 3", "text": "call mum"}), "Reminder set for 3!"
        )
        said = await on_telegram(tg, "remind me at 3 to call mum")
        assert "I haven't set a reminder" in said and "Reminder set" not in said
        # the model was asked the question
        assert "3am or 3pm" in llm.chat_requests[-1]["messages"][-1]["content"]
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 0
        # with a reminder set earlier, a claim may be about it: the reply stays, and says no new one was set
        await on_telegram(tg, "/remind Friday at 9 call mum")
        llm.script("Yes, your reminder is set for Friday at 9.")
        said = await on_telegram(tg, "did you set my reminder?")
        assert said == "Yes, your reminder is set for Friday at 9.\n\n" + NOT_NEW


async def test_a_reminder_asked_in_words_is_set_when_the_model_does_not_and_never_filed_as_a_fact(
    tmp_path, fakes
):
    """Issue 45: "remind me tomorrow at 9am to call the vet" got "I've set a reminder..." and no
    row, and the ask was filed as a fact."""
    llm, tg, dc = fakes
    async with running(tmp_path / "bot.db", fakes, FakeClock(at(2026, 11, 26, 12, 0))) as runtime:
        llm.script("I've set a reminder for you to call the vet tomorrow at 9am.")
        said = await on_telegram(tg, "remind me tomorrow at 9am to call the vet")
        assert "(Reminder set for" in said and "I haven't set a reminder" not in said
        (text,) = [r["text"] for r in runtime.engine.db.rows("SELECT text FROM reminders")]
        assert text == "call the vet"
        llm.script("Okay!")
        said = await on_telegram(tg, "Can you remind me to water the plants in 2 hours?")
        assert "(Reminder set for" in said
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 2
        # the model set it itself: set once, no second line
        llm.script(
            ToolCall("reminder_set", {"when": "Friday at 9", "text": "call mum"}), "Will do."
        )
        said = await on_telegram(tg, "remind me on Friday at 9 to call mum")
        assert (
            said == "Will do." and runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 3
        )


async def test_the_model_sets_a_reminder_with_the_tool_and_its_confirmation_follows_the_stored_row(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    async with running(tmp_path / "bot.db", fakes, FakeClock(at(2026, 11, 26, 12, 0))) as runtime:
        llm.script(
            ToolCall("reminder_set", {"when": "Friday at 9", "text": "call mum"}),
            "Done: I'll remind you on Friday at 9.",
        )
        said = await on_telegram(tg, "remind me on Friday at 9 to call mum")
        assert said == "Done: I'll remind you on Friday at 9."
        # what the tool answered, before the reply
        result = llm.chat_requests[-1]["messages"][-1]["content"]
        row = runtime.engine.db.one("SELECT id, text, due_at, channel_id, is_dm FROM reminders")
        assert f'"id": {row["id"]}' in result and "Friday 27 November 2026, 09:00 (UTC)" in result
        assert (row["text"], row["due_at"], row["channel_id"], row["is_dm"]) == (
            "call mum",
            at(2026, 11, 27, 9, 0),
            str(TG_USER),
            1,
        )


async def test_forgetting_the_words_of_a_reminder_cancels_it_and_privacy_off_stops_new_ones(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    clock = FakeClock(at(2026, 11, 26, 12, 0))
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        await on_telegram(tg, "/remind in 20 minutes call mum")
        await on_telegram(tg, "/remind in 30 minutes water the plants")
        said = await on_telegram(tg, "/forget call mum")
        assert "Cancelled and forgotten 1 reminder: call mum" in said
        assert [t for (t,) in runtime.engine.db.execute("SELECT text FROM reminders")] == [
            "water the plants"
        ]
        clock.advance(30 * 60)
        assert (await runtime.reminders.run()).sent == 1
        assert [text for _, _, text in reminders_in(tg, dc)] == [
            "\u23f0 Reminder: water the plants"
        ]
        assert (await slash(dc, "remind", when="every day at 8", what="feed the cat")).startswith(
            "Reminder set"
        )
        assert "1. feed the cat — every day at 08:00 (UTC)" in await slash(dc, "reminders")
        assert await slash(dc, "reminders", cancel=1) == "Cancelled: feed the cat"
        assert (
            await slash(dc, "reminders")
            == "You have no reminders. Set one with /remind <when> <what>, like /remind Friday at 9 call mum."
        )
        await on_telegram(tg, "/privacy off")
        assert "Remembering is off" in await on_telegram(tg, "/remind in 20 minutes call mum")
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 0


async def test_quiet_hours_do_not_delay_a_time_the_person_chose(tmp_path, fakes):
    llm, tg, dc = fakes
    clock = FakeClock(at(2026, 11, 26, 22, 0))  # check-ins' quiet hours are 22:00-09:00 by default
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        await on_telegram(tg, "/remind tonight at 23:30 take the bread out")
        clock.t = at(2026, 11, 26, 23, 30)
        assert (await runtime.reminders.run()).sent == 1


async def test_a_reminder_that_cannot_be_delivered_is_retried_then_reported_in_the_persons_dm(
    tmp_path, fakes
):
    llm, tg, dc = fakes
    clock = FakeClock(at(2026, 11, 26, 12, 0))
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        # a channel since deleted
        await slash(dc, "remind", GONE_CHANNEL, when="in 20 minutes", what="check the oven")
        clock.advance(20 * 60)
        reports = [await runtime.reminders.run()]
        for _ in range(MAX_ATTEMPTS - 1):
            clock.advance(3600)
            reports.append(await runtime.reminders.run())
        assert [(r.retrying, r.undelivered) for r in reports] == [(1, 0)] * (MAX_ATTEMPTS - 1) + [
            (0, 1)
        ]
        told = [m for m in dc.sent if m["channel_id"] == dc.dm_channels[DC_USER]]
        assert [m["content"] for m in told] == [
            "I couldn't deliver your reminder (Thursday 26 November 2026, 12:20 (UTC)) in the chat where you asked for it: check the oven"
        ]
        # told: nothing left to keep
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 0
        clock.advance(3600)
        assert (await runtime.reminders.run()) == type(reports[0])()


async def test_the_reminder_job_is_scheduled_every_minute_and_at_start(tmp_path, fakes):
    llm, _, _ = fakes
    runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
    try:
        job = runtime._scheduler().get_job("reminders")
        assert (
            job is not None
            and str(job.trigger)
            == "cron[month='*', day='*', day_of_week='*', hour='*', minute='*']"
        )
        # once at start: what fell due while the bot was down goes out now
        assert job.next_run_time is not None
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()


@pytest.mark.parametrize(
    "said,claims",
    [
        (
            "I'll make sure to remind you about Priya's birthday on May 12.",
            True,
        ),  # a real 1.5B's words
        ("I will definitely remind you on Friday.", True),
        ("Your reminder has been set.", True),
        ("Do you want me to set a reminder?", False),
        ("You reminded me of my sister.", False),
    ],
)
def test_the_claims_a_real_model_makes_are_read_as_reminder_claims(said, claims):
    from bot.reminders.claims import claims_reminder

    assert claims_reminder(said) is claims


async def test_a_large_amount_is_read_whole_through_telegram_and_one_beyond_five_years_is_refused(
    tmp_path, fakes
):
    """Issue 44: "in 5000 minutes" was cut to 3,660 minutes (22 hours early), "in 99999999
    minutes" to 2.5 days, each answered "Reminder set" as if read right."""
    llm, tg, dc = fakes
    clock = FakeClock(at(2026, 11, 26, 12, 0))  # Thursday, UTC
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        said = await on_telegram(tg, "/remind in 5000 minutes water the fern")
        assert said.startswith(
            "Reminder set for Sunday 29 November 2026, 23:20 (UTC): water the fern"
        )
        said = await on_telegram(tg, "/remind in 99999999 minutes water the fern")
        assert "more than five years away" in said and "Reminder set" not in said
        due = [d for (d,) in runtime.engine.db.execute("SELECT due_at FROM reminders")]
        assert due == [clock.now() + 5000 * 60]


async def test_a_slash_remind_in_a_channel_the_member_may_only_read_is_refused(tmp_path, fakes):
    """Issue 44: only read permission was checked, so the bot posted a member's reminder in an
    announcements channel they may not write in."""
    llm, tg, dc = fakes
    clock = FakeClock(at(2026, 11, 26, 12, 0))
    async with running(tmp_path / "bot.db", fakes, clock) as runtime:
        said = await slash(dc, "remind", ANNOUNCE, when="in 20 minutes", what="free pizza")
        assert said == NOT_HERE
        assert runtime.engine.db.scalar("SELECT COUNT(*) FROM reminders") == 0
        said = await slash(dc, "remind", CHANNEL, when="in 20 minutes", what="free pizza")
        assert said.startswith("Reminder set") and "post it in this channel" in said
        clock.advance(20 * 60)
        assert (await runtime.reminders.run()).sent == 1
        assert [(c, t) for _, c, t in reminders_in(tg, dc)] == [
            (CHANNEL, f"<@{DC_USER}> \u23f0 Reminder: free pizza")
        ]

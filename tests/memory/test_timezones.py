"""ORCH-8's last sentence: a person's time zone (set, confirmed after they said it, or the operator's default)
grounds the prompt's "now", extraction's relative dates, recall's named dates and daily reflection's days."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from conftest import say
from pipeline_support import dm, facts, group

from bot.config import ConfigError, load_settings
from memory.clock import DAY
from memory.errors import InvalidInput
from memory.recall.when import spans
from memory.scopes import RecallContext
from memory.storage.timezones import Timezones, parse_zone, said_zone
from memory.upkeep.daily import DailyReflections

LISBON, TOKYO = ZoneInfo("Europe/Lisbon"), ZoneInfo("Asia/Tokyo")
OFFER = "Shall I use Europe/Lisbon for you? /timezone Europe/Lisbon"


def ts(zone: ZoneInfo, *when: int) -> float:
    return datetime(*when, tzinfo=zone).timestamp()  # type: ignore[misc]


# -- the zone itself ------------------------------------------------------------------------------------------
def test_an_unknown_zone_is_refused_and_a_known_one_is_read_in_any_case():
    assert parse_zone("europe/LISBON").key == "Europe/Lisbon"
    for bad in ("Mars/Olympus_Mons", "", "../../etc/passwd", "Lisbon"):
        with pytest.raises(InvalidInput, match="unknown time zone"):
            parse_zone(bad)


def test_an_unknown_operator_zone_fails_at_start_naming_the_setting():
    with pytest.raises(ConfigError, match="COMPANION_TIMEZONE.*unknown time zone"):
        load_settings(timezone="Mars/Olympus_Mons")
    assert load_settings(timezone="america/new_york").timezone == "America/New_York"


def test_where_someone_says_they_live_is_read_and_everyday_phrases_are_not():
    assert said_zone("I live in Lisbon these days") == "Europe/Lisbon"
    assert said_zone("btw I'm in Tokyo time this month") == "Asia/Tokyo"
    assert said_zone("I moved to New York in May") == "America/New_York"
    for text in (
        "I'm in a meeting",
        "I am in the kitchen",
        "I'm in Christmas mode",
        "Lisbon is lovely",
        "I'm in bed",
    ):
        assert said_zone(text) is None, text


def test_a_person_without_a_zone_has_the_operators_and_a_server_channel_always_does(engine):
    # the operator's default, as the engine is given it
    zones = Timezones(engine.people, "Asia/Tokyo")
    assert zones.zone_of("discord:carol") == TOKYO
    zones.set("discord:carol", "Europe/Lisbon")
    assert zones.zone_of("discord:carol") == LISBON and zones.name_of("discord:bob") == "Asia/Tokyo"
    assert (
        zones.zone_for(RecallContext("discord", "discord:carol", "dm-carol", is_dm=True)) == LISBON
    )
    assert (
        zones.zone_for(RecallContext("discord", "discord:carol", "g-general", guild_id="discord:g"))
        == TOKYO
    )


# -- /timezone and the offer --------------------------------------------------------------------------------
async def test_the_timezone_command_shows_sets_refuses_and_resets(rt):
    async def timezone(argument: str) -> str:
        return await rt.orchestrator.command(
            "timezone", argument, dm("telegram", "55", f"/timezone {argument}")
        )

    assert "haven't set a time zone, so I use UTC" in await timezone("")
    assert "unknown time zone 'Mars/Base'" in await timezone("Mars/Base")
    assert "I'll use Europe/Lisbon for you" in await timezone("europe/lisbon")
    assert "Your time zone is Europe/Lisbon" in await timezone("")
    assert rt.orchestrator.zones.zone_of("telegram:55") == LISBON
    assert "default time zone, UTC" in await timezone("reset")
    assert rt.orchestrator.zones.own("telegram:55") is None


async def test_saying_where_one_lives_is_offered_once_and_never_set_silently(rt, srv):
    srv.script("Lisbon is lovely.")
    reply = await rt.orchestrator.reply(
        dm("discord", "carol", "I live in Lisbon now", name="Carol")
    )
    assert reply.text == f"Lisbon is lovely.\n\n({OFFER})"
    assert rt.orchestrator.zones.own("discord:carol") is None  # offered, not set
    # a hint, not part of the history
    assert OFFER not in str(rt.engine.db.rows("SELECT content FROM messages"))
    srv.script("Yes, you said.")
    assert (
        await rt.orchestrator.reply(
            dm("discord", "carol", "as I said, I live in Lisbon", name="Carol")
        )
    ).text == "Yes, you said."
    srv.script("Nice!")
    assert (
        OFFER
        not in (
            await rt.orchestrator.reply(
                group("discord", "g", "dave", "I live in Lisbon", name="Dave")
            )
        ).text
    )


# -- what the zone grounds ----------------------------------------------------------------------------------
async def test_the_prompt_tells_the_time_where_the_speaker_is(rt, srv):
    await rt.orchestrator.command(
        "timezone", "Asia/Tokyo", dm("discord", "carol", "/timezone Asia/Tokyo")
    )
    srv.script("Good morning!")
    # 2023-11-14 22:13 UTC is Wednesday morning in Tokyo
    await rt.orchestrator.reply(dm("discord", "carol", "morning!"))
    messages = srv.chat_requests[-1]["messages"]
    # the day in the system part
    assert "Today is Wednesday 2023-11-15 (Asia/Tokyo)." in messages[0]["content"]
    assert messages[-1]["content"].endswith("(sent 07:13 Asia/Tokyo)")  # the minute last (ORCH-9)


async def test_extraction_reads_a_turn_and_its_dates_in_the_speakers_zone(rt, srv):
    auckland = ZoneInfo("Pacific/Auckland")
    await rt.orchestrator.command(
        "timezone", "Pacific/Auckland", dm("discord", "carol", "/timezone Pacific/Auckland")
    )
    srv.script("Good luck!")
    # Wednesday 11:13 in Auckland
    await rt.orchestrator.reply(dm("discord", "carol", "my exam is tomorrow"))
    rt.engine.clock.advance(31)
    srv.script(
        facts(
            {
                "subject": "exam",
                "content": "Carol has an exam on 2023-11-16",
                "valid_from": "2023-11-16",
            }
        )
    )
    assert (await rt.background.tick())["extracted"] == 1
    prompt = next(
        b["messages"][-1]["content"]
        for b in srv.chat_requests
        if "[P1]" in b["messages"][-1]["content"]
    )
    # UTC's date would make "tomorrow" the 15th
    assert "2023-11-15 (Wednesday)" in prompt and "2023-11-14" not in prompt
    assert rt.engine.db.scalar("SELECT valid_from FROM memories") == ts(auckland, 2023, 11, 16)


def test_dates_a_question_names_are_the_askers():
    now = ts(TOKYO, 2023, 11, 1, 12)
    assert spans("what did I do on 3 June 2023?", now, TOKYO) == [
        (ts(TOKYO, 2023, 6, 3), ts(TOKYO, 2023, 6, 3) + DAY)
    ]
    monday_early = ts(TOKYO, 2023, 11, 6, 8)  # Monday in Tokyo, still Sunday in UTC
    (tokyo,) = spans("last sunday", monday_early, TOKYO)
    (utc,) = spans("last sunday", monday_early)
    assert tokyo[0] == monday_early - 2 * DAY and utc[0] == monday_early - 8 * DAY


async def test_a_dm_recall_reads_named_dates_in_the_speakers_zone(rt):
    await rt.orchestrator.command(
        "timezone", "Asia/Tokyo", dm("discord", "carol", "/timezone Asia/Tokyo")
    )
    turn = rt.orchestrator.resolve(dm("discord", "carol", "what did we say on 3 June 2023?"))
    assert turn.ctx.zone == "Asia/Tokyo" and turn.ctx.tz == TOKYO


# -- daily reflection's days ---------------------------------------------------------------------------------
def test_a_dm_day_is_its_persons_and_a_server_day_the_operators_across_a_clock_change(
    engine, clock
):
    zones = engine.zones
    zones.set("discord:carol", "Europe/Lisbon")  # summer time began on 2024-03-31 at 01:00 UTC
    dm_ctx = RecallContext(
        "discord", "discord:carol", "dm-discord:carol", is_dm=True, zone="Europe/Lisbon"
    )
    guild_ctx = RecallContext("discord", "discord:dave", "g-general", guild_id="g")
    for zone, when, ctx, text in (
        (LISBON, (2024, 3, 30, 23, 30), dm_ctx, "late on Saturday"),
        (LISBON, (2024, 3, 31, 23, 30), dm_ctx, "late on Sunday"),  # 22:30 UTC
        (
            LISBON,
            (2024, 4, 1, 0, 30),
            guild_ctx,
            "just after midnight in Lisbon",
        ),  # still Sunday in UTC
    ):
        clock.t = ts(zone, *when)
        say(
            engine,
            text,
            author=ctx.speaker_id,
            guild=ctx.guild_id,
            channel=ctx.channel_id,
            dm_person=None if ctx.guild_id else "discord:carol",
        )
        engine.channels.touch(f"discord:{ctx.channel_id}", ctx)
    days = DailyReflections(engine, zone_for=zones.zone_for)
    due = days.due(ts(LISBON, 2024, 4, 1, 12))
    found = {(c.channel_key, c.day): [m.content for m in days.turns(c)] for c in due}
    assert found == {
        ("discord:dm-discord:carol", "2024-03-30"): ["late on Saturday"],
        ("discord:dm-discord:carol", "2024-03-31"): ["late on Sunday"],
        ("discord:g-general", "2024-03-31"): ["just after midnight in Lisbon"],
    }
    sunday = next(c for c in due if c.day == "2024-03-31" and c.ctx.is_dm)
    assert sunday.end - sunday.start == 23 * 3600  # the day the clocks went forward
    for chat in due:
        days.mark_done(chat)
    assert days.due(ts(LISBON, 2024, 4, 1, 12)) == []


async def test_the_dashboard_sets_a_persons_zone_refuses_an_unknown_one_and_audits_it(http, dash):
    alice = dash.seeded.alice
    async with http.put(f"/api/people/{alice}/timezone", json={"zone": "Atlantis/Capital"}) as r:
        assert r.status == 422 and "unknown time zone" in (await r.json())["error"]
    async with http.put(f"/api/people/{alice}/timezone", json={"zone": "europe/lisbon"}) as r:
        assert r.status == 200 and (await r.json())["timezone"] == "Europe/Lisbon"
    async with http.get(f"/api/people/{alice}") as r:
        settings = (await r.json())["settings"]
    assert settings["timezone"] == "Europe/Lisbon" and settings["timezone_default"] == "UTC"
    assert dash.runtime.orchestrator.zones.zone_of(alice) == LISBON
    rows = await dash.store(
        dash.engine.db.rows,
        "SELECT action, target FROM dashboard_audit WHERE action = 'person.timezone'",
    )
    assert rows == [{"action": "person.timezone", "target": alice}]
    async with http.put(f"/api/people/{alice}/timezone", json={"zone": ""}) as r:
        assert (await r.json())["timezone"] is None
    async with http.put("/api/people/nobody/timezone", json={"zone": "UTC"}) as r:
        assert r.status == 404

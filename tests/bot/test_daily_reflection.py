"""MAINT-4: the daily reflection, with an injected clock, against the scripted model server.

A day of messages in two guilds and a DM; the 04:00 run files each chat's facts where they were said, audits
it, marks the day, and adds nothing when run again; a failing, garbled or killed run resumes without duplicates.
"""

from __future__ import annotations

import asyncio
import json

from pipeline_support import build_runtime, dm, facts, group

from bot.config import ConfigError, load_settings
from memory.clock import DAY, FakeClock
from memory.upkeep.daily import DailyReflections
from tests.fakes.openai_server import Delay, HTTPError

DAY0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC, a Wednesday
MARK = "one day of a conversation"  # in the daily reflection prompt, and in no other

ALICE = {"speaker": "P1", "subject": "work", "content": "Alice works at the Elm Street bakery"}
BOB = {"speaker": "P1", "subject": "sport", "content": "Bob trains for the Berlin marathon"}
CAROL = {"speaker": "P1", "subject": "family", "content": "Carol's sister Dana moves to Oslo"}
ANSWERS = {"Elm Street": ALICE, "Berlin marathon": BOB, "Oslo": CAROL}


def at(clock: FakeClock, day: int, hour: float) -> None:
    clock.t = DAY0 + day * DAY + hour * 3600


def model(answers: dict[str, object] | None = None):
    """The extraction model: a daily prompt gets the scripted answer of the chat it quotes (a dict is one fact,
    anything else is sent as it is); the contradiction judge always says no."""
    answers = ANSWERS if answers is None else answers

    def respond(body):
        prompt = body["messages"][-1]["content"]
        if MARK not in prompt:
            return "no"
        for needle, answer in answers.items():
            if needle in prompt:
                return facts(answer) if isinstance(answer, dict) else answer
        return "[]"

    return respond


async def a_day_of_talk(rt) -> None:
    """Two guilds and a DM, on day 0 (observed: stored and buffered like any group talk, no reply asked)."""
    await rt.orchestrator.observe(
        group("discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice")
    )
    await rt.orchestrator.observe(
        group("discord", "g2", "bob", "I am training for the Berlin marathon", name="Bob")
    )
    await rt.orchestrator.observe(
        dm("discord", "carol", "My sister Dana moves to Oslo next week", name="Carol")
    )


def daily_prompts(srv) -> list[str]:
    return [
        b["messages"][-1]["content"]
        for b in srv.chat_requests
        if MARK in b["messages"][-1]["content"]
    ]


def stored(rt) -> dict[str, str]:
    """content -> partition of every live memory."""
    return {m.content: m.partition_key for m in rt.engine.memory_rows.listing(None, limit=100)}


def audits(rt) -> list[dict]:
    return rt.engine.db.rows(
        "SELECT scope_hint, status, facts, channel_key, people FROM reflections WHERE kind = 'daily' ORDER BY id"
    )


async def test_the_0400_run_files_each_chats_facts_where_said_audits_them_and_a_second_run_adds_nothing(
    rt, srv
):
    clock = rt.engine.clock
    at(clock, 0, 10)
    await a_day_of_talk(rt)
    srv.default = model()
    at(clock, 1, 4)
    report = await rt.daily.run()
    assert (report.chats, report.stored, report.failed) == (3, 3, 0)
    assert stored(rt) == {
        ALICE["content"]: "user|discord:alice|public|discord:g1",  # said in guild 1: that guild's
        BOB["content"]: "user|discord:bob|public|discord:g2",
        CAROL["content"]: "user|discord:carol|private",  # said in a DM: private to Carol's DMs
    }
    prompts = daily_prompts(srv)
    assert len(prompts) == 3
    # one chat per prompt, never mixed
    assert all(sum(needle in p for needle in ANSWERS) == 1 for p in prompts)
    # speaker tags and the day the words were written
    assert all('[P1] 2023-11-15 (Wednesday) "' in p for p in prompts)
    rows = audits(rt)
    assert [r["status"] for r in rows] == ["done"] * 3
    assert {r["scope_hint"] for r in rows} == {
        "discord:g1-general 2023-11-15",
        "discord:g2-general 2023-11-15",
        "discord:dm-carol 2023-11-15",
    }
    assert sorted(c for r in rows for c in json.loads(r["facts"])) == sorted(
        f["content"] for f in ANSWERS.values()
    )
    assert {r["channel_key"]: json.loads(r["people"]) for r in rows}["discord:g1-general"] == [
        "discord:alice"
    ]

    asked = len(srv.chat_requests)
    at(clock, 1, 9)
    again = await rt.daily.run()
    assert (again.chats, again.stored, again.failed) == (0, 0, 0)
    assert len(srv.chat_requests) == asked and len(audits(rt)) == 3 and len(stored(rt)) == 3


async def test_only_days_that_are_over_are_read_and_each_day_on_its_own(rt, srv):
    clock = rt.engine.clock
    at(clock, 0, 22)
    await rt.orchestrator.observe(
        group("discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice")
    )
    at(clock, 1, 3)  # after midnight: tomorrow's day, not today's
    await rt.orchestrator.observe(
        group("discord", "g1", "alice", "We adopted a cat named Miso", name="Alice")
    )
    srv.default = model(
        {
            "Elm Street": ALICE,
            "Miso": {"speaker": "P1", "subject": "pet", "content": "Alice has a cat named Miso"},
        }
    )
    at(clock, 1, 4)
    await rt.daily.run()
    first = daily_prompts(srv)
    assert len(first) == 1 and "Elm Street" in first[0] and "Miso" not in first[0]
    at(clock, 2, 4)
    await rt.daily.run()
    second = daily_prompts(srv)[1:]
    assert len(second) == 1 and "Miso" in second[0] and "Elm Street" not in second[0]
    assert "Alice has a cat named Miso" in stored(rt)


async def test_a_failing_model_for_one_chat_leaves_only_that_day_due_and_the_retry_adds_no_duplicate(
    rt, srv
):
    clock = rt.engine.clock
    at(clock, 0, 10)
    await a_day_of_talk(rt)
    srv.default = model({**ANSWERS, "Elm Street": HTTPError(500)})
    at(clock, 1, 4)
    report = await rt.daily.run()
    assert (report.chats, report.failed) == (2, 1)
    assert ALICE["content"] not in stored(rt) and len(stored(rt)) == 2
    assert [r["status"] for r in audits(rt) if r["channel_key"] == "discord:g1-general"] == [
        "failed"
    ]
    assert DailyReflections(rt.engine).done_days("discord:g1-general") == set()

    srv.default = model()
    before = len(daily_prompts(srv))
    at(clock, 1, 5)
    retry = await rt.daily.run()
    assert (retry.chats, retry.stored, retry.failed) == (1, 1, 0)
    assert [
        p for p in daily_prompts(srv)[before:] if "Elm Street" not in p
    ] == []  # only the failed chat is asked again
    assert len(stored(rt)) == 3


async def test_a_garbled_answer_is_not_a_reflected_day(rt, srv):
    clock = rt.engine.clock
    at(clock, 0, 10)
    await a_day_of_talk(rt)
    srv.default = model({**ANSWERS, "Oslo": "Carol talked about her sister, I think."})
    at(clock, 1, 4)
    assert (await rt.daily.run()).failed == 1
    assert DailyReflections(rt.engine).done_days("discord:dm-carol") == set() and CAROL[
        "content"
    ] not in stored(rt)
    assert [r["status"] for r in audits(rt) if r["channel_key"] == "discord:dm-carol"] == ["failed"]
    srv.default = model()
    at(clock, 2, 4)  # the next day's run
    assert (await rt.daily.run()).stored == 1
    assert stored(rt)[CAROL["content"]] == "user|discord:carol|private"


async def test_a_run_killed_between_chats_resumes_with_the_rest_and_without_duplicates(
    tmp_path, srv
):
    clock = FakeClock()
    first = build_runtime(tmp_path / "bot.db", srv, clock)
    await first.start(background_loop=False)
    at(clock, 0, 10)
    await a_day_of_talk(first)
    slow = Delay(1.0, facts(ALICE))
    srv.default = model({**ANSWERS, "Elm Street": slow})  # due order: the DM, guild 1, guild 2
    at(clock, 1, 4)
    run = asyncio.create_task(first.daily.run())
    await srv.wait_until(lambda: any("Elm Street" in p for p in daily_prompts(srv)), 5)
    run.cancel()  # the process dies while the model is thinking about guild 1
    srv.default = lambda body: "[]"
    await first.stop()
    assert list(stored_in(tmp_path)) == [CAROL["content"]]

    srv.default = model()
    second = build_runtime(tmp_path / "bot.db", srv, clock)
    await second.start(background_loop=False)
    try:
        before = len(daily_prompts(srv))
        report = await second.daily.run()
        # the DM was done before the kill: not asked again
        assert (report.chats, report.stored) == (
            2,
            2,
        )
        assert not any("Oslo" in p for p in daily_prompts(srv)[before:])
        assert sorted(stored(second)) == sorted(f["content"] for f in ANSWERS.values())
    finally:
        srv.default = lambda body: "[]"
        await second.stop()


async def test_an_audit_row_left_running_by_a_killed_run_is_closed_without_its_excerpt_and_the_day_is_redone(
    tmp_path, srv
):
    clock = FakeClock()
    first = build_runtime(tmp_path / "bot.db", srv, clock)
    await first.start(background_loop=False)
    at(clock, 0, 10)
    await first.orchestrator.observe(
        group("discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice")
    )
    srv.default = model({"Elm Street": Delay(1.0, facts(ALICE))})
    at(clock, 1, 4)
    run = asyncio.create_task(first.daily.run())
    await srv.wait_until(lambda: daily_prompts(srv), 5)
    run.cancel()  # killed while the model reads the day: nothing closes its audit row
    srv.default = lambda body: "[]"
    await first.stop()

    def rows(rt) -> list[tuple[str, str]]:
        return [
            (r["status"], r["input_excerpt"])
            for r in rt.engine.db.rows("SELECT * FROM reflections WHERE kind = 'daily'")
        ]

    second = build_runtime(tmp_path / "bot.db", srv, clock)
    # minutes later: it could still be another process's live run
    await second.start(background_loop=False)
    try:
        assert [status for status, _ in rows(second)] == ["running"] and "Elm Street" in rows(
            second
        )[0][1]
        at(clock, 1, 6)  # past the bound no live run takes
        srv.default = model()
        report = await second.daily.run()
        assert rows(second)[0] == ("failed", "")  # closed, and the chat's words are gone from it
        assert report.chats == 1 and stored(second) == {
            ALICE["content"]: stored(second)[ALICE["content"]]
        }
        # the day was reflected again
        assert [status for status, _ in rows(second)] == [
            "failed",
            "done",
        ]
    finally:
        srv.default = lambda body: "[]"
        await second.stop()


def stored_in(tmp_path) -> list[str]:
    from memory.engine import MemoryEngine

    with MemoryEngine(tmp_path / "bot.db", None) as engine:
        return [m.content for m in engine.memory_rows.listing(None, limit=100)]


async def test_a_crash_after_storing_but_before_marking_redoes_the_day_and_dedup_keeps_one_copy(
    rt, srv
):
    clock = rt.engine.clock
    at(clock, 0, 10)
    await a_day_of_talk(rt)
    srv.default = model()
    at(clock, 1, 4)
    await rt.daily.run()
    # as if the process died before each chat was marked
    rt.engine.db.execute("DELETE FROM daily_reflections")
    at(clock, 1, 5)
    redo = await rt.daily.run()
    # asked again, but every fact is a duplicate of one stored
    assert redo.chats == 3 and redo.stored == 0
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM memories") == 3


async def test_a_bot_that_was_down_catches_up_on_the_missed_days_but_no_further_than_a_week(
    rt, srv
):
    clock = rt.engine.clock
    for day in (0, 5, 6, 8):
        at(clock, day, 12)
        await rt.orchestrator.observe(
            group(
                "discord",
                "g1",
                "alice",
                f"Day {day}: I work at the Elm Street bakery now",
                name="Alice",
            )
        )
    srv.default = model()
    at(clock, 10, 4)  # down since day 8; days 0..2 are more than a week ago
    report = await rt.daily.run()
    assert report.chats == 3
    days = sorted(r["scope_hint"].split()[-1] for r in audits(rt))
    assert days == ["2023-11-20", "2023-11-21", "2023-11-23"]
    # the same fact every day: stored once
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM memories") == 1


async def test_owner_dm_facts_stay_owner_private_and_a_fact_for_an_unknown_tag_is_dropped(
    tmp_path, srv
):
    clock = FakeClock()
    runtime = build_runtime(tmp_path / "bot.db", srv, clock, owner_ids=["discord:boss"])
    await runtime.start(background_loop=False)
    try:
        at(clock, 0, 10)
        await runtime.orchestrator.observe(
            dm("discord", "boss", "My passport renewal is due in March", name="Boss")
        )
        await runtime.orchestrator.observe(
            group("discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice")
        )
        await runtime.orchestrator.observe(
            group("discord", "g1", "bob", "Alice makes the best rye bread", name="Bob")
        )
        # no such speaker: dropped
        fake = {
            "speaker": "P9",
            "subject": "x",
            "content": "Mallory owns the bakery",
        }
        bread = {
            "speaker": "P2",
            "subject": "opinion",
            "content": "Bob thinks Alice makes the best rye bread",
        }
        srv.default = model(
            {
                "passport": facts(
                    {
                        "speaker": "P1",
                        "subject": "passport",
                        "content": "The owner's passport renewal is due in March",
                    }
                ),
                "Elm Street": facts(ALICE, bread, fake),
            }
        )
        at(clock, 1, 4)
        await runtime.daily.run()
        assert stored(runtime) == {
            "The owner's passport renewal is due in March": "owner|discord:boss|private",
            ALICE["content"]: "user|discord:alice|public|discord:g1",
            bread[
                "content"
            ]: "user|discord:bob|public|discord:g1",  # filed under the tag that said it
        }
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()


async def test_a_huge_day_reaches_the_model_bounded(rt, srv):
    clock = rt.engine.clock
    at(clock, 0, 1)
    for n in range(40):
        clock.advance(60)
        await rt.orchestrator.observe(
            group("discord", "g1", "alice", f"message {n} " + "words " * 1500, name="Alice")
        )
    srv.default = model()
    at(clock, 1, 4)
    await rt.daily.run()
    (prompt,) = daily_prompts(srv)
    assert len(prompt) < 16_000 and "message 39 " in prompt  # the newest of the day is what is kept


async def test_the_daily_cron_is_a_validated_setting_and_both_jobs_are_scheduled(tmp_path, srv):
    try:
        load_settings(daily_reflection_cron="61 4 * * *")
    except ConfigError as exc:
        assert "COMPANION_DAILY_REFLECTION_CRON" in str(exc)
    else:
        raise AssertionError("a bad cron was accepted")
    runtime = build_runtime(
        tmp_path / "bot.db", srv, FakeClock(), daily_reflection_cron="15 5 * * *"
    )
    try:
        scheduler = runtime._scheduler()
        daily = scheduler.get_job("daily-reflection")
        assert (
            daily is not None
            and "hour='5'" in str(daily.trigger)
            and "minute='15'" in str(daily.trigger)
        )
        assert scheduler.get_job("bulletins") is not None
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()


def test_an_upgraded_store_starts_with_today_instead_of_a_burst_over_its_past_week(engine):
    from conftest import guild_ctx, say

    from memory.storage.migrations import M006_DAILY

    # written in 2023 (the fake clock): long before the upgrade
    say(engine, "old news", author="alice", guild="g1")
    for thing in (
        "TRIGGER bulletins_memory_deleted",
        "TRIGGER bulletins_memory_changed",
        "TABLE bulletin_partitions",
        "TABLE bulletins",
    ):
        engine.db.execute(f"DROP {thing}")
    engine.db.execute("DROP TABLE daily_reflections")
    engine.db.execute(M006_DAILY.sql)  # the migration as an existing store meets it
    assert DailyReflections(engine).done_days("discord:g1-general") == {"2023-11-14"}
    engine.channels.touch("discord:g1-general", guild_ctx("g1", "alice"))
    # without the marks, 2023-11-14 would be due
    assert DailyReflections(engine).due(engine.clock.now() + DAY) == []


async def test_a_bot_started_after_0400_reflects_the_missed_day_at_once(tmp_path, srv):
    from dataclasses import replace

    clock = FakeClock()
    runtime = build_runtime(tmp_path / "bot.db", srv, clock)
    # the scheduler as `companion run` has it
    runtime = replace(runtime, schedule=replace(runtime.schedule, enabled=True))
    at(clock, 0, 10)
    await a_day_of_talk(runtime)  # stored before the start: the bot was down at 04:00 the next day
    srv.default = model()
    at(clock, 1, 9)
    await runtime.start(background_loop=False)
    try:
        await srv.wait_until(lambda: len(daily_prompts(srv)) == 3, 10)
        for _ in range(
            200
        ):  # the facts are stored after the last answer: poll the store (on its own thread)
            if len(await runtime.runner.run(stored, runtime)) == 3:
                break
            await asyncio.sleep(0.05)
        assert len(await runtime.runner.run(stored, runtime)) == 3
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()


async def test_a_message_deleted_while_the_model_reads_its_day_gives_no_fact(rt, srv):
    clock = rt.engine.clock
    at(clock, 0, 10)
    await rt.orchestrator.observe(
        group(
            "discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice", mid="m1"
        )
    )

    async def delete_then_answer(body):
        if MARK in body["messages"][-1]["content"]:
            # deleted on Discord meanwhile
            await rt.orchestrator.message_deleted("discord", "g1-general", ("m1",))
        return model()(body)

    srv.default = delete_then_answer
    at(clock, 1, 4)
    report = await rt.daily.run()
    assert (report.chats, report.stored) == (1, 0) and stored(rt) == {}


async def test_a_day_of_nothing_readable_asks_the_model_nothing(rt, srv):
    clock = rt.engine.clock
    at(clock, 0, 10)
    # a lone zero-width space
    await rt.orchestrator.observe(group("discord", "g1", "alice", "\u200b", name="Alice"))
    at(clock, 1, 4)
    assert (await rt.daily.run()).chats == 0 and daily_prompts(srv) == []

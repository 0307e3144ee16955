"""Check-ins (ORCH-8) on the real pipeline: the runtime against a scripted OpenAI-compatible server, a real store,
and a delivery that records what the bot sent to a DM (the Telegram end-to-end and the kills are in
test_checkins_kill.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from test_registry import WORD, fill, occurrences, store_files

from bot.checkins import CheckinJob
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import FactKind, MemoryType, NewMemory, Scope, Visibility
from memory.storage.checkins import Destination, QuietHours
from memory.storage.messages import NewMessage
from memory.upkeep.forgetting import forget_memory, forget_person
from tests.fakes import HTTPError
from tests.pipeline_support import dm, group

PERSON = "telegram:7"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


class Outbox:
    """The delivery of one platform: records (DM channel, text) as a platform would show them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def __call__(self, channel_id: str, text: str) -> None:
        self.sent.append((channel_id, text))


@pytest.fixture
def box(rt) -> Outbox:
    outbox = Outbox()
    rt.checkins.deliveries["telegram"] = outbox
    # a Monday noon, UTC: outside the default quiet hours
    rt.engine.clock.t = at("2026-05-04 12:00")
    return outbox


async def opt_in(rt, user: str = "7") -> str:
    return await rt.orchestrator.command("checkins", "on", dm("telegram", user, "/checkins on"))


def dated(rt, content: str, day: str, kind: FactKind = FactKind.EVENT, person: str = PERSON) -> str:
    """A fact of the person's with the date their words named, stored through the real write path."""
    result = rt.engine.memories.add(
        NewMemory(
            content=content,
            subject=content[:40],
            scope=Scope.USER,
            scope_id=person,
            visibility=Visibility.PRIVATE,
            type=MemoryType.EPISODIC,
            kind=kind,
            valid_from=at(f"{day} 00:00"),
        )
    )
    assert result.status == "stored"
    return result.memory.id


def rows(rt) -> list[dict]:
    return rt.engine.db.rows(
        "SELECT person_id, memory_id, state, attempts FROM checkins ORDER BY id"
    )


# -- opt-in, DMs only ------------------------------------------------------------------------------------
async def test_a_person_who_never_turned_checkins_on_is_never_messaged_first(rt, srv, box):
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-07 10:00")
    report = await rt.checkins.run()
    assert (report.planned, report.sent, box.sent, srv.chat_requests, rows(rt)) == (
        0,
        0,
        [],
        [],
        [],
    )


async def test_checkins_on_in_a_group_is_refused_and_records_nothing(rt, srv, box):
    answer = await rt.orchestrator.command(
        "checkins", "on", group("telegram", "-100", "7", "/checkins on")
    )
    assert "only in our private chat" in answer
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-07 10:00")
    assert (await rt.checkins.run()).sent == 0
    assert box.sent == [] and rt.engine.checkins.people() == []


async def test_checkins_alone_shows_the_state_and_what_is_planned(rt, box):
    assert "Check-ins are off" in await rt.orchestrator.command(
        "checkins", "", dm("telegram", "7", "/checkins")
    )
    await opt_in(rt)
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    await rt.checkins.run()  # plans it; not due yet
    shown = await rt.orchestrator.command("checkins", "", dm("telegram", "7", "/checkins"))
    assert (
        "Check-ins are on" in shown
        and "Alice runs the Lisbon half marathon" in shown
        and "2026-05-07" in shown
    )
    off = await rt.orchestrator.command("checkins", "off", dm("telegram", "7", "/checkins off"))
    assert "(1 planned check-in dropped.)" in off and rows(rt) == []


async def test_a_checkin_only_ever_goes_to_the_dm_it_was_asked_for_in(rt, srv, box):
    await opt_in(rt)
    # a look from a group changes nothing
    await rt.orchestrator.command("checkins", "", group("telegram", "-100", "7", "/checkins"))
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-07 10:00")
    srv.script("How did the half marathon go?")
    await rt.checkins.run()
    assert box.sent == [("dm-7", "How did the half marathon go?")]


# -- the follow-up itself -----------------------------------------------------------------------------------
async def test_a_past_event_is_followed_up_once_the_day_after_and_a_reply_is_an_ordinary_turn(
    rt, srv, box
):
    await opt_in(rt)
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-06 15:00")  # the day itself: not yet
    assert (await rt.checkins.run()).sent == 0 and srv.chat_requests == []
    rt.engine.clock.t = at("2026-05-07 10:00")
    srv.script("Morning! How did the Lisbon half marathon go?")
    assert (await rt.checkins.run()).sent == 1
    assert box.sent == [("dm-7", "Morning! How did the Lisbon half marathon go?")]
    assert (
        "Alice runs the Lisbon half marathon on 6 May"
        in srv.chat_requests[0]["messages"][0]["content"]
    )
    assert (await rt.checkins.run()).sent == 0 and len(box.sent) == 1  # never twice
    srv.script("Well done!")
    await rt.orchestrator.reply(dm("telegram", "7", "It went great, 1:52!"))
    shown = [m["content"] for m in srv.chat_requests[-1]["messages"]]
    # the check-in is the bot's turn in the DM's history
    assert "Morning! How did the Lisbon half marathon go?" in shown


async def test_a_todo_is_followed_up_on_its_due_day_and_a_fact_without_a_date_never(rt, srv, box):
    await opt_in(rt)
    dated(rt, "Alice must renew her passport by 8 May", "2026-05-08", FactKind.TODO)
    rt.engine.memories.add(
        NewMemory(
            content="Alice wants to learn Portuguese",
            subject="portuguese",
            scope=Scope.USER,
            scope_id=PERSON,
            kind=FactKind.GOAL,
        )
    )
    rt.engine.clock.t = at("2026-05-08 10:00")
    srv.script("Did the passport renewal work out?")
    report = await rt.checkins.run()
    assert (report.planned, report.sent) == (1, 1) and [r["state"] for r in rows(rt)] == ["sent"]


async def test_at_most_two_a_week_per_person(rt, srv, box):
    await opt_in(rt)
    dated(rt, "Alice sees the dentist on 5 May", "2026-05-05")
    dated(rt, "Alice plays a cello recital on 6 May", "2026-05-06")
    dated(rt, "Alice interviews at the museum on 7 May", "2026-05-07")
    rt.engine.clock.t = at("2026-05-08 10:00")
    srv.default = lambda body: "How did it go?"
    report = await rt.checkins.run()
    assert (report.sent, report.waiting) == (2, 1)
    rt.engine.clock.advance(3600)
    assert (await rt.checkins.run()).sent == 0 and len(box.sent) == 2


async def test_nothing_is_sent_in_the_quiet_hours_of_the_persons_own_zone(rt, srv, box):
    await opt_in(rt)
    dated(rt, "Alice runs the Tokyo marathon on 6 May", "2026-05-06")
    # what the person sets
    await rt.orchestrator.command(
        "timezone", "Asia/Tokyo", dm("telegram", "7", "/timezone Asia/Tokyo")
    )
    rt.engine.clock.t = at("2026-05-07 14:00")  # 23:00 in Tokyo, though mid-afternoon in UTC
    assert (await rt.checkins.run()).waiting == 1 and box.sent == [] and srv.chat_requests == []
    rt.engine.clock.t = at("2026-05-08 01:00")  # 10:00 in Tokyo, though 01:00 in UTC
    srv.script("How was the Tokyo marathon?")
    assert (await rt.checkins.run()).sent == 1


async def test_quiet_hours_wrap_midnight_and_can_be_off():
    quiet = QuietHours.parse("22:00-09:00")
    assert quiet is not None and QuietHours.parse("off") is None
    inside = [datetime(2026, 5, 7, h, 30) for h in (22, 23, 0, 8)]
    outside = [datetime(2026, 5, 7, h, 30) for h in (9, 12, 21)]
    assert all(quiet.contains(t) for t in inside) and not any(quiet.contains(t) for t in outside)


# -- the model fails ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "answer",
    [HTTPError(500), "", "[SKIP]", '{"message": "hi"}', "x" * 2000],
    ids=["down", "empty", "skip", "json", "rambling"],
)
async def test_a_model_that_fails_or_answers_garbage_sends_nothing_and_is_tried_later(
    rt, srv, box, answer
):
    await opt_in(rt)
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-07 10:00")
    # a server error is retried by the client twice
    srv.script(*[answer] * (3 if isinstance(answer, HTTPError) else 1))
    report = await rt.checkins.run()
    assert (report.sent, report.postponed, box.sent) == (1 - 1, 1, [])
    assert rows(rt)[0]["state"] == "pending" and rows(rt)[0]["attempts"] == 1
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE role = 'assistant'") == 0
    assert (await rt.checkins.run()).postponed == 0  # it waits before asking again
    rt.engine.clock.advance(3601)
    srv.script("How did the half marathon go?")
    assert (await rt.checkins.run()).sent == 1 and len(box.sent) == 1


async def test_a_model_that_keeps_failing_is_given_up_after_three_tries(rt, srv, box):
    await opt_in(rt)
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    rt.engine.clock.t = at("2026-05-07 10:00")
    srv.default = lambda body: "[SKIP]"
    for _ in range(4):
        await rt.checkins.run()
        rt.engine.clock.advance(4 * 3600)
    assert [r["state"] for r in rows(rt)] == ["failed"] and box.sent == []


# -- forgetting ---------------------------------------------------------------------------------------------
async def test_forgetting_the_memory_cancels_its_pending_checkin(rt, srv, box):
    await opt_in(rt)
    memory_id = dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    assert (await rt.checkins.run()).planned == 1
    await rt.runner.run(forget_memory, rt.engine, memory_id)
    assert rows(rt) == []
    rt.engine.clock.t = at("2026-05-07 10:00")
    assert (await rt.checkins.run()).sent == 0 and box.sent == [] and srv.chat_requests == []


async def test_forgetting_the_person_cancels_everything_and_checkins_off_stays_off(rt, srv, box):
    await opt_in(rt)
    dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
    await rt.checkins.run()
    await rt.runner.run(forget_person, rt.engine, [PERSON])
    assert rows(rt) == [] and rt.engine.checkins.people() == []
    rt.engine.clock.t = at("2026-05-07 10:00")
    assert (await rt.checkins.run()).sent == 0 and box.sent == []


def with_checkins(engine: MemoryEngine, person: str) -> None:
    """A pending check-in and a sent one (whose message, stored in the DM's history, carries the word)."""
    store = engine.checkins
    store.opt_in(person, Destination("discord", f"dm-{person}", person))
    memories = [
        engine.memories.add(
            NewMemory(
                content=f"{person} shows {WORD} at the fair on {day}",
                subject="fair",
                scope=Scope.USER,
                scope_id=person,
                kind=FactKind.EVENT,
                valid_from=at(f"{day} 00:00"),
            )
        ).memory
        for day in ("2023-11-20", "2023-11-21")
    ]
    store.plan(person, memories, UTC)
    first = store.listing(person)[0]
    store.claim(first.id)
    sent = engine.messages.add(
        NewMessage(
            platform="discord",
            channel_id=f"dm-{person}",
            author_id="bot",
            content=f"How did {WORD} do at the fair?",
            role="assistant",
            dm_person_id=person,
        )
    )
    store.sent(first.id, sent)
    assert [c.state for c in store.listing(person)] == ["sent", "pending"]


def test_forgetting_a_person_with_pending_checkins_leaves_no_byte_of_their_words(tmp_path):
    from conftest import HashEmbedder

    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        for n in range(200):
            engine.memories.add(
                NewMemory(
                    content=f"Bob fact number {n} about gardening",
                    subject="garden",
                    scope=Scope.USER,
                    scope_id="bob",
                )
            )
        fill(engine, "alice")
        with_checkins(engine, "alice")
        with_checkins(engine, "bob")
        engine.db.execute("ANALYZE")
        engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert sum(occurrences(path, WORD).values()) > 0
        forget_person(engine, ["alice"])
        assert engine.db.scalar("SELECT COUNT(*) FROM checkins WHERE person_id = 'alice'") == 0
        assert engine.db.scalar("SELECT COUNT(*) FROM checkins WHERE person_id = 'bob'") == 2
        forget_person(engine, ["bob"])
    assert occurrences(path, WORD) == {p.name: 0 for p in store_files(path) if p.is_file()}


def test_forgetting_a_memory_also_deletes_the_checkin_sent_about_it(tmp_path):
    from conftest import HashEmbedder

    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        with_checkins(engine, "alice")
        engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for checkin in engine.checkins.listing("alice"):
            forget_memory(engine, checkin.memory_id)
        assert (
            engine.db.scalar("SELECT COUNT(*) FROM messages") == 0
            and engine.checkins.listing() == []
        )
    assert sum(occurrences(path, WORD).values()) == 0


# -- the operator's view -----------------------------------------------------------------------------------
def test_companion_checkins_list_shows_what_is_due_pending_and_sent(cli):
    with MemoryEngine(cli.db, None, FakeClock(at("2023-11-19 12:00"))) as engine:
        with_checkins(engine, "alice")
    listed = cli("checkins", "list", "--json").json()
    assert [(c["person_id"], c["state"], c["kind"], c["checkins_on"]) for c in listed] == [
        ("alice", "sent", "event", True),
        ("alice", "pending", "event", True),
    ]
    text = cli("checkins", "list").out
    assert "sent" in text and "due" in text and "alice" in text and "How did" not in text
    assert cli("checkins", "list", "--state", "failed").out.startswith("no check-ins match")


def test_companion_checkins_list_counts_the_people_who_have_them_on_in_words(cli):
    """Issue 45: "(1 people have them on)"."""
    with MemoryEngine(cli.db, None, FakeClock(at("2023-11-19 12:00"))) as engine:
        engine.checkins.opt_in("alice", Destination("discord", "dm-alice", "alice"))
    assert cli("checkins", "list").out.strip() == "no check-ins yet (1 person has them on)"
    with MemoryEngine(cli.db, None, FakeClock(at("2023-11-19 12:00"))) as engine:
        engine.checkins.opt_in("bob", Destination("discord", "dm-bob", "bob"))
    assert cli("checkins", "list").out.strip() == "no check-ins yet (2 people have them on)"


def test_an_export_lists_the_persons_checkins(tmp_path):
    from conftest import HashEmbedder

    from memory.upkeep.transfer import export_person

    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), FakeClock()) as engine:
        with_checkins(engine, "alice")
        data = json.loads(json.dumps(export_person(engine, ["alice"])))
    assert len(data["checkins"]) == 2 and data["checkin_people"][0]["platform"] == "discord"


def test_the_job_is_built_with_a_zone_lookup_and_the_configured_limits(rt):
    assert isinstance(rt.checkins, CheckinJob)
    # the operator's default
    assert rt.checkins.zone_of("anyone").key == "UTC" and rt.checkins.options.per_week == 2
    rt.orchestrator.zones.set(PERSON, "Europe/Lisbon")
    # the person's own zone, as /timezone sets it
    assert rt.checkins.zone_of(PERSON).key == "Europe/Lisbon"


# -- what a person sees on the console ------------------------------------------------------------------------
async def test_on_the_console_a_checkin_arrives_between_turns_and_the_reply_continues_the_conversation(
    rt, srv
):
    import io

    from bot.adapters.console import ConsoleChat
    from tests.pipeline_support import facts

    rt.engine.clock.t = at("2026-05-04 12:00")
    out = io.StringIO()
    lines = iter(
        [
            ("/checkins on", None),
            (
                "I'm running the Lisbon half marathon on Wednesday!",
                "Good luck on Wednesday! I'll be cheering.",
            ),
            (None, None),
            ("It went great, 1:52!", "1:52, that's brilliant. How are your legs today?"),
        ]
    )

    async def typed(prompt: str) -> str:
        out.write(prompt)
        line, answer = next(lines, ("/quit", None))
        if answer is not None:
            srv.script(answer)
        if line is not None:
            out.write(line + "\n")
            return line
        # Between turns: extraction learns the dated event, and two days later the check-in job runs.
        rt.engine.clock.advance(31)
        srv.script(
            facts(
                {
                    "speaker": "P1",
                    "kind": "event",
                    "subject": "half marathon",
                    "valid_from": "2026-05-06",
                    "content": "Sam runs the Lisbon half marathon on Wednesday 6 May 2026",
                }
            )
        )
        await rt.background.tick()
        rt.engine.clock.t = at("2026-05-07 09:30")
        srv.script("Morning Sam! How did the Lisbon half marathon go yesterday?")
        await rt.checkins.run()
        return await typed(prompt)

    console = ConsoleChat(
        rt.orchestrator, user_name="Sam", stream=False, input_fn=typed, output=out
    )
    rt.checkins.deliveries["console"] = console.send_direct
    await console.run()
    transcript = out.getvalue()
    assert "bot> Morning Sam! How did the Lisbon half marathon go yesterday?" in transcript
    assert "Morning Sam! How did the Lisbon half marathon go yesterday?" in [
        m["content"] for m in srv.chat_requests[-1]["messages"]
    ]


@pytest.mark.parametrize(
    "setting, value",
    [("checkin_quiet_hours", "22-9"), ("checkin_cron", "61 * * * *"), ("checkins_per_week", -1)],
)
def test_a_bad_checkin_setting_stops_start_up_naming_its_variable(setting, value):
    from bot.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match=f"COMPANION_{setting.upper()}"):
        load_settings(**{setting: value})


async def test_the_checkin_job_is_scheduled_on_its_cron_and_runs_once_at_start(tmp_path, srv):
    from tests.pipeline_support import build_runtime

    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), checkin_cron="*/5 * * * *")
    try:
        job = runtime._scheduler().get_job("checkins")
        assert (
            job is not None and "minute='*/5'" in str(job.trigger) and job.next_run_time is not None
        )
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()

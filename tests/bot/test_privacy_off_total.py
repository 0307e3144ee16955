"""Issue 31 item 7: ``/privacy off`` is total (SEC-5): every write path asks, the check-ins and the time-zone offer too.

The runtime against a scripted model and a real store; a delivery records what a check-in would send."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.models import FactKind, MemoryType, NewMemory, Scope, Visibility
from tests.pipeline_support import dm

PERSON = "telegram:7"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


class Outbox:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def __call__(self, channel_id: str, text: str) -> None:
        self.sent.append((channel_id, text))


async def privacy(rt, choice: str, user: str = "7") -> str:
    return await rt.orchestrator.command(
        "privacy", choice, dm("telegram", user, f"/privacy {choice}")
    )


def race(rt) -> None:
    new = NewMemory(
        content="Alice runs the Lisbon half marathon on 6 May",
        subject="half marathon",
        scope=Scope.USER,
        scope_id=PERSON,
        visibility=Visibility.PRIVATE,
        type=MemoryType.EPISODIC,
        kind=FactKind.EVENT,
        valid_from=at("2026-05-06 00:00"),
    )
    assert rt.engine.memories.add(new).status == "stored"


def bot_messages(rt) -> list[str]:
    return [
        row["content"]
        for row in rt.engine.db.rows("SELECT content FROM messages WHERE role = 'assistant'")
    ]


async def test_a_due_checkin_is_neither_sent_nor_stored_after_privacy_off(rt, srv):
    box = Outbox()
    rt.checkins.deliveries["telegram"] = box
    rt.engine.clock.t = at("2026-05-04 12:00")
    await rt.orchestrator.command("checkins", "on", dm("telegram", "7", "/checkins on"))
    race(rt)
    await rt.checkins.run()  # planned while remembering was on
    assert "won't keep anything you say" in await privacy(rt, "off")
    rt.engine.clock.t = at("2026-05-07 10:00")  # due now
    srv.script("How did the half marathon go?")
    report = await rt.checkins.run()
    assert (report.sent, box.sent, bot_messages(rt), srv.chat_requests) == (0, [], [], [])
    # held, not sent
    assert [r["state"] for r in rt.engine.db.rows("SELECT state FROM checkins")] == ["pending"]


async def test_nothing_new_is_planned_for_someone_not_remembered(rt, srv):
    rt.checkins.deliveries["telegram"] = Outbox()
    rt.engine.clock.t = at("2026-05-04 12:00")
    await rt.orchestrator.command("checkins", "on", dm("telegram", "7", "/checkins on"))
    await privacy(rt, "off")
    race(rt)
    assert (await rt.checkins.run()).planned == 0 and rt.engine.checkins.people() != []


async def test_a_checkin_written_while_privacy_went_off_is_sent_but_not_kept(rt, srv):
    """The race: the model was writing when the person said stop. The message already went; it is not kept."""
    box = Outbox()
    rt.checkins.deliveries["telegram"] = box
    rt.engine.clock.t = at("2026-05-04 12:00")
    await rt.orchestrator.command("checkins", "on", dm("telegram", "7", "/checkins on"))
    race(rt)
    rt.engine.clock.t = at("2026-05-07 10:00")

    def write_then_stop(body):
        # while the model writes (the store is idle meanwhile)
        rt.orchestrator.turns.privacy.set_person(PERSON, False)
        return "How did the half marathon go?"

    srv.default = write_then_stop
    await rt.checkins.run()
    assert bot_messages(rt) == [] and [
        r["state"] for r in rt.engine.db.rows("SELECT state FROM checkins")
    ] == ["sent"]


async def test_saying_where_one_lives_after_privacy_off_is_offered_and_nothing_recorded(rt, srv):
    await privacy(rt, "off", user="55")
    before = rt.engine.db.rows("SELECT person_id, key, value FROM person_settings")
    srv.script("Reykjavik, how lovely.")
    reply = await rt.orchestrator.reply(dm("telegram", "55", "I live in Reykjavik", name="Carol"))
    assert "Atlantic/Reykjavik" in reply.text  # offered: choosing it is the person's own setting
    assert rt.engine.db.rows("SELECT person_id, key, value FROM person_settings") == before
    assert "reykjavik" not in str(rt.engine.db.rows("SELECT * FROM person_settings")).lower()

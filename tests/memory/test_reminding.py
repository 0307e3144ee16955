"""``memory.reminding.Reminding``: one process's books of reminders through the memory thread, two processes on
one store (each its own holder)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest
from conftest import count

from memory import AsyncRunner, Reminding
from memory.storage.reminders import MAX_ATTEMPTS, ReminderPlace

DM = ReminderPlace("telegram", "55", "55")
LEASE = 300.0


@pytest.fixture
async def two(engine):
    runner = AsyncRunner()
    yield Reminding(engine, runner, holder="A"), Reminding(engine, runner, holder="B")
    runner.shutdown()


async def test_one_holder_claims_a_due_reminder_and_only_it_records_the_send(two, engine, clock):
    a, b = two
    engine.reminders.ask("telegram:55", DM, "in 20 minutes", "tea", ZoneInfo("Europe/Lisbon"))
    assert await a.due() == []
    clock.advance(20 * 60)
    (due,) = await b.due()
    assert await a.claim(due, LEASE) and not await b.claim(due, LEASE)
    assert not await b.delivered(due, clock.now())  # not B's to record: the row stays
    assert count(engine, "reminders") == 1
    assert await a.delivered(due, clock.now()) and count(engine, "reminders") == 0
    assert await a.kept_for("telegram:55") == []


async def test_refusals_end_undelivered_and_the_person_told_lets_a_one_off_go(two, engine, clock):
    a, _ = two
    engine.reminders.ask("telegram:55", DM, "in 1 minute", "tea", ZoneInfo("UTC"))
    states = []
    for _ in range(MAX_ATTEMPTS):
        clock.advance(3600)
        (due,) = await a.due()
        assert await a.claim(due, LEASE)
        states.append(await a.failed(due))
    assert states[-1] == "undelivered" and set(states[:-1]) == {"pending"}
    (told,) = await a.undelivered()
    await a.tell_later(told)
    assert await a.undelivered() == []  # an hour later, not now
    await a.told(told)
    assert count(engine, "reminders") == 0

"""ORCH-13, on both engines: a reminder row is claimed by one process only, a dead sender's row is taken again
after its lease, delivery retries are bounded, and forgetting removes the person's words (SEC-3)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from zoneinfo import ZoneInfo

import pytest
from conftest import HashEmbedder, count

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.errors import InvalidInput
from memory.storage.reminders import MAX_ATTEMPTS, ReminderPlace
from memory.upkeep.forgetting import forget_guild, forget_person
from memory.upkeep.transfer import export_person

LISBON = ZoneInfo("Europe/Lisbon")
DM = ReminderPlace("telegram", "55", "55")
SERVER = ReminderPlace("discord", "8001", "7001", "discord:8000", is_dm=False)
LEASE = 300.0


@pytest.fixture
def two(store_url, clock) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    """Two engines on one store, as two bot processes open it."""
    with (
        MemoryEngine(store_url, HashEmbedder(), clock) as a,
        MemoryEngine(store_url, HashEmbedder(), clock) as b,
    ):
        yield a, b


def test_a_due_reminder_is_claimed_by_one_process_and_a_one_off_row_goes_once_delivered(
    two, clock: FakeClock
):
    a, b = two
    mine = a.reminders.ask("telegram:55", DM, "in 20 minutes", "tea", LISBON)
    assert b.reminders.due(clock.now()) == []
    clock.advance(20 * 60)
    (due,) = b.reminders.due(clock.now())
    assert due.id == mine.id and due.text == "tea"
    assert a.reminders.claim(due, "A", LEASE)
    assert not b.reminders.claim(due, "B", LEASE)  # a live claim is never taken
    assert b.reminders.due(clock.now()) == []
    assert a.reminders.delivered(due.id, "A", due.next_due(clock.now()))
    assert count(a, "reminders") == 0  # the words are no longer needed


def test_racing_processes_claim_a_row_once(two, clock: FakeClock):
    a, b = two
    a.reminders.ask("telegram:55", DM, "in 1 minute", "tea", LISBON)
    clock.advance(61)
    (due,) = a.reminders.due(clock.now())
    won: list[str] = []
    barrier = threading.Barrier(2)

    def race(engine: MemoryEngine, holder: str) -> None:
        barrier.wait()
        if engine.reminders.claim(due, holder, LEASE):
            won.append(holder)

    threads = [threading.Thread(target=race, args=(e, h)) for e, h in ((a, "A"), (b, "B"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1


def test_a_dead_senders_row_is_taken_again_after_its_lease_and_says_it_may_be_a_repeat(
    two, clock: FakeClock
):
    a, b = two
    a.reminders.ask("telegram:55", DM, "in 1 minute", "tea", LISBON)
    clock.advance(61)
    (due,) = a.reminders.due(clock.now())
    assert a.reminders.claim(due, "A", LEASE)  # and A dies before it sends or records
    clock.advance(LEASE - 1)
    assert b.reminders.due(clock.now()) == []
    clock.advance(2)
    (again,) = b.reminders.due(clock.now())
    assert again.resent and b.reminders.claim(again, "B", LEASE)
    assert not a.reminders.delivered(due.id, "A", None)  # A, back from a stall, may not record it
    assert b.reminders.delivered(due.id, "B", None)


def test_a_recurring_reminder_moves_to_its_next_time_and_is_never_claimed_twice_for_one_occurrence(
    any_engine, clock: FakeClock
):
    reminders = any_engine.reminders
    first = reminders.ask("telegram:55", DM, "every day at 8", "pills", LISBON)
    clock.t = first.due_at + 1
    (due,) = reminders.due(clock.now())
    assert reminders.claim(due, "A", LEASE)
    assert reminders.delivered(due.id, "A", due.next_due(clock.now()))
    (row,) = reminders.mine("telegram:55")
    # no DST change in late November
    assert row.due_at == first.due_at + 86400 and row.state == "pending"
    # the occurrence read before is done: its due time moved on
    assert not reminders.claim(due, "A", LEASE)
    assert reminders.due(clock.now()) == []


def test_a_refused_reminder_backs_off_and_is_undelivered_after_the_last_attempt(
    any_engine, clock: FakeClock
):
    engine = any_engine
    reminders = engine.reminders
    reminders.ask("telegram:55", DM, "in 1 minute", "tea", LISBON)
    clock.advance(61)
    states = []
    for _ in range(MAX_ATTEMPTS):
        (due,) = reminders.due(clock.now())
        assert reminders.claim(due, "A", LEASE)
        states.append(reminders.failed(due.id, "A"))
        assert reminders.due(clock.now()) == []  # it waits before the next try
        clock.advance(3600)
    assert states == ["pending"] * (MAX_ATTEMPTS - 1) + ["undelivered"]
    (given_up,) = reminders.undelivered(clock.now())
    reminders.moved_on(given_up.id, None)  # the person was told
    assert count(engine, "reminders") == 0


def test_forget_words_cancels_only_the_persons_matching_reminders(any_engine):
    reminders = any_engine.reminders
    reminders.ask("telegram:55", DM, "Friday at 9", "call mum about the party", LISBON)
    reminders.ask("telegram:55", DM, "Friday at 10", "water the plants", LISBON)
    reminders.ask("discord:7001", SERVER, "Friday at 9", "call mum", LISBON)
    # no meaningful word: nothing
    assert reminders.forget_matching("telegram:55", "the reminder") == []
    assert reminders.forget_matching("telegram:55", "call mum") == ["call mum about the party"]
    assert [r.text for r in reminders.mine("telegram:55")] == ["water the plants"]
    assert [r.text for r in reminders.mine("discord:7001")] == ["call mum"]


def test_forgetting_a_person_or_a_server_removes_their_reminders_and_export_shows_them(any_engine):
    engine = any_engine
    reminders = engine.reminders
    reminders.ask("telegram:55", DM, "Friday at 9", "call mum", LISBON)
    reminders.ask("discord:7001", SERVER, "Friday at 9", "standup", LISBON)
    assert [r["text"] for r in export_person(engine, ["telegram:55"])["reminders"]] == ["call mum"]
    forget_person(engine, ["telegram:55"])
    assert [r.person_id for r in reminders.mine("telegram:55")] == []
    forget_guild(engine, "discord:8000")
    assert count(engine, "reminders") == 0


def test_a_reminder_text_is_bounded_and_so_is_a_persons_number_of_reminders(engine):
    reminders = engine.reminders
    with pytest.raises(InvalidInput, match="at most"):
        reminders.ask("telegram:55", DM, "Friday at 9", "x" * 501, LISBON)
    for n in range(50):
        reminders.ask("telegram:55", DM, "Friday at 9", f"thing {n}", LISBON)
    with pytest.raises(InvalidInput, match="50 reminders already"):
        reminders.ask("telegram:55", DM, "Friday at 9", "one more", LISBON)


def test_a_forgotten_or_cancelled_reminder_leaves_no_byte_of_its_words_in_the_files(
    engine, tmp_path
):
    reminders = engine.reminders
    reminders.ask("telegram:55", DM, "Friday at 9", "feed the axolotl Quetzalcoatl", LISBON)
    kept = reminders.ask("telegram:55", DM, "Friday at 10", "book the Zanzibarian ferry", LISBON)
    assert reminders.forget_matching("telegram:55", "axolotl")
    assert reminders.cancel("telegram:55", kept.id)
    for path in tmp_path.glob("m.db*"):
        data = path.read_bytes()
        assert b"Quetzalcoatl" not in data and b"Zanzibarian" not in data, path.name

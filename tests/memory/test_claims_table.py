"""Claims on background jobs (SCALE-1, ``memory.storage.claims``), on both engines: one holder at a time, a dead
holder's claim taken over once its lease ran out, and never a live one, even by processes racing for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from conftest import HashEmbedder

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.claims import STALE_S, process_holder

LEASE = 300.0


@pytest.fixture
def two(store_url, clock) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    """Two engines on one store, as two bot processes open it."""
    with (
        MemoryEngine(store_url, HashEmbedder(), clock) as a,
        MemoryEngine(store_url, HashEmbedder(), clock) as b,
    ):
        yield a, b


def test_a_free_job_is_claimed_and_a_live_claim_is_never_taken_by_another_holder(two):
    a, b = two
    assert a.claims.claim("extract:c1", "A", LEASE)
    assert not b.claims.claim("extract:c1", "B", LEASE)
    assert b.claims.holder_of("extract:c1") == ("A", a.clock.now() + LEASE, 1)
    assert b.claims.claim("extract:c2", "B", LEASE)  # another job is free


def test_a_holder_claiming_its_own_job_again_keeps_it_and_is_not_counted_as_a_new_attempt(two):
    a, _ = two
    assert a.claims.claim("daily:c1:2026-11-23", "A", LEASE)
    assert a.claims.claim("daily:c1:2026-11-23", "A", LEASE)
    assert a.claims.holder_of("daily:c1:2026-11-23")[2] == 1  # type: ignore[index]


def test_a_dead_holders_claim_is_taken_over_only_after_its_lease_ran_out(two, clock: FakeClock):
    a, b = two
    assert a.claims.claim("extract:c1", "A", LEASE)  # and then A's process dies
    clock.advance(LEASE - 1)
    assert not b.claims.claim("extract:c1", "B", LEASE)
    clock.advance(2)
    assert b.claims.claim("extract:c1", "B", LEASE)
    assert b.claims.holder_of("extract:c1") == ("B", clock.now() + LEASE, 2)


def test_a_holder_whose_claim_was_taken_over_can_neither_renew_nor_release_it(
    two, clock: FakeClock
):
    a, b = two
    assert a.claims.claim("extract:c1", "A", LEASE)
    clock.advance(LEASE + 1)  # A stalled past its lease
    assert b.claims.claim("extract:c1", "B", LEASE)
    assert not a.claims.renew("extract:c1", "A", LEASE)
    assert not a.claims.release("extract:c1", "A")
    assert a.claims.holder_of("extract:c1")[0] == "B"  # type: ignore[index]


def test_renewing_keeps_a_slow_job_from_being_taken_over(two, clock: FakeClock):
    a, b = two
    assert a.claims.claim("reflect:c1:1.0", "A", LEASE)
    for _ in range(3):
        clock.advance(LEASE * 2 / 3)
        assert a.claims.renew("reflect:c1:1.0", "A", LEASE)
        assert not b.claims.claim("reflect:c1:1.0", "B", LEASE)


def test_a_released_job_is_free_again_and_claims_left_by_dead_holders_are_swept_a_day_later(
    two, clock: FakeClock
):
    a, b = two
    assert a.claims.claim("extract:c1", "A", LEASE)
    # its job is never due again: nobody takes it up
    assert a.claims.claim("checkin:7", "dead", LEASE)
    assert a.claims.release("extract:c1", "A")
    assert b.claims.holder_of("extract:c1") is None and b.claims.claim("extract:c1", "B", LEASE)
    clock.advance(LEASE + STALE_S + 1)
    assert b.claims.release("extract:c1", "B")
    assert b.claims.holder_of("checkin:7") is None


def test_a_release_rolled_back_with_its_transaction_leaves_the_job_claimed(two):
    a, b = two
    assert a.claims.claim("extract:c1", "A", LEASE)
    with pytest.raises(RuntimeError), a.transaction():
        assert a.claims.release("extract:c1", "A")
        raise RuntimeError("the job's write failed")
    assert not b.claims.claim("extract:c1", "B", LEASE)


def test_processes_racing_for_the_same_jobs_get_each_one_exactly_once(store_url, clock):
    keys = [f"extract:c{i}" for i in range(25)]
    won: dict[str, list[str]] = {key: [] for key in keys}
    # opened (and migrated) one by one
    engines = [MemoryEngine(store_url, HashEmbedder(), clock) for _ in range(4)]
    start = threading.Barrier(len(engines), timeout=20)

    def contender(name: str, engine: MemoryEngine) -> None:
        start.wait()
        for key in keys:
            if engine.claims.claim(key, name, LEASE):
                won[key].append(name)

    threads = [threading.Thread(target=contender, args=(f"P{i}", e)) for i, e in enumerate(engines)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        for engine in engines:
            engine.close()
    assert all(len(holders) == 1 for holders in won.values()), won


def test_a_process_has_one_holder_id_for_its_whole_life_naming_its_host_and_pid():
    import os
    import socket

    assert process_holder() == process_holder()
    host, pid, _ = process_holder().rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))

"""The running bot's upkeep service (``memory.Housekeeping``): the nightly decay and prune in their
order, audit rows a killed run left open, and the retention window a batch per memory-thread call."""

from __future__ import annotations

import pytest
from conftest import count, remember, say

from memory import Housekeeping
from memory.clock import DAY
from memory.housekeeping import Maintained
from memory.storage.db import AsyncRunner
from memory.upkeep.retention import MIN_DAYS


@pytest.fixture
async def runner():
    runner = AsyncRunner()
    yield runner
    runner.shutdown()


async def test_maintain_decays_before_it_prunes_and_keeps_what_is_still_worth_it(
    engine, clock, runner
):
    kites = remember(engine, "Alice flies kites on Sundays", importance=5.0)
    # 1.02 is kept by a prune alone; decayed first (x 0.95 = 0.969) it falls below 1 and goes
    heron = remember(engine, "Alice once saw a heron", importance=1.02)
    clock.advance(40 * DAY)

    done = await Housekeeping(engine, runner).maintain()

    assert done == Maintained(decayed=2, pruned=1, entities_pruned=0)
    assert engine.memory_rows.get(heron.id).forgotten
    assert not engine.memory_rows.get(kites.id).forgotten
    assert await Housekeeping(engine, runner).maintain() == Maintained(decayed=1)


async def test_reaping_closes_only_the_rows_a_killed_run_left_and_drops_their_excerpt(
    engine, clock, runner
):
    stale = engine.reflections.start("daily", "discord:dm-alice", "alice: my pin is under the mat")
    clock.advance(2 * 3600)
    fresh = engine.reflections.start("daily", "discord:dm-bob", "bob: hello")

    assert await Housekeeping(engine, runner).reap_stale_audits() == 1

    rows = {r["id"]: r for r in engine.db.rows("SELECT * FROM reflections")}
    assert (rows[stale]["status"], rows[stale]["input_excerpt"]) == ("failed", "")
    assert rows[fresh]["status"] == "running" and rows[fresh]["input_excerpt"] == "bob: hello"
    assert await Housekeeping(engine, runner).reap_stale_audits() == 0


async def test_expire_deletes_the_whole_window_a_small_batch_at_a_time(engine, clock, runner):
    days = MIN_DAYS + 5
    for day in range(days):
        say(engine, f"day {day} in the DM", author="alice", dm_person="alice")
        say(engine, f"day {day} in the server", author="bob", guild="g1")
        clock.advance(DAY)

    done = await Housekeeping(engine, runner).expire(MIN_DAYS, batch=3)

    assert done.messages == 2 * (days - MIN_DAYS)  # more than one batch of 3, all of them
    assert count(engine, "messages") == 2 * MIN_DAYS
    assert (await Housekeeping(engine, runner).expire(MIN_DAYS)).messages == 0
    with pytest.raises(ValueError, match="at least"):
        await Housekeeping(engine, runner).expire(MIN_DAYS - 1)
    assert count(engine, "messages") == 2 * MIN_DAYS  # a refused window deletes nothing

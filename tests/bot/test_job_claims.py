"""Background jobs claimed across processes (SCALE-1): two job runners on one store, as two bot processes would
be (two engines, two memory threads, one clock), on SQLite and on PostgreSQL. Each buffered batch, ended session
and chat-day is learned from exactly once; a dead holder's job is redone once its lease ran out; a live claim is
never taken; the claim goes only with the job's write."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from conftest import HashEmbedder, count, dm_ctx, say

from bot.background import Background
from bot.daily import DailyReflection
from bot.jobs import JobRunner
from memory.clock import DAY, FakeClock
from memory.engine import MemoryEngine
from memory.jobs.conversation import REFLECT_SYSTEM
from memory.storage.db import AsyncRunner
from memory.storage.sessions import ExtractionBuffer
from memory.upkeep.daily import DailyReflections

LEASE = 300.0
# each chat's person names their own pet: the fact a job learns names it too
PET = re.compile(r"Zorb\d+")


@dataclass
class Model:
    """The extraction model for every job: the fact it answers names the pet it read; the judge always says no.
    Every call is logged; while ``gate`` is closed an answer waits (a job held mid-ask, as a slow model holds it)."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        pet = PET.search(user)
        if not system or pet is None:
            return "no"
        self.calls.append((system, pet.group(0)))
        self.asked.set()
        await asyncio.sleep(0.01)  # the other process's tick gets the loop meanwhile
        if self.gate is not None:
            await self.gate.wait()
        fact = [
            {
                "speaker": "P1",
                "type": "semantic",
                "kind": "profile",
                "importance": 7,
                "subject": "pet",
                "content": f"has {pet[0]}",
            }
        ]
        return (
            json.dumps({"facts": fact, "summary": f"talked about {pet[0]}"})
            if system == REFLECT_SYSTEM
            else json.dumps(fact)
        )


@dataclass
class Process:
    """What one bot process runs its background jobs with."""

    engine: MemoryEngine
    runner: AsyncRunner
    model: Model
    jobs: JobRunner
    background: Background


def process(url: str, clock: FakeClock, holder: str, model: Model) -> Process:
    engine, runner = MemoryEngine(url, HashEmbedder(), clock), AsyncRunner()
    jobs = JobRunner(engine, runner, model, holder=holder, lease_s=LEASE)
    background = Background(jobs, engine.buffer, engine.channels, engine.summaries)
    return Process(engine, runner, model, jobs, background)


@pytest.fixture
async def two(store_url, clock) -> AsyncIterator[tuple[Process, Process]]:
    a, b = process(store_url, clock, "A", Model()), process(store_url, clock, "B", Model())
    yield a, b
    for p in (a, b):
        p.runner.shutdown()
        p.engine.close()


def chats(p: Process, n: int, *, touch: bool = False) -> list[str]:
    """``n`` DMs, each person naming their pet once; buffered for extraction (and the chat's session begun)."""
    keys = []
    for i in range(n):
        person, text = f"p{i}", f"my pet is called Zorb{i}"
        key, ctx = f"discord:dm-{person}", dm_ctx(f"p{i}")
        mid = say(p.engine, text, author=person, dm_person=person)
        p.engine.buffer.push(key, ctx, text, author_name=person, message_id=mid)
        if touch:
            p.engine.channels.touch(key, ctx)
        keys.append(key)
    return keys


def learned(p: Process) -> list[str]:
    return sorted(m.content for m in p.engine.memory_rows.listing(None, limit=100))


async def test_two_processes_ticking_at_once_extract_every_buffered_batch_exactly_once(two, clock):
    a, b = two
    chats(a, 6)
    clock.advance(31)  # past the debounce
    ticks = await asyncio.gather(a.background.tick(), b.background.tick())
    assert sum(t["extracted"] for t in ticks) == 6
    assert sorted(pet for _, pet in a.model.calls + b.model.calls) == [f"Zorb{i}" for i in range(6)]
    assert learned(b) == [f"has Zorb{i}" for i in range(6)]
    await asyncio.gather(a.background.tick(), b.background.tick())  # nothing left to do, for either
    assert len(a.model.calls + b.model.calls) == 6 and a.background.buffer.pending() == 0
    assert count(a.engine, "job_claims") == 0  # every claim went with its job's write


async def test_two_processes_reflect_on_an_ended_session_once(two, clock):
    a, b = two
    chats(a, 3, touch=True)
    clock.advance(601)  # the sessions ended (and the batches are due)
    await asyncio.gather(a.background.tick(), b.background.tick())
    reflections = [pet for system, pet in a.model.calls + b.model.calls if system == REFLECT_SYSTEM]
    assert sorted(reflections) == ["Zorb0", "Zorb1", "Zorb2"]
    assert count(a.engine, "session_summaries") == 3
    # extraction and reflection learn it once between them
    assert learned(a) == [
        "has Zorb0",
        "has Zorb1",
        "has Zorb2",
    ]


async def test_two_processes_running_the_daily_reflection_at_once_reflect_each_chat_day_once(
    two, clock
):
    a, b = two
    chats(a, 3, touch=True)
    clock.advance(DAY)
    a_daily = DailyReflection(a.jobs, DailyReflections(a.engine))
    b_daily = DailyReflection(b.jobs, DailyReflections(b.engine))
    await asyncio.gather(a_daily.run(), b_daily.run())
    assert sorted(pet for _, pet in a.model.calls + b.model.calls) == ["Zorb0", "Zorb1", "Zorb2"]
    assert count(a.engine, "daily_reflections") == 3 and learned(a) == [
        "has Zorb0",
        "has Zorb1",
        "has Zorb2",
    ]
    await asyncio.gather(a_daily.run(), b_daily.run())
    assert len(a.model.calls + b.model.calls) == 3  # nothing due any more


async def test_a_claim_whose_holder_died_is_taken_over_after_its_lease_and_the_job_done_once(
    two, clock
):
    a, b = two
    key = chats(a, 1)[0]
    clock.advance(31)
    assert a.engine.claims.claim(f"extract:{key}", "a process that died mid-job", LEASE)
    assert (await b.background.tick())["extracted"] == 0 and b.model.calls == []
    clock.advance(LEASE + 1)
    assert (await b.background.tick())["extracted"] == 1
    assert b.model.calls == [("You extract memories. Answer with JSON only.", "Zorb0")]
    assert learned(a) == ["has Zorb0"] and count(a.engine, "job_claims") == 0


async def test_a_live_claim_is_never_taken_while_its_holder_asks_the_model(two, clock):
    a, b = two
    key = chats(a, 1)[0]
    clock.advance(31)
    a.model.gate = asyncio.Event()
    working = asyncio.create_task(a.background.tick())
    await a.model.asked.wait()
    clock.advance(LEASE - 1)  # a slow model, still within the lease
    assert (await b.background.tick())["extracted"] == 0 and b.model.calls == []
    assert b.engine.claims.holder_of(f"extract:{key}")[0] == "A"  # type: ignore[index]
    a.model.gate.set()
    assert (await working)["extracted"] == 1
    assert learned(b) == ["has Zorb0"] and len(a.model.calls) == 1


async def test_a_holder_that_stalled_past_its_lease_loses_the_job_and_its_late_write_is_dropped(
    two, clock
):
    a, b = two
    chats(a, 1)
    clock.advance(31)
    a.model.gate = asyncio.Event()
    stalled = asyncio.create_task(a.background.tick())
    await a.model.asked.wait()
    clock.advance(LEASE + 1)  # A hung (a paused VM, a stopped process): B may take the job over
    assert (await b.background.tick())["extracted"] == 1
    a.model.gate.set()
    assert (await stalled)[
        "extracted"
    ] == 0  # A's answer came back too late: not written a second time
    assert learned(a) == ["has Zorb0"] and a.background.buffer.pending() == 0


@dataclass(frozen=True)
class Clearing:
    """A job whose write clears a chat's buffer and then fails (a full disk, a lost connection) when ``breaks``."""

    buffer: ExtractionBuffer
    channel: str
    breaks: bool

    def gather(self) -> list[int] | None:
        return [item.id for item in self.buffer.take(self.channel)] or None

    async def ask(self, plan: list[int], model) -> str:
        return await model("system", "Zorb0")

    def apply(self, plan: list[int], answer: str) -> int:
        self.buffer.done(plan)
        if self.breaks:
            raise OSError("disk full")
        return len(plan)

    def failed(self, plan: list[int], error: Exception) -> int:
        return 0


async def test_the_claim_goes_only_with_the_jobs_write_so_a_failed_write_leaves_the_job_to_be_redone(
    two, clock
):
    a, b = two
    key = chats(a, 1)[0]
    a.model.gate = asyncio.Event()
    failing = asyncio.create_task(
        a.jobs.run(Clearing(a.background.buffer, key, breaks=True), claim=f"clear:{key}")
    )
    await a.model.asked.wait()
    assert b.engine.claims.holder_of(f"clear:{key}")[0] == "A"  # type: ignore[index]  # held while the model writes
    a.model.gate.set()
    with pytest.raises(OSError):
        await failing
    assert a.background.buffer.pending() == 1  # the write rolled back, and the release with it...
    # ...so B redoes it
    assert (
        await b.jobs.run(Clearing(b.background.buffer, key, breaks=False), claim=f"clear:{key}")
        == 1
    )
    assert b.background.buffer.pending() == 0 and count(a.engine, "job_claims") == 0

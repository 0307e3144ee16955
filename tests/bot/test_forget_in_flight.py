"""Forget while work is in flight (issue 33, SEC-3): a forget that lands while a job's model writes (between its
gather and its apply) leaves nothing of the words in the store files and nothing is learned back.

Each job is run by the bot's one runner (``bot.jobs.JobRunner``) on a real SQLite file; the model is a scripted
``AsyncCompleter`` whose answer is released only after the test has forgotten (its ``before`` step runs the forget
on the memory thread, as a reply's /forget would while the model writes). The embedding case is ``reembed`` in a
CLI process while the bot forgets (a second connection to the same file); the ingest case is the folder watch's
file read by the model while the file is forgotten.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import HashEmbedder, count, dm_ctx, remember

from bot.background import Background
from bot.daily import DailyReflection
from bot.jobs import JobRunner
from memory.clock import DAY
from memory.engine import MemoryEngine
from memory.jobs.conversation import REFLECT_SYSTEM
from memory.models import Scope, Visibility
from memory.storage.db import AsyncRunner
from memory.storage.messages import NewMessage
from memory.upkeep.daily import DailyReflections
from memory.upkeep.forgetting import forget_everything
from memory.upkeep.reembed import reembed
from memory.write.ingest import Ingester, IngestTarget
from memory.write.sources import message_deleted

WORD = "Quetzalnimbus"
FACT = f"Alice's boat is called {WORD}"
KEY = "discord:dm-alice"


class HeldModel:
    """The extraction model: its answer names the secret; before it answers, ``before`` runs (the forget), so the
    answer arrives after the forget, as a slow model's does. The judge (no system prompt) says "no"."""

    def __init__(
        self,
        before: Callable[[], Awaitable[None]],
        *,
        summary: str = f"Alice said her boat is called {WORD}",
    ) -> None:
        self.before, self.summary, self.calls = before, summary, 0
        self.forgotten = False

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        self.calls += 1
        if not self.forgotten:
            self.forgotten = True
            await self.before()
        if not system:
            # the judge, or the compaction summary
            return "no" if "contradict" in user.lower() else self.summary
        fact = [
            {
                "speaker": "P1",
                "type": "semantic",
                "kind": "profile",
                "importance": 8,
                "subject": "boat",
                "content": FACT,
            }
        ]
        return (
            json.dumps({"facts": fact, "summary": self.summary})
            if system == REFLECT_SYSTEM
            else json.dumps(fact)
        )


@pytest.fixture
async def runner():
    runner = AsyncRunner()
    yield runner
    runner.shutdown()


def background(engine: MemoryEngine, runner: AsyncRunner, model: HeldModel) -> Background:
    jobs = JobRunner(engine, runner, model)
    return Background(jobs, engine.buffer, engine.channels, engine.summaries)


def said(engine: MemoryEngine, text: str, *, mid: str, role: str = "user") -> str:
    """A turn of Alice's DM, stored with its platform id, buffered for extraction and its session begun."""
    ctx = dm_ctx("alice")
    author = "alice" if role == "user" else "bot"
    message = NewMessage(
        "discord",
        "dm-alice",
        author,
        text,
        role=role,
        dm_person_id="alice",
        platform_message_id=mid,
        author_name="Alice",
    )
    stored = engine.messages.add(message)
    if role == "user":
        engine.buffer.push(KEY, ctx, text, author_name="Alice", message_id=stored)
    engine.channels.touch(KEY, ctx)
    return stored


def in_files(engine: MemoryEngine, word: str = WORD) -> int:
    """Occurrences of the word in the database file and its WAL, byte by byte (any case)."""
    path = Path(engine.db.path)
    files = [path, path.with_name(path.name + "-wal")]
    return sum(f.read_bytes().lower().count(word.lower().encode()) for f in files if f.exists())


def relearned(engine: MemoryEngine) -> int:
    return count(engine, "memories", "content LIKE ?", (f"%{WORD}%",))


def forget_alice(engine: MemoryEngine, runner: AsyncRunner) -> Callable[[], Awaitable[None]]:
    async def forget() -> None:
        await runner.run(forget_everything, engine, ["alice"])

    return forget


def assert_nothing_left(engine: MemoryEngine) -> None:
    assert relearned(engine) == 0
    assert count(engine, "session_summaries", "text LIKE ?", (f"%{WORD}%",)) == 0
    assert count(engine, "channel_state", "rolling_summary LIKE ?", (f"%{WORD}%",)) == 0
    assert (
        count(
            engine,
            "reflections",
            "facts LIKE ? OR input_excerpt LIKE ?",
            (f"%{WORD}%", f"%{WORD}%"),
        )
        == 0
    )
    assert in_files(engine) == 0


async def test_extraction_whose_person_is_forgotten_while_the_model_writes_learns_nothing_back(
    engine, runner, clock
):
    said(engine, f"my boat is called {WORD}", mid="1")
    clock.advance(31)
    model = HeldModel(forget_alice(engine, runner))
    assert await background(engine, runner, model).extract(KEY) == 0
    assert model.calls == 1
    assert_nothing_left(engine)


async def test_a_forget_while_the_judge_writes_is_seen_by_the_facts_write(engine, runner, clock):
    """The window between the facts' gather (tombstones read) and their write: the judge's ask."""
    remember(
        engine,
        "Alice's boat is blue",
        subject="boat",
        scope_id="alice",
        visibility=Visibility.PRIVATE,
    )
    said(engine, f"my boat is called {WORD}", mid="1")
    clock.advance(31)
    model = HeldModel(forget_alice(engine, runner))
    model.forgotten = True  # the extraction answers at once ...
    jobs = background(engine, runner, model)
    original = model.__call__

    async def judge_held(system: str, user: str, *, temperature: float = 0.0) -> str:
        if (
            not system and "contradict" in user.lower()
        ):  # ... and the forget lands while the judge is asked
            await runner.run(forget_everything, engine, ["alice"])
        return await original(system, user, temperature=temperature)

    jobs.jobs.model = judge_held
    assert await jobs.extract(KEY) == 0
    assert_nothing_left(engine)


async def test_reflection_on_a_session_whose_turn_is_deleted_while_the_model_writes_keeps_no_summary_of_it(
    engine, runner, clock
):
    said(engine, "hello there", mid="1")
    said(engine, f"my boat is called {WORD}", mid="2")
    engine.buffer.drop_person("alice")  # only the reflection learns here
    clock.advance(601)
    state = engine.channels.get(KEY)
    assert state is not None

    async def deleted_at_the_source() -> None:
        await runner.run(message_deleted, engine, engine.buffer, "discord", "dm-alice", ["2"])

    assert await background(engine, runner, HeldModel(deleted_at_the_source)).reflect(state) == 0
    assert_nothing_left(engine)
    # "hello there" stays, with no summary quoting what was deleted
    assert count(engine, "messages") == 1


async def test_compaction_of_turns_one_of_which_is_deleted_meanwhile_writes_no_summary_of_it(
    engine, runner, clock
):
    said(engine, f"my boat is called {WORD}", mid="0")
    for i in range(1, 70):
        clock.advance(1)
        said(engine, f"small talk number {i}", mid=str(i))
    engine.buffer.drop_person("alice")
    state = engine.channels.get(KEY)
    assert state is not None

    async def deleted_at_the_source() -> None:
        await runner.run(message_deleted, engine, engine.buffer, "discord", "dm-alice", ["0"])

    await background(engine, runner, HeldModel(deleted_at_the_source)).compact(state)
    assert_nothing_left(engine)
    # folded again from what remains, next time
    assert engine.channels.get(KEY).rolling_summary == ""


async def test_daily_reflection_of_a_day_whose_person_is_forgotten_meanwhile_learns_nothing_back(
    engine, runner, clock
):
    said(engine, f"my boat is called {WORD}", mid="1")
    engine.buffer.drop_person("alice")
    clock.advance(DAY)
    model = HeldModel(forget_alice(engine, runner))
    report = await DailyReflection(JobRunner(engine, runner, model), DailyReflections(engine)).run()
    assert model.calls == 1 and report.stored == 0
    assert_nothing_left(engine)


async def test_a_fact_forgotten_by_tombstone_while_the_model_writes_is_not_learned_from_another_turn(
    engine, runner, clock
):
    """A memory forgotten (tombstone) while an extraction of the same words, said again earlier elsewhere, is in flight."""
    old = remember(engine, FACT, subject="boat", scope_id="alice")
    said(engine, f"my boat is called {WORD}", mid="1")
    clock.advance(31)

    async def forget_the_memory() -> None:
        from memory.upkeep.forgetting import forget_memory

        await runner.run(forget_memory, engine, old.id)

    assert await background(engine, runner, HeldModel(forget_the_memory)).extract(KEY) == 0
    # the turn itself stays in history: only the fact is not learned back
    assert relearned(engine) == 0


class ForgettingEmbedder(HashEmbedder):
    """The new embedding model, slow: while it embeds the secret, the bot (another connection) forgets Alice."""

    def __init__(self, forget: Callable[[], None]) -> None:
        super().__init__()
        self.forget, self.fired = forget, False

    def embed(self, texts):
        if not self.fired and any(WORD in t for t in texts):
            self.fired = True
            self.forget()
        return super().embed(texts)


def forget_elsewhere(path: Path, clock) -> None:
    """`companion memory forget-person alice` in another process, while the rebuild runs."""
    other = MemoryEngine(path, None, clock)
    try:
        forget_everything(other, ["alice"])
    finally:
        other.close()


def test_reembedding_while_the_person_is_forgotten_leaves_no_vector_or_cached_vector_of_theirs(
    tmp_path, clock
):
    path = tmp_path / "m.db"
    bot = MemoryEngine(path, HashEmbedder(), clock)
    memory = remember(bot, FACT, subject="boat", scope_id="alice")
    said(bot, f"my boat is called {WORD}", mid="1")
    cli = MemoryEngine(path, None, clock)  # `companion reembed` opens the store with no embedder
    try:
        embedder = ForgettingEmbedder(lambda: forget_elsewhere(path, clock))
        reembed(cli, embedder, allow_dimension_change=True)
        assert embedder.fired
        assert count(cli, "memory_vec", "rowid = ?", (memory.rid,)) == 0
        assert count(cli, "memory_vec") == count(cli, "memories") and count(
            cli, "message_vec"
        ) == count(cli, "messages")
        # what was cached for the forgotten words went with them
        assert count(cli, "embed_cache") == 0
        cli.db.scrub()
        assert in_files(cli) == 0
    finally:
        cli.close()
        bot.close()


def test_a_file_forgotten_while_the_model_reads_it_stores_nothing_of_it(engine, tmp_path):
    from memory.upkeep.forgetting import forget_file

    notes = tmp_path / "notes.md"
    notes.write_text(f"# Locker\n\nThe boat is called {WORD}.\n", encoding="utf-8")

    def model(system: str, user: str, *, temperature: float = 0.0) -> str:
        forget_file(engine, notes)  # the operator forgets the file while the model reads it
        return json.dumps(
            [
                {
                    "type": "semantic",
                    "kind": "profile",
                    "importance": 6,
                    "subject": "boat",
                    "content": FACT,
                }
            ]
        )

    report = Ingester(engine, IngestTarget(Scope.OWNER, "owner"), model).ingest(notes)
    assert report.status == "failed" and "forgotten" in (report.error or "")
    assert relearned(engine) == 0 and count(engine, "ingest_files") == 0
    engine.db.scrub()
    assert in_files(engine) == 0

"""State two processes of one bot must share (SCALE-1) lives in the store, not in a process: two engines on one
store stand for two ``companion run`` processes, on SQLite and on PostgreSQL. A link code made through one is
accepted by the other, a rate limit holds across both, and recall settings changed by one are used by the other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import HashEmbedder, remember

from bot.ratelimit import SLOW_DOWN, MessageLimit, Window, front_door
from bot.types import IncomingMessage, Reply
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.db import AsyncRunner
from memory.storage.knobs import KnobStore
from memory.upkeep.bulletin import Bulletins
from memory.upkeep.forgetting import forget_memory
from tests.adapter_support import ScriptedConversation
from tests.pipeline_support import build_runtime, system_prompts
from tests.voice_support import eventually, routed_model


@pytest.fixture
def two(store_url: str) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    first = MemoryEngine(store_url, HashEmbedder(), FakeClock())
    second = MemoryEngine(store_url, HashEmbedder(), FakeClock())
    yield first, second
    second.close()
    first.close()


def message(author: str, text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="discord",
        channel_id="c1",
        author_id=author,
        author_name="mallory",
        text=text,
        guild_id="g1",
    )


async def test_a_flood_spread_over_two_processes_is_limited_as_one(two) -> None:
    """Mallory's messages land on two shards' processes in turn: the limit counts them together."""
    now = [1000.0]
    doors, runners = [], []
    for engine in two:
        runner = AsyncRunner()
        runners.append(runner)
        window = Window(MessageLimit(3, 60.0), engine.rate_windows, runner, now=lambda: now[0])
        doors.append(front_door(ScriptedConversation(), window, None))
    try:
        answers: list[Reply] = [
            await doors[i % 2].reply(message("9", f"spam {i}")) for i in range(6)
        ]
        assert [a.text for a in answers] == [
            "echo: spam 0",
            "echo: spam 1",
            "echo: spam 2",
            SLOW_DOWN,
            "",
            "",
        ]
        assert (
            await doors[1].reply(message("5", "hi"))
        ).text == "echo: hi"  # someone else is not held back
        now[0] += 61
        assert (await doors[1].reply(message("9", "better now?"))).text == "echo: better now?"
    finally:
        for runner in runners:
            runner.shutdown()


def test_a_link_code_made_through_one_process_is_accepted_by_the_other(two) -> None:
    first, second = two
    alice = first.people.resolve("discord", "111", "alice")
    code = first.people.issue_code(alice)
    assert second.people.redeem(code, "telegram", "222") == alice
    assert first.people.resolve("telegram", "222", "alice") == alice


def test_recall_settings_changed_by_one_process_are_used_by_the_other_at_once(two) -> None:
    first, second = two
    assert KnobStore(second.db).get("memories").top_k == 10
    KnobStore(first.db).update("memories", {"top_k": 3})
    assert KnobStore(second.db).get("memories").top_k == 3


def spoken(text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="discord",
        channel_id="lounge",
        author_id="3003",
        author_name="Alice",
        text=text,
        guild_id="g1",
        modality="voice",
    )


async def test_a_memory_another_process_forgets_leaves_this_processes_warm_voice_memory_at_once(
    store_url, srv, tmp_path
) -> None:
    """A voice session's warm snapshot would answer the same question again from memory held in the process;
    a forget committed by another process must empty it before the next spoken turn."""
    runtime = build_runtime(tmp_path / "unused.db", srv, FakeClock(), database_url=store_url)
    await runtime.start(background_loop=False)
    srv.default = routed_model([])
    other = MemoryEngine(store_url, HashEmbedder(), FakeClock())
    try:
        tent = remember(
            runtime.engine,
            "Alice's tent is bright orange",
            scope_id="discord:3003",
            guild_id="discord:g1",
        )
        await runtime.orchestrator.reply(spoken("What colour is my tent?"))
        assert "bright orange" in system_prompts(srv)[-1]
        signal = runtime.engine.forget_signal()
        forget_memory(other, tent.id)
        # PostgreSQL: the NOTIFY reached this process
        await eventually(lambda: runtime.engine.forget_signal() != signal)
        await runtime.orchestrator.reply(spoken("What colour is my tent?"))
        assert "bright orange" not in system_prompts(srv)[-1]
    finally:
        other.close()
        srv.default = lambda body: "[]"
        await runtime.stop()


def test_a_bulletin_built_by_one_process_is_gone_for_the_other_once_a_memory_it_used_is_forgotten(
    two,
) -> None:
    """Bulletins are read from the store at each turn (no copy in a process), and a forget drops the bulletins built
    from its partition in the same transaction: another process's next turn has none."""
    first, second = two
    kept = remember(first, "Alice keeps bees", scope_id="alice")
    gone = remember(first, "Alice's sister lives in Porto", scope_id="alice")
    plan = Bulletins(first).plan(Bulletins(first).scope("dm", "alice"))
    assert (
        plan is not None
        and kept.id
        and Bulletins(first).save(plan, "Alice keeps bees; her sister lives in Porto.")
    )
    assert Bulletins(second).get("dm", "alice") is not None
    forget_memory(first, gone.id)
    assert Bulletins(second).get("dm", "alice") is None


async def test_on_postgresql_words_stored_elsewhere_keep_voice_caches_and_words_forgotten_elsewhere_drop_them(
    pg_url,
) -> None:
    """The forget signal moves for a forget or an edit only: another process storing messages and memories all day
    must not empty this process's warm voice memory at every turn (it would lose its point)."""
    first = MemoryEngine(pg_url, HashEmbedder(), FakeClock())
    second = MemoryEngine(pg_url, HashEmbedder(), FakeClock())
    try:
        signal, heard = first.forget_signal(), first.db.data_version()
        note = remember(second, "Bob sails on Sundays", scope_id="bob")
        # the insert's notification arrived
        await eventually(lambda: first.db.data_version() != heard)
        assert first.forget_signal() == signal
        second.memories.update(note.id, content="Bob sails on Saturdays")
        # an edit: what a cache holds may be stale
        await eventually(lambda: first.forget_signal() != signal)
        signal = first.forget_signal()
        forget_memory(second, note.id)
        await eventually(lambda: first.forget_signal() != signal)
    finally:
        second.close()
        first.close()


def test_a_transaction_that_need_not_wait_for_the_disk_still_commits_whole_or_not_at_all(
    two,
) -> None:
    """The rate limit's windows commit without waiting for PostgreSQL's WAL flush: still atomic, still seen by others."""
    first, second = two
    first.rate_windows.admit("discord:1", 10, 60.0, 1000.0)
    with pytest.raises(RuntimeError), first.db.transaction(durable=False):
        first.db.execute("UPDATE rate_windows SET told = 1 WHERE account = ?", ("discord:1",))
        raise RuntimeError("half way")
    assert second.db.scalar("SELECT told FROM rate_windows WHERE account = ?", ("discord:1",)) == 0
    # the first reply counted in both
    assert second.rate_windows.admit("discord:1", 1, 60.0, 1001.0) is False

"""State two processes of one bot must share (SCALE-1) lives in the store, not in a process: two engines on one
store stand for two ``companion run`` processes, on SQLite and on PostgreSQL. A link code made through one is
accepted by the other, a rate limit holds across both, and recall settings changed by one are used by the other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.ratelimit import SLOW_DOWN, MessageLimit, Window, front_door
from bot.types import IncomingMessage, Reply
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.db import AsyncRunner
from memory.storage.knobs import KnobStore
from memory.storage.people import People
from memory.storage.ratelimits import RateWindows
from tests.adapter_support import ScriptedConversation
from tests.conftest import HashEmbedder


@pytest.fixture
def two(store_url: str) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    first = MemoryEngine(store_url, HashEmbedder(), FakeClock())
    second = MemoryEngine(store_url, HashEmbedder(), FakeClock())
    yield first, second
    second.close()
    first.close()


def message(author: str, text: str) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="c1", author_id=author, author_name="mallory", text=text, guild_id="g1")


async def test_a_flood_spread_over_two_processes_is_limited_as_one(two) -> None:
    """Mallory's messages land on two shards' processes in turn: the limit counts them together."""
    now = [1000.0]
    doors, runners = [], []
    for engine in two:
        runner = AsyncRunner()
        runners.append(runner)
        window = Window(MessageLimit(3, 60.0), RateWindows(engine), runner, now=lambda: now[0])
        doors.append(front_door(ScriptedConversation(), window, None))
    try:
        answers: list[Reply] = [await doors[i % 2].reply(message("9", f"spam {i}")) for i in range(6)]
        assert [a.text for a in answers] == ["echo: spam 0", "echo: spam 1", "echo: spam 2", SLOW_DOWN, "", ""]
        assert (await doors[1].reply(message("5", "hi"))).text == "echo: hi"  # someone else is not held back
        now[0] += 61
        assert (await doors[1].reply(message("9", "better now?"))).text == "echo: better now?"
    finally:
        for runner in runners:
            runner.shutdown()


def test_a_link_code_made_through_one_process_is_accepted_by_the_other(two) -> None:
    first, second = two
    alice = People(first).resolve("discord", "111", "alice")
    code = People(first).issue_code(alice)
    assert People(second).redeem(code, "telegram", "222") == alice
    assert People(first).resolve("telegram", "222", "alice") == alice


def test_recall_settings_changed_by_one_process_are_used_by_the_other_at_once(two) -> None:
    first, second = two
    assert KnobStore(second.db).get("memories").top_k == 10
    KnobStore(first.db).update("memories", {"top_k": 3})
    assert KnobStore(second.db).get("memories").top_k == 3

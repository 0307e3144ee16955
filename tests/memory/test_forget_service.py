"""``memory.forget.Forgetting``: the face's forgetting, on a real store through the memory thread."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import count, remember

from memory import AsyncMemory, AsyncRunner, NotFound
from memory.models import Erased, Scope

WORD = "Quetzalnimbus"


@pytest.fixture
async def root(engine):
    runner = AsyncRunner()
    yield AsyncMemory(engine, runner)
    runner.shutdown()


async def test_a_memory_is_forgotten_whole_and_the_answer_is_frozen(root, engine):
    kept = remember(engine, f"Alice's boat is called {WORD}", scope_id="alice")
    done = await root.forgetting.memory(kept.id)
    assert done == Erased((kept.id,), (kept.content,), 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.messages = 5  # type: ignore[misc]
    assert (
        engine.db.scalar("SELECT count(*) FROM memories WHERE content LIKE ?", (f"%{WORD}%",)) == 0
    )
    again = remember(engine, "Alice's cat is called Miso", scope_id="alice")
    assert (await root.forgetting.memory(again.id)).memories == (again.id,)
    assert count(engine, "memories") == 0


async def test_an_unknown_id_is_refused_and_nothing_is_touched(root, engine):
    kept = remember(engine, "Alice likes tea", scope_id="alice")
    with pytest.raises(NotFound):
        await root.forgetting.memory("no-such-id")
    with pytest.raises(NotFound):
        await root.forgetting.memory(f"{kept.id}' OR 1=1 --")
    assert count(engine, "memories") == 1


async def test_a_guild_is_forgotten_and_another_guild_keeps_its_lore(root, engine):
    remember(engine, f"g1's mascot is called {WORD}", scope=Scope.GUILD, scope_id="g1")
    other = remember(engine, "g2 meets on Fridays", scope=Scope.GUILD, scope_id="g2")
    counts = await root.forgetting.guild("g1")
    assert counts.get("memories", 0) >= 1
    assert [m["id"] for m in engine.db.rows("SELECT id FROM memories")] == [other.id]


async def test_a_person_is_forgotten_with_their_export_first_and_privacy_off_outlives_it(
    root, engine
):
    """The one forgetting service the dashboard and the command line use: the export shows what the
    forget removes, and a person who said /privacy off is still not remembered afterwards (SEC-5)."""
    remember(engine, f"Alice's boat is called {WORD}", scope_id="alice")
    other = remember(engine, "Bob sails on Sundays", scope_id="bob")
    engine.people.set_remembered("alice", False)
    data = await root.forgetting.export(["alice"])
    assert [m["content"] for m in data["memories"]] == [f"Alice's boat is called {WORD}"]
    counts = await root.forgetting.person(["alice"])
    assert counts["memories"] == 1
    assert [m["id"] for m in engine.db.rows("SELECT id FROM memories")] == [other.id]
    assert engine.privacy.stopped_accounts(["alice"]) == ["alice"]

"""Two facts are never chained as versions of one (issue 44 item 11): "Alice ran 5 km on Monday" and
"Alice ran 7 km on Tuesday" are 0.95 alike in meaning and were chained, so forgetting one took both.
Through the real extraction path (scripted model over the openai SDK, the bundled MiniLM, a real
store), then byte by byte in the store's files; a store chained before the fix; and a real new
version ("Alice's locker is 12" -> "... 14"), which a forget still takes whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.clock import FakeClock
from memory.models import NewMemory, Scope, Source
from memory.upkeep.forgetting import forget_memory
from memory.write.versions import distinct
from tests.pipeline_support import build_runtime, dm, facts

MONDAY, TUESDAY = "Alice ran 5 km on Monday", "Alice ran 7 km on Tuesday"


@pytest.fixture
async def alice(tmp_path, srv, minilm):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), embedder=minilm)
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


async def learn(rt, srv, said: str, content: str) -> None:
    """Alice tells the bot ``said`` in her DM; extraction files ``content``."""
    rt.engine.clock.advance(3600)
    srv.script("Nice!")
    await rt.orchestrator.reply(dm("telegram", "7", said))
    rt.engine.clock.advance(31)
    srv.script(facts({"speaker": "P1", "subject": "running", "content": content, "lines": [1]}))
    assert (await rt.background.tick())["extracted"] == 1


def rows(rt) -> dict[str, dict]:
    found = rt.engine.db.rows("SELECT id, content, superseded_by FROM memories")
    return {r["content"]: r for r in found}


def in_files(db: Path, word: str) -> int:
    """How many times ``word`` is in the store's files (the database, its WAL and journal)."""
    files = [p for p in db.parent.iterdir() if p.name.startswith(db.name) and p.is_file()]
    return sum(p.read_bytes().lower().count(word.lower().encode()) for p in files)


@pytest.mark.parametrize("how", ["memory_delete", "/forget in words"])
async def test_two_runs_on_two_days_are_two_facts_and_forgetting_one_leaves_the_other(
    alice, srv, tmp_path, how
):
    await learn(alice, srv, "I ran 5 km on Monday", MONDAY)
    await learn(alice, srv, "I ran 7 km on Tuesday", TUESDAY)
    kept = rows(alice)
    assert set(kept) == {MONDAY, TUESDAY} and kept[MONDAY]["superseded_by"] is None
    if how == "memory_delete":
        await alice.runner.run(forget_memory, alice.engine, kept[TUESDAY]["id"])
    else:
        asked = dm("telegram", "7", "/forget my 7 km run on Tuesday")
        said = await alice.orchestrator.command("forget", "my 7 km run on Tuesday", asked)
        assert TUESDAY in said and MONDAY not in said
    assert list(rows(alice)) == [MONDAY] and rows(alice)[MONDAY]["superseded_by"] is None
    db = tmp_path / "bot.db"
    assert in_files(db, "Tuesday") == 0 and in_files(db, "7 km") == 0
    assert in_files(db, "Monday") > 0  # the fact and the message it was learned from


async def test_a_changed_locker_number_is_a_new_version_and_a_forget_takes_both(
    alice, srv, tmp_path
):
    await learn(alice, srv, "my locker is 4412", "Alice's locker is 4412")
    await learn(alice, srv, "my locker is 4414 now", "Alice's locker is 4414")
    kept = rows(alice)
    assert kept["Alice's locker is 4412"]["superseded_by"] == kept["Alice's locker is 4414"]["id"]
    await alice.runner.run(forget_memory, alice.engine, kept["Alice's locker is 4414"]["id"])
    assert rows(alice) == {}
    assert in_files(tmp_path / "bot.db", "4412") == 0 and in_files(tmp_path / "bot.db", "4414") == 0


def test_a_fact_chained_to_another_before_the_fix_is_kept_and_current_when_the_other_is_forgotten(
    engine, tmp_path
):
    def add(content: str) -> str:
        new = NewMemory(content, "running", Scope.USER, "alice", source=Source.USER_STATED)
        return engine.memories.add(new).memory.id

    monday, tuesday = add(MONDAY), add(TUESDAY)
    engine.memories.supersede(tuesday, [monday])  # as the store chained them before issue 44
    assert engine.memory_rows.get(monday).superseded_by == tuesday
    assert forget_memory(engine, tuesday).memories == [tuesday]
    assert engine.memory_rows.get(monday).superseded_by is None
    assert [m.content for m in engine.memory_rows.listing(None)] == [MONDAY]
    assert in_files(tmp_path / "m.db", "Monday") > 0


@pytest.mark.parametrize(
    "older,newer,two",
    [
        (MONDAY, TUESDAY, True),
        ("Alice ran 5 km on Monday", "Alice ran 5 km on Tuesday", True),
        ("Alice swam 20 laps on March 3", "Alice swam 22 laps on March 5", True),
        ("Alice has 2 cats", "Alice has 2 cats and 1 dog", True),
        ("Alice's locker is 12", "Alice's bike lock is 14", True),
        ("Alice has 2 cats", MONDAY, True),
        ("Alice's locker is 12", "Alice's locker is 14", False),
        ("Alice has 2 cats", "Alice has 3 cats", False),
        ("Alice's train leaves at 8:15", "Alice's train leaves at 9:40", False),
        ("Alice lives in Oslo", "Alice lives in Bergen", False),
        ("Alice may move to Oslo", "Alice may move to Bergen", False),
    ],
)
def test_which_facts_are_two_and_which_a_new_version(older, newer, two):
    assert distinct(older, newer) is two

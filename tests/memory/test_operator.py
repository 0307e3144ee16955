"""``memory.StoreTools``: the operator's use cases on a real store (the command line's tests run
them through ``companion``; these attack what the service itself promises)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import count, remember

from memory import Folders, InvalidInput, StoreTools

WORD = "Quorvalline"


def tables(found) -> int:
    return next(f.remaining for f in found if f.surface == "tables")


def test_an_account_finds_the_person_it_is_linked_to_and_no_one_else(engine):
    alice = engine.people.resolve("discord", "1", "Alice")
    engine.people.redeem(engine.people.issue_code(alice), "telegram", "77")
    remember(engine, "Alice rows a kayak on Sundays", scope_id=alice)
    remember(engine, "Bo keeps bees", scope_id="telegram:88")
    tools = StoreTools(engine)
    by_account = tables(tools.leftovers((), ("telegram:77",), Folders()))
    assert by_account > 0
    assert by_account == tables(tools.leftovers((), (alice,), Folders()))
    # another person's account, and one never met, find none of Alice's rows
    assert tables(tools.leftovers((), ("telegram:99",), Folders())) == 0
    bo = tables(tools.leftovers((), ("telegram:88",), Folders()))
    both = tables(tools.leftovers((), ("telegram:77", "telegram:88"), Folders()))
    assert bo > 0 and both == by_account + bo


def test_a_word_is_counted_and_never_named_and_nothing_to_look_for_is_refused(engine):
    remember(engine, f"Alice's kayak is called {WORD}", scope_id="alice")
    tools = StoreTools(engine)
    found = tools.leftovers((WORD.lower(),), (), Folders())
    assert tables(found) == 1
    assert WORD.lower() not in repr(found).lower()
    with pytest.raises(ValueError):
        tools.leftovers((), (), Folders())
    with pytest.raises(ValueError):
        tools.leftovers(("",), ("",), Folders())


def test_a_file_never_ingested_forgets_nothing(engine, tmp_path: Path):
    kept = remember(engine, "Alice likes tea", scope_id="alice")
    assert StoreTools(engine).forget_file(tmp_path / "never.md") == {"files": 0, "memories": 0}
    assert engine.memory_rows.get(kept.id).content == "Alice likes tea"


def test_bulletins_for_a_scope_that_is_none_are_refused_and_an_empty_one_plans_nothing(engine):
    tools = StoreTools(engine)
    with pytest.raises(InvalidInput):
        tools.bulletins_due(min_changes=1, scope=("planet", "mars"))
    with pytest.raises(InvalidInput):
        tools.bulletins_due(min_changes=1, scope=("dm", ""))
    assert tools.bulletins_due(min_changes=1, scope=("dm", "telegram:404")) == []
    assert tools.write_bulletins([], lambda *a, **k: "unused") == []
    assert count(engine, "bulletins") == 0


def test_an_import_of_malformed_items_rejects_each_with_its_reason_and_keeps_the_rest(engine):
    counts = StoreTools(engine).import_memories(
        [
            {"content": "Alice likes tea", "subject": "tea", "scope": "user", "scope_id": "alice"},
            {"content": "", "scope": "user", "scope_id": "alice"},
            {"content": "x" * 1_000_000, "scope": "user", "scope_id": "alice"},
            {"content": "no scope at all"},
        ]
    )
    assert counts["stored"] == 1 and counts["rejected"] == 3
    assert len(counts["reasons"]) == 3
    assert count(engine, "memories") == 1

"""``memory.own.OwnMemory``: what a person does to their own memory by command, on a real store.
Attacked with another person's words and ids: nothing of theirs is ever touched."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import count, dm_ctx, remember, say

from memory import OwnMemory
from memory.models import Scope, Source
from memory.own import WordsErased

WORD = "Quetzalnimbus"


def test_a_stated_fact_is_kept_once_in_the_speakers_own_memory(engine):
    own = OwnMemory(engine)
    said_in = ("discord", "dm-alice")
    assert own.remember(dm_ctx("alice"), f"my boat is {WORD}", "boat", said_in=said_in)
    assert not own.remember(dm_ctx("alice"), f"my boat is {WORD}", "boat", said_in=said_in)
    [row] = engine.db.rows("SELECT scope, scope_id, source, importance FROM memories")
    assert (row["scope"], row["scope_id"]) == (Scope.USER.value, "alice")
    assert (row["source"], row["importance"]) == (Source.USER_STATED.value, 7)


def test_words_forget_the_persons_own_memory_and_message_and_leave_anothers(engine):
    alice = remember(engine, f"Alice's boat is called {WORD}", scope_id="alice")
    say(engine, f"my boat is called {WORD}", author="alice", dm_person="alice")
    own = OwnMemory(engine)
    asked_in = ("discord", "dm-bob")
    # the test can fail: bob asks with alice's very words
    nothing = own.forget_words(dm_ctx("bob"), "bob", f"boat {WORD}", asked_in=asked_in)
    assert nothing == WordsErased(None) and nothing.contents == ()
    assert not engine.memory_rows.get(alice.id).forgotten
    assert count(engine, "messages", "content LIKE ?", (f"%{WORD}%",)) == 1
    done = own.forget_words(
        dm_ctx("alice"), "alice", f"boat {WORD}", asked_in=("discord", "dm-alice")
    )
    assert done.memory is not None and done.memory.memories == (alice.id,)
    assert done.said == 1 and done.contents == (alice.content, f"my boat is called {WORD}")
    assert count(engine, "messages", "content LIKE ?", (f"%{WORD}%",)) == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.said = 0  # type: ignore[misc]


def test_a_forget_in_words_takes_the_same_fact_kept_again_in_other_words_and_nothing_else(engine):
    """A real 0.5B filed the Harrogate half marathon twice, once in the bot's words; a forget of
    "the half marathon" left the second in the store."""
    first = remember(
        engine, "Alice is running the Harrogate half marathon in March", scope_id="alice"
    )
    again = remember(
        engine,
        "I saved the durable fact about the Harrogate half marathon in March.",
        scope_id="alice",
    )
    leeds = remember(engine, "Alice lives in Leeds, near the river", scope_id="alice")
    bobs = remember(engine, "Bob is running the Harrogate half marathon too", scope_id="bob")
    done = OwnMemory(engine).forget_words(
        dm_ctx("alice"), "alice", "I'm running the half marathon", asked_in=("discord", "dm-alice")
    )
    assert done.memory is not None and set(done.memory.memories) == {first.id, again.id}
    assert not engine.memory_rows.get(leeds.id).forgotten
    assert not engine.memory_rows.get(bobs.id).forgotten  # another person's, same words


def test_a_veto_of_another_persons_id_changes_nothing(engine):
    alice = remember(engine, f"Alice's boat is called {WORD}", scope_id="alice")
    own = OwnMemory(engine)
    asked_in = ("discord", "dm-bob")
    for short in (alice.id[:8], alice.id, "", "%", f"{alice.id[:8]}' OR 1=1 --"):
        assert own.veto("bob", short, asked_in=asked_in) is None
    assert count(engine, "memories") == 1
    erased = own.veto("alice", alice.id[:8], asked_in=("discord", "dm-alice"))
    assert erased is not None and erased.contents == (alice.content,)

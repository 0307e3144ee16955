"""Attacks on the trust work (issue 20 follow-ups), each the way a careless model or a curious person would try
it: a fact relearned with one word more after its forget, a veto by an id that is not one's own or is ambiguous,
a /privacy off then talk in a server the jobs would read. A real store file in each."""

from __future__ import annotations

from conftest import say

from memory.models import NewMemory, Provenance, Scope, Source
from memory.upkeep.forgetting import forget_memory, veto
from memory.write.tombstones import unforgotten

TORTOISE = "Alice keeps a tortoise called Quintrell"


def _candidate(content: str, sources: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(
        content=content,
        subject="pet",
        scope=Scope.USER,
        scope_id="alice",
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=sources),
    )


def _forgotten(engine, content: str = TORTOISE) -> str:
    said = say(engine, "I keep a tortoise called Quintrell", author="alice", dm_person="alice")
    stored = engine.memories.add(_candidate(content, (said,)))
    forget_memory(engine, stored.memory.id)
    return said


def test_a_forgotten_fact_relearned_with_one_word_more_is_still_held_back(engine):
    _forgotten(engine)
    engine.clock.advance(60)
    reworded = [
        _candidate("Alice keeps a pet tortoise called Quintrell"),
        _candidate("Alice keeps a tortoise called Quintrell now"),
    ]
    assert unforgotten(engine, reworded) == []


def test_a_different_fact_sharing_all_but_one_word_of_a_short_forgotten_one_is_learned(engine):
    _forgotten(engine, "Alice likes tea")
    # "likes tea" less a word is another fact
    assert unforgotten(engine, [_candidate("Alice likes green tea")]) != []


def test_a_fact_said_again_with_one_word_more_after_the_forget_is_learned(engine):
    _forgotten(engine)
    engine.clock.advance(60)
    again = say(engine, "I keep a pet tortoise called Quintrell", author="alice", dm_person="alice")
    candidate = _candidate("Alice keeps a pet tortoise called Quintrell", (again,))
    assert unforgotten(engine, [candidate]) == [candidate]


def test_a_veto_by_someone_elses_id_or_by_a_short_or_shared_prefix_forgets_nothing(engine):
    alice = engine.memories.add(_candidate(TORTOISE)).memory
    bob = engine.memories.add(
        NewMemory(
            content="Bob brews Tamberlyn ale",
            subject="ale",
            scope=Scope.USER,
            scope_id="bob",
            source=Source.AUTO_EXTRACTION,
        )
    ).memory
    assert veto(engine, "alice", bob.id) is None and veto(engine, "alice", bob.id[:8]) is None
    assert veto(engine, "alice", alice.id[:5]) is None  # too short to name one memory
    assert (
        veto(engine, "alice", "") is None
        and veto(engine, "alice", "[]") is None
        and veto(engine, "alice", "%") is None
    )
    assert {m.id for m in engine.memory_rows.listing(None, limit=10)} == {alice.id, bob.id}
    # as listed, in any case: forgotten
    assert veto(engine, "alice", f"[{alice.id[:8].upper()}]") is not None


def test_a_persons_privacy_off_keeps_their_server_talk_out_of_what_the_jobs_read_and_the_others_in(
    engine,
):
    people = engine.people
    people.set_remembered("alice", False)  # said /privacy off
    say(engine, "I race pigeons at Quorrelby", author="alice", guild="discord:g1")
    say(engine, "I row on the Skelbeck river", author="bob", guild="discord:g1")
    read = [
        m.content for m in engine.messages.in_channel_after("discord", "discord:g1-general", 0.0)
    ]
    assert read == ["I row on the Skelbeck river"]

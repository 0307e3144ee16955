"""A line that denies a fact never says it (issue 44 item 11): "I would never steal from the
collection box" holds every word of "Bob steals from the collection box", and made it Bob's; nor
does a denial after a forget count as the fact said again. Each through the real runtime, a
scripted model and a real store; the said-again check also on its own, on a real store.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from conftest import say
from pipeline_support import dm, group

from memory.models import NewMemory, Provenance, Scope, Source
from memory.upkeep.forgetting import forget_memory
from memory.write.tombstones import unforgotten
from memory.write.wording import denies
from tests.memory.test_fact_ownership import (
    cite,
    contents,
    extract,
    item,
    log_lines,
    model,
    tag,
    talk,
)

DENIAL = "I would never steal from the collection box"
ASKED = "Someone has been taking money on Sundays, any idea who?"
QUINTRELL = "I keep a tortoise called Quintrell"
NEVER_QUINTRELL = "I would never keep a tortoise called Quintrell"


async def bob_denies(rt) -> None:
    await talk(
        rt,
        ("observe", group("discord", "g1", "mallory", ASKED, name="Mallory", mid="1")),
        ("observe", group("discord", "g1", "bob", DENIAL, name="Bob", mid="2")),
    )


@pytest.mark.parametrize("cited", [True, False], ids=["cites Bob's denial", "cites nothing"])
async def test_a_fact_bob_denies_in_his_own_words_is_never_filed_as_bobs(rt, srv, caplog, cited):
    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        lines = cite(prompt, DENIAL) if cited else None
        return [item(tag(prompt, DENIAL), "Bob steals from the collection box", lines)]

    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {}, extract=as_the_model_did)
    await bob_denies(rt)
    await extract(rt)
    assert contents(rt) == []
    assert "0 fact(s) filed, 1 dropped (their own words deny it: 1)" in log_lines(caplog)


async def test_what_bob_does_say_in_his_denial_is_filed_as_his(rt, srv):
    said = "Bob would never steal from the collection box"
    model(srv, {}, extract=lambda p: [item(tag(p, DENIAL), said, cite(p, DENIAL))])
    await bob_denies(rt)
    await extract(rt)
    assert [
        (m["content"], m["scope_id"])
        for m in rt.engine.db.rows("SELECT content, scope_id FROM memories")
    ] == [(said, "discord:bob")]


async def test_a_denial_after_a_forget_does_not_bring_the_forgotten_fact_back(rt, srv):
    fact = "Alice keeps a tortoise called Quintrell"
    answer = {"said": QUINTRELL}

    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        line = answer["said"]
        return [item("P1", fact, cite(prompt, line))] if line in prompt else []

    model(srv, {QUINTRELL: "Lovely!", NEVER_QUINTRELL: "Noted."}, extract=as_the_model_did)
    await talk(rt, ("reply", dm("telegram", "7", QUINTRELL, mid="1")))
    await extract(rt)
    (learned,) = rt.engine.db.rows("SELECT id FROM memories")
    await rt.runner.run(forget_memory, rt.engine, learned["id"])
    assert rt.engine.memories.tombstones.count() == 1
    rt.engine.clock.advance(3600)
    answer["said"] = NEVER_QUINTRELL
    await talk(rt, ("reply", dm("telegram", "7", NEVER_QUINTRELL, mid="2")))
    await extract(rt)
    assert contents(rt) == [] and rt.engine.memories.tombstones.count() == 1


# -- the said-again check on its own -------------------------------------------------------------
def _candidate(content: str, source: str) -> NewMemory:
    return NewMemory(
        content=content,
        subject="pet",
        scope=Scope.USER,
        scope_id="alice",
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=(source,)),
    )


@pytest.mark.parametrize(
    "later,lifted",
    [
        (NEVER_QUINTRELL, False),
        ("I don't keep a tortoise called Quintrell any more, she lives with my aunt", False),
        ("No, I keep a tortoise called Quintrell again", True),
        (QUINTRELL + " again", True),
    ],
)
def test_only_a_line_saying_the_fact_the_same_way_round_lifts_its_tombstone(engine, later, lifted):
    fact = "Alice keeps a tortoise called Quintrell"
    said = say(engine, QUINTRELL, author="alice", dm_person="alice")
    forget_memory(engine, engine.memories.add(_candidate(fact, said)).memory.id)
    engine.clock.advance(60)
    candidate = _candidate(fact, say(engine, later, author="alice", dm_person="alice"))
    assert (unforgotten(engine, [candidate]) == [candidate]) is lifted
    assert engine.memories.tombstones.count() == (0 if lifted else 1)


@pytest.mark.parametrize(
    "line,fact,denied",
    [
        (DENIAL, "Bob steals from the collection box", True),
        (DENIAL, "Bob would never steal from the collection box", False),
        ("I steal from the collection box", "Bob doesn't steal from the collection box", True),
        (
            "Not really: I'm a night owl, I do my best thinking after midnight.",
            "I am a night owl",
            False,
        ),
        (
            "I've never had a dog, but I have a cat called Biscuit",
            "Alice has a cat called Biscuit",
            False,
        ),
        (
            "I never lie. I do steal from the collection box.",
            "Bob steals from the collection box",
            False,
        ),
        ("Nice weather today", "Bob steals from the collection box", False),
    ],
)
def test_which_way_round_a_line_says_a_fact(line, fact, denied):
    assert denies(line, fact) is denied

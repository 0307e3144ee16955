"""Issue 45, items 1 and 2, through the real pipeline (the openai SDK against the fake server, a
real store): a person's facts are stored in the third person and shown to the chat model as theirs,
and a fact the conversation did not say (the extraction prompt's example, the beagle) is never
filed.

With the real Qwen2.5-Coder 1.5B every fact of a check was stored as the person said it ("I work as
a nurse at the children's hospital."); shown "I work as a nurse", the bot answered as the person
("I'm a nurse..."). And "I've adopted a beagle called Rex." was filed, citing "What's my cat
called?"."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.models import NewMemory, Scope, Visibility
from tests.memory.test_fact_ownership import cite, model, tag
from tests.pipeline_support import dm

pytestmark = pytest.mark.asyncio

WRITTEN = datetime(2026, 10, 21, 9, 0, tzinfo=UTC).timestamp()  # a Wednesday
NURSE = "I work as a nurse at the children's hospital."
LEEDS = "I live in Leeds, near the river."
MOVED = "I moved here from York last month."
CELLO = "Ich spiele Cello im Orchester."  # German: kept in its language, told about her
CAT = "What's my cat called?"
BEAGLE = "I've adopted a beagle called Rex."  # the old prompt's example, filed by a real 1.5B
STORED = {
    "Priya works as a nurse at the children's hospital.",
    "Priya lives in Leeds, near the river.",
    "Priya moved here from York in September 2026.",
    "Priya spielt Cello im Orchester.",
}
FIRST_PERSON_LINE = re.compile(
    r"""^\s*- [^"\n]*(?:"[^"\n]*"[^"\n]*)*: "(?:I|I'm|I've|My|my) """, re.M
)


def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
    """The 1.5B's answer: each line's own words, in the first person (one with its teller's label,
    as the transcript shows it); the beagle citing the cat."""
    said = [(text, text) for text in (NURSE, MOVED, CELLO)] + [(BEAGLE, CAT)]
    said += [(f"Priya: {LEEDS}", LEEDS)]
    return [
        {
            "speaker": tag(prompt, line),
            "lines": cite(prompt, line),
            "subject": "me",
            "content": fact,
        }
        for fact, line in said
    ]


async def tell(rt, *texts: str) -> None:
    for text in texts:
        rt.engine.clock.advance(1)
        mid = f"m{rt.engine.clock.now():.0f}"
        await rt.orchestrator.reply(dm("telegram", "7", text, name="Priya", mid=mid))


def reply_prompt(srv, said: str) -> str:
    """The system prompt of the reply to ``said`` (the fake server records every request)."""
    return next(
        body["messages"][0]["content"]
        for body in reversed(srv.chat_requests)
        if said in str(body["messages"][-1]["content"])
    )


def memories(rt) -> set[str]:
    return {r["content"] for r in rt.engine.db.rows("SELECT content FROM memories")}


def store_bytes(rt) -> bytes:
    path = Path(rt.engine.db.path)
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


async def test_first_person_facts_are_stored_about_the_person_and_the_beagle_is_not(
    rt, srv, caplog
):
    caplog.set_level(logging.INFO, "memory.write.extraction")
    rt.engine.clock.t = WRITTEN
    model(srv, {}, extract=as_the_model_did)
    await tell(rt, NURSE, LEEDS, MOVED, CELLO, CAT)
    rt.engine.clock.advance(31)
    await rt.background.tick()

    assert memories(rt) == STORED  # third person, "last month" resolved; German too
    log = "\n".join(r.getMessage() for r in caplog.records)
    assert "its distinctive words are not in the lines it came from: 1" in log
    # nowhere in the store file or its log, the FTS shadow tables' stems ("beagl") among them
    held = store_bytes(rt).lower()
    assert b"beagl" not in held and b"nurse" in held


async def test_the_chat_model_reads_whose_each_fact_is_and_no_line_in_the_first_person(rt, srv):
    rt.engine.clock.t = WRITTEN
    model(srv, {}, extract=as_the_model_did)
    await tell(rt, NURSE, LEEDS, MOVED, CELLO, CAT)
    rt.engine.clock.advance(31)
    await rt.background.tick()

    model(srv, {"what I do for work": "You work as a nurse at the children's hospital."})
    await tell(rt, "Do you know what I do for work?")
    system = reply_prompt(srv, "Do you know what I do for work?")
    nurse = json.dumps("Priya works as a nurse at the children's hospital.")
    assert f'about "Priya": {nurse}' in system
    # another language: in its words, told about her, labelled
    assert f'about "Priya": {json.dumps("Priya spielt Cello im Orchester.")}' in system
    assert FIRST_PERSON_LINE.search(system) is None, FIRST_PERSON_LINE.search(system)


async def test_a_first_person_fact_stored_before_is_shown_in_the_third_person_and_kept(rt, srv):
    """Facts written before this (and facts kept in a person's own words: /remember, the tool) are
    not rewritten in the store: the snapshot turns them, so nothing stored changes or is lost."""
    model(srv, {}, extract=lambda prompt: [])
    await tell(rt, "hello")
    old = "I keep bees on my roof and I'm allergic to wasps"
    rt.engine.memories.add(
        NewMemory(old, "bees", Scope.USER, "telegram:7", visibility=Visibility.PRIVATE)
    )
    model(srv, {"bees": "Yes, on your roof."})
    await tell(rt, "Do you remember my bees?")
    system = reply_prompt(srv, "Do you remember my bees?")
    shown = json.dumps("Priya keeps bees on Priya's roof and Priya is allergic to wasps")
    assert f'about "Priya": {shown}' in system
    assert FIRST_PERSON_LINE.search(system) is None
    assert old in memories(rt)  # the stored words are the person's, unchanged


async def test_a_reminder_asked_for_is_never_filed_as_a_fact(rt, srv, caplog):
    """Issue 45: "remind me tomorrow at 9am to call the vet" was filed as a fact (and shown in
    /about me)."""
    caplog.set_level(logging.INFO, "memory.write.extraction")
    ask = "remind me tomorrow at 9am to call the vet"

    def filed(prompt: str) -> list[dict[str, Any]]:
        return [
            {"speaker": tag(prompt, ask), "lines": cite(prompt, ask), "subject": "me", "content": c}
            for c in (ask, "Remind me to call the vet.", NURSE)
        ]

    model(srv, {}, extract=filed)
    await tell(rt, ask, NURSE)
    rt.engine.clock.advance(31)
    await rt.background.tick()
    assert memories(rt) == {"Priya works as a nurse at the children's hospital."}
    assert "a request, not a fact: 2" in "\n".join(r.getMessage() for r in caplog.records)

"""Forgetting what is not a memory yet, and what lifts a forget (issue 31, items 8, 4 and 2 through the pipeline).

Item 8: "/forget Zanzibarite" or "forget my race bib number", said before extraction ran, found no memory and
left the message in history, in the prompt's recent turns and in the store's files. A forget now also removes the
person's OWN messages that say it, with the cascade; someone else's message is never touched.
Item 4: a forgotten fact comes back only when the person's own new message says it, never from a "thanks!".
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import say

from memory.models import NewMemory, Provenance, Scope, Source
from memory.upkeep.forgetting import forget_memory
from memory.write.tombstones import unforgotten
from tests.fakes import ToolCall
from tests.pipeline_support import dm, facts, group

STONE = "Zanzibarite"


def copies(rt, word: str) -> int:
    """Copies of ``word`` in every file under the store's folder (journals flushed, the WAL checkpointed)."""
    engine = rt.engine
    if engine.journals is not None:
        engine.journals.flush()
    engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    folder = Path(rt.engine.db.path).parent
    return sum(
        p.read_bytes().lower().count(word.lower().encode())
        for p in folder.rglob("*")
        if p.is_file()
    )


def user_rows(rt) -> list[str]:
    return [
        r
        for (r,) in rt.engine.db.execute(
            "SELECT content FROM messages WHERE role = 'user' ORDER BY rid"
        )
    ]


async def test_forget_finds_a_word_said_before_extraction_and_leaves_no_byte_of_it(rt, srv):
    # the bot's reply repeats it: it goes with the turn it answers
    srv.script(f"What a lovely {STONE}!")
    await rt.orchestrator.reply(
        dm("telegram", "7", f"My lucky stone is a {STONE} from my aunt", mid="1")
    )
    srv.script("Nice.")
    await rt.orchestrator.reply(dm("telegram", "7", "It rained all day here", mid="2"))
    # the test can fail: the word is in the files (message, FTS, buffer, context)
    assert copies(rt, STONE) > 0
    reply = await rt.orchestrator.command("forget", STONE, dm("telegram", "7", f"/forget {STONE}"))
    assert reply == "I had not kept that as a memory; I deleted 1 message of yours that said it."
    assert user_rows(rt) == ["It rained all day here"]
    assert (
        rt.engine.db.scalar("SELECT COUNT(*) FROM extraction_buffer WHERE text LIKE '%anzibar%'")
        == 0
    )
    assert copies(rt, STONE) == 0
    srv.script("Hello!")
    await rt.orchestrator.reply(dm("telegram", "7", "what did I tell you about stones?", mid="3"))
    # not in the recent turns
    assert STONE.lower() not in json.dumps(srv.chat_requests[-1]["messages"]).lower()


async def test_a_forget_never_removes_what_someone_else_said(rt, srv):
    for who, text in (
        ("alice", f"my {STONE} ring is lost"),
        ("bob", f"I found a {STONE} ring!"),
        ("alice", "thanks Bob"),
    ):
        await rt.orchestrator.observe(
            group("telegram", "g1", who, text, name=who.title(), mid=f"{who}-{text[:4]}")
        )
    reply = await rt.orchestrator.command(
        "forget", STONE, group("telegram", "g1", "alice", f"/forget {STONE}")
    )
    assert "deleted 1 message of yours" in reply
    assert user_rows(rt) == [f"I found a {STONE} ring!", "thanks Bob"]


def forget_said_by_the_model(rt, query: str):
    """A scripted model answering "forget my ..." with memory_search, then memory_delete of the first result."""

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "user":
            return ToolCall("memory_search", {"query": query})
        if "memory_search" in json.dumps(body["messages"][-2].get("tool_calls", "")):
            return ToolCall(
                "memory_delete", {"id": json.loads(last["content"])["results"][0]["id"]}
            )
        return "Done, I forgot it."

    return responder


async def test_forget_that_by_the_model_reaches_a_fact_not_extracted_yet(rt, srv):
    srv.script("Good luck on Sunday!")
    await rt.orchestrator.reply(
        dm("telegram", "7", "My race bib number for Sunday is 4471", mid="1")
    )
    assert copies(rt, "4471") > 0
    srv.default = forget_said_by_the_model(rt, "race bib number")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Forget my race bib number", mid="2"))
    assert reply.forgotten == ("My race bib number for Sunday is 4471",)
    assert user_rows(rt) == [] and copies(rt, "4471") == 0 and copies(rt, "race bib") == 0


async def test_the_model_cannot_delete_another_persons_message_by_id(rt, srv):
    await rt.orchestrator.observe(
        group("telegram", "g1", "bob", f"I found a {STONE} ring!", name="Bob", mid="b1")
    )
    bobs = rt.engine.db.scalar("SELECT id FROM messages WHERE author_id LIKE '%bob%'")
    srv.default = lambda body: (
        ToolCall("memory_delete", {"id": f"said:{bobs}"})
        if body["messages"][-1]["role"] == "user"
        else "I can't."
    )
    await rt.orchestrator.reply(group("telegram", "g1", "alice", f"forget the {STONE}", mid="a1"))
    assert f"I found a {STONE} ring!" in user_rows(rt)


# -- item 4: said again ------------------------------------------------------------------------------------------
FINCH = "Alice breeds zebrafinches"
FACT = {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [1]}


async def extract(rt, srv, message, answer: str) -> None:
    await rt.orchestrator.observe(message)
    rt.engine.clock.advance(31)
    srv.script(answer)
    await rt.background.tick()


def live(rt) -> list[str]:
    return sorted(m.content for m in rt.engine.memory_rows.listing(None, limit=100))


async def test_a_thanks_after_the_forget_does_not_bring_the_fact_back_but_saying_it_does(rt, srv):
    await extract(rt, srv, dm("telegram", "7", "I breed zebrafinches", mid="1"), facts(FACT))
    await rt.orchestrator.command(
        "forget", "zebrafinches", dm("telegram", "7", "/forget zebrafinches")
    )
    rt.engine.clock.advance(3600)
    # the model "remembers" anyway
    await extract(rt, srv, dm("telegram", "7", "thanks!", mid="2"), facts(FACT))
    assert live(rt) == [] and rt.engine.memories.tombstones.count() == 1
    await extract(
        rt, srv, dm("telegram", "7", "I do breed zebrafinches, in fact", mid="3"), facts(FACT)
    )
    assert live(rt) == [FINCH] and rt.engine.memories.tombstones.count() == 0


def _candidate(content: str, sources: tuple[str, ...]) -> NewMemory:
    provenance = Provenance(platform="discord", channel_id="g-general", sources=sources)
    return NewMemory(
        content=content,
        subject="hobby",
        scope=Scope.USER,
        scope_id="alice",
        source=Source.AUTO_EXTRACTION,
        provenance=provenance,
    )


def test_someone_elses_message_saying_it_does_not_lift_the_persons_forget(engine):
    said = say(engine, "I breed zebrafinches", author="alice", guild="g")
    forget_memory(engine, engine.memories.add(_candidate(FINCH, (said,))).memory.id)
    engine.clock.advance(60)
    bobs = say(engine, "Alice breeds zebrafinches, you know", author="bob", guild="g")
    assert unforgotten(engine, [_candidate(FINCH, (bobs,))]) == []
    own = say(engine, "I breed zebrafinches again", author="alice", guild="g")
    assert unforgotten(engine, [_candidate(FINCH, (own,))]) != []


# -- item 2 through the write paths ------------------------------------------------------------------------------
async def test_reworded_and_translated_the_forgotten_fact_is_not_extracted_or_stored_by_the_tool(
    rt, srv
):
    tortoise = {
        "speaker": "P1",
        "subject": "pet",
        "content": "Alice keeps a tortoise called Quintrell",
        "lines": [1],
    }
    await extract(
        rt, srv, dm("telegram", "7", "I keep a tortoise called Quintrell", mid="1"), facts(tortoise)
    )
    await rt.orchestrator.command(
        "forget",
        "tortoise called Quintrell",
        dm("telegram", "7", "/forget tortoise called Quintrell"),
    )
    reworded = [
        {"speaker": "P1", "subject": "pet", "content": text, "lines": [1]}
        for text in (
            "Alice owns a tortoise named Quintrell",
            "Quintrell is Alice's tortoise",
            "Alice hat eine Schildkröte namens Quintrell",
        )
    ]
    await extract(
        rt, srv, dm("telegram", "7", "my shell friend is doing well", mid="2"), facts(*reworded)
    )
    assert live(rt) == []
    store = ToolCall(
        "memory_store",
        {"type": "semantic", "subject": "pet", "content": "Quintrell is Alice's pet tortoise"},
    )
    srv.default = lambda body: store if body["messages"][-1]["role"] == "user" else "Noted."
    await rt.orchestrator.reply(dm("telegram", "7", "how is my pet?", mid="3"))
    assert live(rt) == []
    tool_answer = [m["content"] for m in srv.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_answer and tool_answer[0].startswith("Error: the person asked to forget this")

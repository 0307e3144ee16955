"""The conversation pipeline end to end: the real openai SDK against a local scripted server, a real store,
an injected clock. Asserts on what was stored and on what the model was shown."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.types import APOLOGY
from memory.clock import FakeClock
from tests.fakes import Delay, HTTPError, ToolCall
from tests.pg_support import ON_BOTH_ENGINES
from tests.pipeline_support import build_runtime, dm, facts, group, last_reply_prompt

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def rt(tmp_path, srv, runtime_store):
    runtime = build_runtime(
        tmp_path / "bot.db", srv, FakeClock(), owner_ids=["telegram:1"], **runtime_store
    )
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


async def tell(rt, srv, message, *, extracted: str | None = None, reply: str = "Noted!"):
    """One user turn, then the debounce passes and the extraction answer (if any) is stored."""
    srv.script(reply)
    result = await rt.orchestrator.reply(message)
    if extracted is not None:
        rt.engine.clock.advance(31)
        srv.script(extracted)
        await rt.background.tick()
    return result


def contents(rt) -> set[str]:
    return {r["content"] for r in rt.engine.db.rows("SELECT content FROM memories")}


async def test_a_fact_is_extracted_after_the_debounce_with_provenance(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "I work at Acme as a baker", mid="m1"))
    rt.engine.clock.advance(29)
    assert (await rt.background.tick())["extracted"] == 0  # not yet: the debounce is 30 s
    rt.engine.clock.advance(2)
    srv.script(
        facts({"about": "Alice", "subject": "job", "content": "Alice works at Acme as a baker"})
    )
    assert (await rt.background.tick())["extracted"] == 1
    row = rt.engine.db.one("SELECT * FROM memories")
    assert (
        row["scope"] == "user"
        and row["scope_id"] == "telegram:7"
        and row["visibility"] == "private"
    )
    source = rt.engine.db.scalar(
        "SELECT id FROM messages WHERE content = 'I work at Acme as a baker'"
    )
    assert json.loads(row["provenance"]) == {
        "platform": "telegram",
        "channel_id": "dm-7",
        "sources": [source],
    }
    # the extraction prompt
    assert "I work at Acme as a baker" in srv.chat_requests[-1]["messages"][1]["content"]
    assert srv.chat_requests[-1]["temperature"] == 0.0


def search_then_delete(rt, memory_id: str, seen_at_final_call: dict) -> object:
    """A scripted model that answers "forget that ... Acme" with memory_search, then memory_delete of the first hit."""

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "user":
            return ToolCall("memory_search", {"query": "Acme"})
        if "memory_search" in json.dumps(body["messages"][-2].get("tool_calls", "")):
            found = json.loads(last["content"])["results"]
            return ToolCall("memory_delete", {"id": found[0]["id"]})
        seen_at_final_call["rows"] = rt.engine.db.scalar(
            "SELECT COUNT(*) FROM memories WHERE id = ?", (memory_id,)
        )
        return "Done, I forgot that you work at Acme."

    return responder


@ON_BOTH_ENGINES
async def test_forget_that_deletes_before_the_reply_and_leaves_no_trace(rt, srv):
    await tell(
        rt,
        srv,
        dm("telegram", "7", "I work at Acme as a baker", mid="m1"),
        extracted=facts(
            {"about": "Alice", "subject": "job", "content": "Alice works at Acme as a baker"}
        ),
    )
    memory_id = rt.engine.db.scalar("SELECT id FROM memories")
    seen_at_final_call = {}
    srv.default = search_then_delete(rt, memory_id, seen_at_final_call)
    # not an ask the pipeline reads itself (no "forget ..."): the model finds the memory and deletes it
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "the Acme thing, please drop it from your memory", mid="m2")
    )
    assert seen_at_final_call["rows"] == 0  # deleted before the reply was built
    assert reply.forgotten == ("Alice works at Acme as a baker",) and "Acme" in reply.text
    srv.default = None
    srv.script("Hello again!")
    await rt.orchestrator.reply(dm("telegram", "7", "what do you know about my job?", mid="m3"))
    assert "acme" not in last_reply_prompt(srv).lower()
    assert "acme" not in json.dumps(rt.engine.db.rows("SELECT * FROM messages")).lower()
    assert "acme" not in json.dumps(rt.engine.db.rows("SELECT * FROM extraction_buffer")).lower()


@ON_BOTH_ENGINES
async def test_a_forget_asked_in_words_is_done_before_the_model_is_asked(rt, srv):
    """ORCH-9: a real 1.5B never called memory_delete for "forget my ..."; the pipeline does it as /forget would,
    and the model is told it is done (without the words), so its "done" is true."""
    await tell(
        rt,
        srv,
        dm("telegram", "7", "I work at Acme as a baker", mid="m1"),
        extracted=facts(
            {"about": "Alice", "subject": "job", "content": "Alice works at Acme as a baker"}
        ),
    )
    # not extracted yet
    await tell(rt, srv, dm("telegram", "7", "my race bib number is 4417", mid="m2"))
    seen = {}

    def responder(body):
        seen["rows"] = rt.engine.db.scalar("SELECT COUNT(*) FROM memories")
        seen["user"] = body["messages"][-1]["content"]
        return "Done, I've forgotten it."

    srv.default = responder
    reply = await rt.orchestrator.reply(
        # more than the asks: the model answers (a message of asks alone needs none)
        dm(
            "telegram",
            "7",
            "Forget that I work at Acme. And forget my race bib number. What bread should I bake?",
            mid="m3",
        )
    )
    assert seen["rows"] == 0 and "already forgotten" in seen["user"]
    assert set(reply.forgotten) == {"Alice works at Acme as a baker", "my race bib number is 4417"}
    assert reply.text == "Done, I've forgotten it."  # backed: no honest line
    stored = json.dumps(
        [rt.engine.db.rows(f"SELECT * FROM {t}") for t in ("messages", "extraction_buffer")]
    ).lower()
    assert "acme" not in stored and "4417" not in stored and "bib" not in stored


@ON_BOTH_ENGINES
async def test_a_forget_done_before_the_reply_is_told_even_when_the_model_does_not_say_so(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "my locker code is 5521", mid="m1"))
    srv.script(
        "I'm sorry, but I can't help with that."
    )  # a real 1.5B's answer to a forget already done
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "forget my locker code. Anyway, how are you?", mid="m2")
    )
    assert reply.text.endswith("(Done: what you asked me to forget is forgotten.)")
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE '%5521%'") == 0


async def test_a_message_that_only_asks_to_forget_is_answered_without_the_model(rt, srv):
    """A real 1.5B, told the forget was done, answered "I'm sorry, but I can't forget things that
    have already passed" beside the note that it was done: a message of asks alone needs no
    model."""
    await tell(rt, srv, dm("telegram", "7", "my locker code is 5521", mid="m1"))
    asked = len(srv.chat_requests)
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Please forget my locker code, thanks!", mid="m2")
    )
    assert reply.text == "Done: I've forgotten that." and len(srv.chat_requests) == asked
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE '%5521%'") == 0
    # nothing matched: the model may still find it under other words
    srv.script("There is no passport number in my notes.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "forget my passport number", mid="m3"))
    assert (
        reply.text == "There is no passport number in my notes."
        and len(srv.chat_requests) == asked + 1
    )


@ON_BOTH_ENGINES
async def test_a_forget_in_words_that_matches_nothing_deletes_nothing_and_says_so(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "I keep bees on the roof", mid="m1"))
    seen = {}

    def responder(body):
        seen["user"] = body["messages"][-1]["content"]
        return "Done, I've forgotten it."

    srv.default = responder
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "please forget my passport number", mid="m2")
    )
    assert "nothing stored matched" in seen["user"] and reply.forgotten == ()
    assert "nothing was forgotten" in reply.text  # the model's claim is not backed
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE '%bees%'") == 1


async def test_a_forget_in_words_in_a_group_touches_only_the_askers_own(rt, srv):
    """Bob in a group asks to forget Alice's address, then "my address" (he never gave one): Alice keeps hers,
    memory and message; a thousand asks in one message are three forgets."""
    alice = group("telegram", "G", "7", "my address is 12 Elm Street", mid="g1")
    await tell(
        rt,
        srv,
        alice,
        extracted=facts(
            {"about": "Alice", "subject": "address", "content": "Alice lives at 12 Elm Street"}
        ),
    )
    for text in ("Forget Alice's address", "forget my address", "forget my address. " * 1000):
        srv.script("Done!")
        reply = await rt.orchestrator.reply(group("telegram", "G", "8", text, name="Bob"))
        # at most Bob's own earlier asks, which say "address"
        assert "Elm" not in " ".join(reply.forgotten)
    assert contents(rt) == {"Alice lives at 12 Elm Street"}
    assert (
        rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE '%Elm Street%'") == 1
    )


@pytest.mark.parametrize(
    "where,visible",
    [
        ("guild-a", {"guild A lore", "Alice said in A"}),
        (
            "guild-b",
            set(),
        ),  # what Alice said in A stays in A (SEC-1), and her portable and DM facts too
        ("alice-dm", {"Alice public fact", "Alice private fact", "Alice said in A"}),
        ("owner-dm", {"owner secret plan", "owner public fact"}),
        ("owner-in-guild-a", {"guild A lore"}),
    ],
)
@ON_BOTH_ENGINES
async def test_no_memory_reaches_a_prompt_it_must_not(rt, srv, where, visible):
    from memory.models import NewMemory, Scope, Visibility

    add = rt.engine.memories.add
    add(NewMemory(content="guild A lore", subject="lore", scope=Scope.GUILD, scope_id="telegram:A"))
    add(
        NewMemory(content="Alice public fact", subject="a", scope=Scope.USER, scope_id="telegram:7")
    )
    add(
        NewMemory(
            content="Alice said in A",
            subject="e",
            scope=Scope.USER,
            scope_id="telegram:7",
            guild_id="telegram:A",
        )
    )
    add(
        NewMemory(
            content="Alice private fact",
            subject="b",
            scope=Scope.USER,
            scope_id="telegram:7",
            visibility=Visibility.PRIVATE,
        )
    )
    add(
        NewMemory(
            content="owner secret plan", subject="c", scope=Scope.OWNER, scope_id="telegram:1"
        )
    )
    add(
        NewMemory(content="owner public fact", subject="d", scope=Scope.USER, scope_id="telegram:1")
    )
    message = {
        "guild-a": group("telegram", "A", "7", "tell me about lore fact plan"),
        "guild-b": group("telegram", "B", "7", "tell me about lore fact plan"),
        "alice-dm": dm("telegram", "7", "tell me about lore fact plan"),
        "owner-dm": dm("telegram", "1", "tell me about lore fact plan", name="Olga"),
        "owner-in-guild-a": group(
            "telegram", "A", "1", "tell me about lore fact plan", name="Olga"
        ),
    }[where]
    srv.script("ok")
    await rt.orchestrator.reply(message)
    prompt = last_reply_prompt(srv)
    everything = {
        "guild A lore",
        "Alice public fact",
        "Alice said in A",
        "Alice private fact",
        "owner secret plan",
        "owner public fact",
    }
    assert {fact for fact in everything if fact in prompt} == visible


async def test_a_message_buffered_before_a_crash_is_extracted_after_restart(tmp_path, srv):
    clock = FakeClock()
    first = build_runtime(tmp_path / "bot.db", srv, clock)
    srv.script("Cool!")
    await first.orchestrator.reply(dm("telegram", "7", "My cat is called Miso", mid="m1"))
    first.runner.shutdown()
    first.engine.db.close()  # the process dies: no flush, no graceful stop
    second = build_runtime(tmp_path / "bot.db", srv, clock)
    clock.advance(60)
    srv.script(
        facts({"about": "Alice", "subject": "cat", "content": "Alice has a cat called Miso"})
    )
    assert (await second.background.tick())["extracted"] == 1
    assert "Alice has a cat called Miso" in contents(second)
    await second.stop()


async def test_llm_failures_retry_then_apologise_and_lose_nothing(rt, srv):
    srv.script(HTTPError(500), HTTPError(502), "Recovered after two failures")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "first message"))
    assert reply.text == "Recovered after two failures" and not reply.failed
    srv.script(HTTPError(500), HTTPError(500), HTTPError(503))
    reply = await rt.orchestrator.reply(dm("telegram", "7", "second message"))
    assert reply.failed and reply.text == APOLOGY
    stored = {
        r["content"] for r in rt.engine.db.rows("SELECT content FROM messages WHERE role = 'user'")
    }
    assert stored == {"first message", "second message"}
    assert rt.background.buffer.pending() == 2


async def test_a_model_that_hangs_past_the_timeout_gets_the_apology_and_loses_nothing(
    tmp_path, srv
):
    # the answer comes in 3 s
    rt = build_runtime(tmp_path / "hang.db", srv, FakeClock(), llm_timeout_s=0.5)
    await rt.start(background_loop=False)
    try:
        srv.script(Delay(3, then="too late"), Delay(3, then="too late"), Delay(3, then="too late"))
        reply = await rt.orchestrator.reply(dm("telegram", "7", "third message"))
        assert reply.failed
        assert [
            r["content"]
            for r in rt.engine.db.rows("SELECT content FROM messages WHERE role = 'user'")
        ] == ["third message"]
        assert rt.background.buffer.pending() == 1
    finally:
        await rt.stop()


async def test_malformed_tool_arguments_reach_the_model_as_an_error(rt, srv):
    srv.script(
        ToolCall("memory_store", '{"type": "semantic", "subject": '), "Sorry, let me just reply."
    )
    reply = await rt.orchestrator.reply(dm("telegram", "7", "remember that I like tea"))
    assert reply.text == "Sorry, let me just reply."
    tool_result = srv.chat_requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"].startswith(
        "Error: the arguments are not valid JSON"
    )
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM memories") == 0


async def test_an_invalid_extraction_answer_is_retried_later_not_dropped(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "I am learning Icelandic"))
    rt.engine.clock.advance(31)
    srv.script("not json at all")
    assert (await rt.background.tick())["extracted"] == 0
    assert rt.background.buffer.pending() == 1  # kept, due again after a backoff
    rt.engine.clock.advance(61)
    srv.script('[{"content": "Alice is learning Icelandic", "speaker": "P1"}]')
    assert (await rt.background.tick())["extracted"] == 1


async def test_a_batch_that_keeps_failing_is_parked_in_dead_letters_and_can_be_retried(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "I also play chess"))
    rt.engine.clock.advance(31)
    for attempt in range(5):
        srv.script("{broken")
        assert (await rt.background.tick())["extracted"] == 0
        rt.engine.clock.advance(60 * 2**attempt + 1)
    assert rt.background.buffer.pending() == 0 and len(rt.background.buffer.dead()) == 1
    assert (
        rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content = 'I also play chess'")
        == 1
    )
    assert rt.background.buffer.retry_dead() == 1
    srv.script('[{"content": "Alice plays chess", "speaker": "P1"}]')
    assert (await rt.background.tick())["extracted"] == 1 and rt.background.buffer.dead() == []


async def test_extraction_waits_while_the_model_is_down(rt, srv):
    await tell(rt, srv, dm("telegram", "7", "I moved to Oslo"))
    rt.engine.clock.advance(31)
    srv.script(HTTPError(500), HTTPError(500), HTTPError(500))
    assert (await rt.background.tick())["extracted"] == 0
    assert rt.background.buffer.pending() == 1
    rt.engine.clock.advance(61)
    srv.script(facts({"about": "Alice", "subject": "home", "content": "Alice lives in Oslo"}))
    assert (await rt.background.tick())["extracted"] == 1


async def test_fifty_conversations_at_once_store_every_message(rt, srv):
    srv.default = lambda body: "hi " + body["messages"][-1]["content"][-8:]
    replies = await asyncio.gather(
        *(
            rt.orchestrator.reply(
                dm("console" if i % 2 else "telegram", str(100 + i), f"message number {i}")
            )
            for i in range(50)
        )
    )
    assert all(not r.failed for r in replies)
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE role = 'user'") == 50
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE role = 'assistant'") == 50
    assert rt.background.buffer.pending() == 50


async def test_session_end_reflection_persists_a_summary_for_the_same_guild(rt, srv):
    await tell(rt, srv, group("discord", "G", "7", "We decided to ship the beta on Friday"))
    rt.engine.clock.advance(31)
    srv.script("[]")
    await rt.background.tick()
    rt.engine.clock.advance(600)
    srv.script(json.dumps({"facts": [], "summary": "The team agreed to ship the beta on Friday."}))
    assert (await rt.background.tick())["reflected"] == 0
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 1
    assert rt.engine.db.scalar("SELECT status FROM reflections") == "done"
    srv.script("ok")
    await rt.orchestrator.reply(
        group("discord", "G", "8", "what did we decide?", name="Bob", channel="other")
    )
    assert "ship the beta on Friday" in last_reply_prompt(srv)
    srv.script("ok")
    await rt.orchestrator.reply(group("discord", "H", "8", "what did we decide?", name="Bob"))
    assert "ship the beta" not in last_reply_prompt(srv)
    rt.engine.clock.advance(1801)
    srv.script("ok")
    await rt.orchestrator.reply(group("discord", "G", "8", "and now?", name="Bob", channel="other"))
    assert "ship the beta on Friday" not in srv.chat_requests[-1]["messages"][0]["content"]


async def test_long_conversations_are_flushed_then_compacted_into_a_rolling_summary(rt, srv):
    for i in range(61):
        await rt.orchestrator.observe(
            group("discord", "G", "7", f"chatter line {i} about the garden")
        )
        rt.engine.clock.advance(1)
    srv.script(
        facts(
            {"about": "Alice", "subject": "garden", "content": "Alice talks a lot about her garden"}
        ),
        "Alice chatted at length about her garden.",
    )
    assert (await rt.background.tick())["compacted"] == 1
    flush, summary = srv.chat_requests[-2:]
    # WRITE-4: extraction first
    assert "chatter line 0 about the garden" in flush["messages"][1]["content"]
    assert "chatter line 0 about the garden" in summary["messages"][0]["content"]
    # the newest turns stay verbatim
    assert "chatter line 60" not in summary["messages"][0]["content"]
    assert "Alice talks a lot about her garden" in contents(rt)
    srv.script("ok")
    await rt.orchestrator.reply(group("discord", "G", "7", "what were we saying?"))
    prompt = last_reply_prompt(srv)
    assert "Alice chatted at length about her garden." in prompt
    assert "chatter line 0 about" not in prompt and "chatter line 60 about" in prompt


async def test_forgetting_drops_summaries_of_the_chat_it_came_from_and_of_the_chat_that_asked(
    rt, srv
):

    await tell(
        rt,
        srv,
        dm("telegram", "7", "I work at Acme as a baker", mid="m1"),
        extracted=facts(
            {"about": "Alice", "subject": "job", "content": "Alice works at Acme as a baker"}
        ),
    )
    assert (await rt.orchestrator.command("link", "", dm("telegram", "7", "/link"))).startswith(
        "Your link code is"
    )
    code = rt.engine.db.scalar("SELECT code FROM link_codes")
    await rt.orchestrator.command("link", code, dm("discord", "70", f"/link {code}"))
    summaries, channels = rt.engine.summaries, rt.engine.channels
    summaries.add(
        platform="telegram",
        guild_id=None,
        channel_id="dm-7",
        participants=["telegram:7"],
        text="Alice talked about baking at Acme.",
    )
    summaries.add(
        platform="telegram",
        guild_id=None,
        channel_id="dm-8",
        participants=["telegram:8"],
        text="Bob talked about Acme shares.",
    )
    await tell(rt, srv, dm("discord", "70", "hi again"))
    channels.set_summary("discord:dm-70", "Earlier Alice mentioned her Acme job.", 0.0)
    srv.script("ok")
    await rt.orchestrator.reply(dm("telegram", "7", "what do you know about my job?"))
    # the summary is shown before forgetting
    assert "Alice talked about baking at Acme." in last_reply_prompt(srv)

    srv.default = search_then_delete(rt, rt.engine.db.scalar("SELECT id FROM memories"), {})
    await rt.orchestrator.reply(dm("discord", "70", "forget that I work at Acme"))
    srv.default = None
    for where in (
        dm("telegram", "7", "what about my job?"),
        dm("discord", "70", "what about my job?"),
    ):
        srv.script("I don't know.")
        await rt.orchestrator.reply(where)
        assert "acme" not in last_reply_prompt(srv).lower()
    # another chat's stays
    assert (
        rt.engine.db.scalar("SELECT text FROM session_summaries") == "Bob talked about Acme shares."
    )


@ON_BOTH_ENGINES
async def test_forgetting_removes_source_messages_only_from_their_own_chat(rt, srv):
    await tell(
        rt,
        srv,
        dm("telegram", "7", "I work at Acme as a baker", mid="1"),
        extracted=facts(
            {"about": "Alice", "subject": "job", "content": "Alice works at Acme as a baker"}
        ),
    )
    # same message id, another chat
    await tell(rt, srv, dm("telegram", "8", "I like sailing", name="Bob", mid="1"))
    answer = await rt.orchestrator.command(
        "forget", "my job at Acme", dm("telegram", "7", "/forget my job at Acme")
    )
    assert answer.startswith("Forgotten: Alice works at Acme")
    remaining = {r["content"] for r in rt.engine.db.rows("SELECT content FROM messages")}
    assert "I work at Acme as a baker" not in remaining and "I like sailing" in remaining

"""ORCH-9 at the LLM edge: what real small models send, through the real openai SDK, the fake model server
answering as they do, and a real store. Tool calls written as text are run and never shown or stored; a
server that refuses tools or response_format is asked without them once; every call has max_tokens; a
turn's deadline closes the server's request; /quit does not wait on a slow model."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from bot.model.client import ChatClient, TurnTimeout
from bot.types import APOLOGY
from memory.clock import FakeClock
from tests.fakes import HTTPError, ToolCall
from tests.fakes.openai_server import LLAMA_CPP_NO_JINJA, Endless, Hang, written_call
from tests.pipeline_support import build_runtime, dm, facts

pytestmark = pytest.mark.asyncio
FORMS = ("bare", "parameters", "fence", "hermes", "llama", "mistral", "function")
STORE = {"content": "Alice has a grey cat called Biscuit", "subject": "cat", "type": "semantic"}


@pytest.fixture
async def rt(tmp_path, srv):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


class Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def memories(rt) -> list[str]:
    return [r["content"] for r in rt.engine.db.rows("SELECT content FROM memories")]


def history(rt) -> list[str]:
    return [r["content"] for r in rt.engine.db.rows("SELECT content FROM messages ORDER BY rowid")]


def no_call_text(text: str) -> bool:
    return not any(
        mark in text
        for mark in (
            "memory_store",
            "{",
            "```",
            "<tool_call>",
            "python_tag",
            "TOOL_CALLS",
            "<function",
        )
    )


# -- tool calls written as text --------------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tool_call_written_as_text_is_run_and_never_shown_or_stored(
    rt, srv, form, streamed
):
    srv.script(written_call("memory_store", STORE, form), "Biscuit is a lovely name.")
    sink = Sink() if streamed else None
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "I have a grey cat called Biscuit", mid="1"), sink
    )
    assert reply.text == "Biscuit is a lovely name." and not reply.failed
    assert memories(rt) == ["Alice has a grey cat called Biscuit"]  # the call ran, as a tool call
    assert history(rt) == ["I have a grey cat called Biscuit", "Biscuit is a lovely name."]
    if sink is not None:
        assert sink.text == "Biscuit is a lovely name."  # nothing of the call reached the person
    # the result went back in a user message, which every server takes (llama.cpp without --jinja too)
    fed_back = srv.chat_requests[1]["messages"][-1]
    assert (
        fed_back["role"] == "user"
        and "memory_store" in fed_back["content"]
        and '"stored"' in fed_back["content"]
    )
    assert all(m["role"] != "tool" for m in srv.chat_requests[1]["messages"])


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_empty_braces_a_real_model_wrote_beside_its_call_are_never_shown(
    rt, srv, streamed
):
    """The real 1.5B answered "{}" and a written call; the person saw "{}I saved it."."""
    srv.script("{}" + written_call("memory_store", STORE), "I saved it.")
    sink = Sink() if streamed else None
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "I have a grey cat called Biscuit"), sink
    )
    assert reply.text == "I saved it." and memories(rt) == ["Alice has a grey cat called Biscuit"]
    assert history(rt)[-1] == "I saved it." and (sink is None or sink.text == "I saved it.")


async def test_several_hermes_blocks_in_one_answer_all_run_and_the_prose_around_them_is_kept(
    rt, srv
):
    second = {
        "content": "Alice is training for a half marathon",
        "subject": "running",
        "type": "semantic",
    }
    answer = f"Let me note both.\n{written_call('memory_store', STORE, 'hermes')}\n{written_call('memory_store', second, 'hermes')}"
    srv.script(answer, "Both noted: Biscuit and the half marathon.")
    sink = Sink()
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "My cat is Biscuit and I run half marathons"), sink
    )
    assert sorted(memories(rt)) == [
        "Alice has a grey cat called Biscuit",
        "Alice is training for a half marathon",
    ]
    assert reply.text == "Both noted: Biscuit and the half marathon."
    assert sink.text == "Let me note both.\nBoth noted: Biscuit and the half marathon."
    assert no_call_text(sink.text) and all(no_call_text(t) for t in history(rt))


async def test_a_written_call_to_a_tool_not_offered_is_not_run_and_ordinary_json_is_shown(rt, srv):
    asked = 'Here it is: {"name": "Alice", "age": 30}'
    srv.script(asked)
    sink = Sink()
    reply = await rt.orchestrator.reply(dm("telegram", "7", "write my details as JSON"), sink)
    # data, not a call: shown whole (held back only briefly)
    assert reply.text == asked and sink.text == asked
    srv.script(written_call("set_reminder", {"when": "9am"}, "hermes"), "I can't set reminders.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "remind me at 9"))
    assert "set_reminder" not in reply.text and memories(rt) == []


@pytest.mark.parametrize(
    "cut",
    [
        '<tool_call>\n{"name": "memory_store", "arguments": {"content": "Alice has a gr',
        # a real 0.5B's, run on until max_tokens
        '{"name": "memory_store", "arguments": {"name": "Biscuit is a cat. I know about myself',
        '{"function": {"name": "memory_store", "arguments": {"content": "Alice',
    ],
)
async def test_a_written_call_cut_short_by_max_tokens_is_hidden_and_not_run(rt, srv, cut):
    srv.script(f"Sure. {cut}")
    sink = Sink()
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I have a cat"), sink)
    assert reply.text == sink.text == "Sure." and memories(rt) == []


async def test_the_model_never_sees_a_written_call_in_a_later_turns_history(rt, srv):
    srv.script(written_call("memory_store", STORE, "fence"), "Lovely!", "Hello again.")
    await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    await rt.orchestrator.reply(dm("telegram", "7", "how are you?"))
    later = json.dumps([m for m in srv.chat_requests[-1]["messages"] if m["role"] != "system"])
    assert "memory_store" not in later and "```" not in later and "Lovely!" in later


# -- claims no tool backs ------------------------------------------------------------------------------------
async def test_a_forget_claim_without_a_delete_gets_an_honest_line_and_the_fact_is_still_there(
    rt, srv
):
    srv.script(ToolCall("memory_store", STORE), "Noted!")
    await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    srv.script("Done, I've forgotten it.")
    sink = Sink()
    # not an ask the pipeline does itself ("forget my cat" would be: see tests/test_pipeline.py)
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "the cat thing, drop it from your memory"), sink
    )
    assert (
        reply.text.startswith("Done, I've forgotten it.") and "nothing was forgotten" in reply.text
    )
    assert "/forget" in sink.text and memories(rt) == ["Alice has a grey cat called Biscuit"]
    assert "nothing was forgotten" in history(rt)[-1]  # the stored reply says it too


async def test_a_reminder_claim_gets_an_honest_line_and_a_backed_forget_does_not(rt, srv):
    srv.script("Reminder set for 9am!")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "at 9 I must call mum, ok?"))
    # bot.reminders.claims
    assert "I haven't set a reminder" in reply.text and "Reminder set" not in reply.text
    srv.script(ToolCall("memory_store", STORE), "Saved.")
    await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    (memory_id,) = [r["id"] for r in rt.engine.db.rows("SELECT id FROM memories")]
    srv.script(
        ToolCall("memory_search", {"query": "cat Biscuit"}),
        ToolCall("memory_delete", {"id": memory_id}),
        "I've forgotten it.",
    )
    # asked so that only the model's tools forget ("forget my cat" is done without the model)
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Can you get rid of what you know about Biscuit?")
    )
    assert reply.text == "I've forgotten it." and memories(rt) == []


async def test_ordinary_chat_and_a_remembered_persons_noted_get_no_extra_line(rt, srv):
    for text in (
        "I remember you said you like tea.",
        "Don't forget your keys!",
        "Noted, good luck with the race!",
    ):
        srv.script(text)
        assert (await rt.orchestrator.reply(dm("telegram", "7", "hi"))).text == text


async def test_noted_when_remembering_is_off_gets_an_honest_line(rt, srv):
    await rt.orchestrator.command("privacy", "off", dm("telegram", "7", "/privacy off"))
    srv.script("Noted, I'll remember that.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat"))
    assert "Remembering is off here" in reply.text


# -- a server that refuses tools -----------------------------------------------------------------------------
async def test_a_500_tools_refusal_switches_tools_off_once_with_one_line_quoting_the_server(
    rt, srv, caplog
):
    srv.refuse_tools = LLAMA_CPP_NO_JINJA
    srv.script("Hi Alice!", "Hello again.")
    with caplog.at_level(logging.WARNING):
        first = await rt.orchestrator.reply(dm("telegram", "7", "hello"))
        second = await rt.orchestrator.reply(dm("telegram", "7", "hello again"))
    assert (first.text, second.text) == ("Hi Alice!", "Hello again.") and not first.failed
    bodies = srv.chat_requests
    assert (
        len(bodies) == 3
        and "tools" in bodies[0]
        and "tools" not in bodies[1]
        and "tools" not in bodies[2]
    )
    lines = [r.getMessage() for r in caplog.records if "refuses tools" in r.getMessage()]
    assert len(lines) == 1 and LLAMA_CPP_NO_JINJA in lines[0] and "HTTP 500" in lines[0]
    # not retried as a failure
    assert not [r for r in caplog.records if "attempt" in r.getMessage()]


@pytest.mark.parametrize(
    "status,words",
    [(422, "tool_choice is not supported"), (501, "this model does not support tools")],
)
async def test_other_statuses_that_say_tools_are_unsupported_switch_tools_off(
    rt, srv, status, words
):
    srv.refuse_tools, srv.refusal_status = words, status
    srv.script("Hi!")
    assert (await rt.orchestrator.reply(dm("telegram", "7", "hello"))).text == "Hi!"
    assert rt.orchestrator.llm.tools_off and len(srv.chat_requests) == 2


async def test_a_genuine_500_is_still_retried_and_tools_stay_on(rt, srv):
    overloaded = {
        "error": {
            "code": 500,
            "message": "the server is overloaded, try later",
            "type": "server_error",
        }
    }
    srv.script(HTTPError(500, overloaded), HTTPError(500, overloaded), "Made it.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "hello"))
    assert reply.text == "Made it." and not rt.orchestrator.llm.tools_off
    assert len(srv.chat_requests) == 3 and all("tools" in body for body in srv.chat_requests)


async def test_a_written_call_still_runs_when_the_server_refuses_structured_tools(rt, srv):
    srv.refuse_tools = LLAMA_CPP_NO_JINJA
    srv.script(written_call("memory_store", STORE, "hermes"), "Lovely cat.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    assert reply.text == "Lovely cat." and memories(rt) == ["Alice has a grey cat called Biscuit"]


# -- max_tokens and structured extraction ----------------------------------------------------------------------
async def test_every_model_call_carries_max_tokens_and_extraction_asks_for_a_json_schema(rt, srv):
    srv.script("Nice!")
    await rt.orchestrator.reply(dm("telegram", "7", "I work at Acme as a baker"))
    rt.engine.clock.advance(31)
    srv.script(
        json.dumps(
            {
                "facts": [
                    {"speaker": "P1", "subject": "job", "content": "Alice works at Acme as a baker"}
                ]
            }
        )
    )
    assert (await rt.background.tick())["extracted"] == 1
    reply_call, extraction_call = srv.chat_requests
    assert reply_call["max_tokens"] == 1024 and extraction_call["max_tokens"] == 2048
    schema = extraction_call["response_format"]["json_schema"]["schema"]
    assert (
        extraction_call["response_format"]["type"] == "json_schema"
        and "facts" in schema["properties"]
    )


async def test_a_server_that_refuses_response_format_is_asked_plainly_once_and_remembered(
    rt, srv, caplog
):
    srv.refuse_response_format, srv.refusal_status = (
        "response_format json_schema is not supported",
        400,
    )
    with caplog.at_level(logging.WARNING):
        for n, line in enumerate(("I work at Acme", "I live in Oslo")):
            srv.script("Nice!")
            await rt.orchestrator.reply(dm("telegram", "7", line, mid=str(n)))
            rt.engine.clock.advance(31)
            srv.script(facts({"speaker": "P1", "subject": "x", "content": f"Alice says: {line}"}))
            assert (await rt.background.tick())["extracted"] == 1
    formats = ["response_format" in body for body in srv.chat_requests]
    # reply, refused, plain; then plain from the start
    assert formats == [
        False,
        True,
        False,
        False,
        False,
    ]
    assert len([r for r in caplog.records if "refuses response_format" in r.getMessage()]) == 1


async def test_extraction_keeps_the_complete_facts_of_an_answer_cut_short_and_logs_the_drop(
    rt, srv, caplog
):
    srv.script("Nice!")
    await rt.orchestrator.reply(dm("telegram", "7", "I work at Acme and I live in Oslo"))
    rt.engine.clock.advance(31)
    whole = '{"speaker": "P1", "subject": "job", "content": "Alice works at Acme",}'
    srv.script(
        f'Here are the facts:\n```json\n[{whole}, {{"speaker": "P1", "subject": "home", "content": "Alice li'
    )
    with caplog.at_level(logging.INFO):
        assert (await rt.background.tick())["extracted"] == 1
    assert memories(rt) == ["Alice works at Acme"]
    assert any(
        "1 items kept, dropped 1 incomplete or invalid JSON" in r.getMessage()
        for r in caplog.records
    )


# -- deadlines, cancellation, a quick quit ---------------------------------------------------------------------
async def test_the_turn_deadline_closes_a_stream_that_never_stops(srv):
    srv.script(Endless())
    client = ChatClient(
        srv.base_url,
        "test-key",
        "fake-model",
        max_retries=2,
        backoff_s=0.0,
        timeout=60,
        turn_deadline_s=0.3,
    )
    sink = Sink()
    try:
        with pytest.raises(TurnTimeout):
            await client.run([{"role": "user", "content": "hi"}], None, sink)
        # the server's slot is free again
        await srv.wait_until(lambda: srv.closed_by_client == ["stream"])
    finally:
        await client.aclose()
    assert len(srv.chat_requests) == 1 and sink.text.startswith("and so on")


async def test_a_turn_past_its_deadline_closes_the_request_apologises_and_keeps_the_message(
    tmp_path, srv
):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), turn_deadline_s=0.3)
    await runtime.start(background_loop=False)
    try:
        srv.script(Hang())
        reply = await runtime.orchestrator.reply(
            dm("telegram", "7", "I have a grey cat called Biscuit")
        )
        assert reply.failed and reply.text == APOLOGY
        await srv.wait_until(lambda: srv.closed_by_client == ["request"])
        # kept, and buffered for extraction
        assert history(runtime) == ["I have a grey cat called Biscuit"]
        assert runtime.background.buffer.pending() == 1
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()


async def test_stop_does_not_wait_on_a_slow_extraction_and_the_turns_wait_for_the_next_start(
    tmp_path, srv
):
    db = tmp_path / "bot.db"
    runtime = build_runtime(db, srv, FakeClock(), shutdown_flush_s=0.2)
    await runtime.start(background_loop=False)
    srv.script("Nice!")
    await runtime.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    srv.script(Hang())  # the extraction model never answers
    async with asyncio.timeout(
        30
    ):  # a bound for a broken build, not a speed check: stop returns at its budget
        await runtime.stop()
    # the request was closed, not left running
    await srv.wait_until(lambda: srv.closed_by_client == ["request"])
    again = build_runtime(db, srv, FakeClock())
    await again.start(background_loop=False)
    try:
        assert again.background.buffer.pending() == 1
        srv.script(
            facts(
                {
                    "speaker": "P1",
                    "subject": "cat",
                    "content": "Alice has a grey cat called Biscuit",
                }
            )
        )
        await again.background.flush()
        assert memories(again) == ["Alice has a grey cat called Biscuit"]
    finally:
        srv.default = lambda body: "[]"
        await again.stop()


async def test_the_blocking_completer_of_maintenance_commands_sends_max_tokens(srv):
    from bot.composition import build_completer
    from bot.config import load_settings

    completer = build_completer(
        load_settings(llm_base_url=srv.base_url, llm_api_key="test-key", job_max_tokens=333)
    )
    srv.script("[]")
    assert await asyncio.to_thread(completer, "You extract memories.", "nothing here") == "[]"
    assert srv.chat_requests[-1]["max_tokens"] == 333


async def test_a_model_that_writes_the_same_call_again_is_asked_once_more_in_words_without_tools(
    rt, srv
):
    call = written_call("memory_store", STORE, "hermes")
    srv.script(call, call, "Biscuit is a lovely name.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I have a grey cat called Biscuit"))
    assert reply.text == "Biscuit is a lovely name." and memories(rt) == [
        "Alice has a grey cat called Biscuit"
    ]
    # not run twice, and not a loop of six
    assert len(srv.chat_requests) == 3 and "tools" not in srv.chat_requests[2]
    assert "already made" in srv.chat_requests[2]["messages"][-1]["content"]


async def test_one_line_says_how_many_learned_facts_were_not_stored_and_why(rt, srv, caplog):
    srv.script("Nice!")
    await rt.orchestrator.reply(
        dm("telegram", "7", "I work at Acme; my card is 4111 1111 1111 1111")
    )
    rt.engine.clock.advance(31)
    job = {"speaker": "P1", "subject": "job", "content": "Alice works at Acme"}
    card = {
        "speaker": "P1",
        "subject": "card",
        "content": "Alice's card number is 4111 1111 1111 1111",
    }
    srv.script(json.dumps([job, job, card, "Alice likes tea"]))
    with caplog.at_level(logging.INFO):
        assert (await rt.background.tick())["extracted"] == 1
    said = [r.getMessage() for r in caplog.records]
    assert any("dropped 1 not an object" in line for line in said)
    assert any(
        line.startswith("learned facts: 1 stored of 3; not stored: 1 duplicate, 1 refused")
        for line in said
    ), said


async def test_a_local_server_gets_the_cpu_model_timeouts_in_the_built_runtime(tmp_path, srv):
    from bot.composition import build_runtime as compose
    from bot.config import load_settings

    settings = load_settings(
        db_path=tmp_path / "bot.db",
        llm_base_url=srv.base_url,
        embeddings="none",
        scheduler_enabled=False,
    )
    # the fake listens on 127.0.0.1: a local server
    runtime = compose(settings, clock=FakeClock(), embedder=None)
    try:
        llm = runtime.orchestrator.llm
        assert (llm.timeout_s, llm.turn_deadline_s, llm.max_tokens) == (300.0, 600.0, 1024)
    finally:
        await runtime.stop()

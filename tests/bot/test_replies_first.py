"""Issue 45: a person's reply never waits behind background work on the same local model. The
real runtime against the fake server (on 127.0.0.1: a local server, as COMPANION_LOCAL_MODEL's).

An extraction holding the model's one slot is cancelled when a reply comes (its request closed: the
server's slot is the reply's), and asked again once the reply is done: the fact is filed all the
same, and the claim on the job is taken and released as ever."""

from __future__ import annotations

import asyncio

from bot.composition import model_gate
from bot.config import load_settings
from memory.clock import FakeClock
from tests.fakes.openai_server import Hang
from tests.pipeline_support import build_runtime, dm, facts

CAT = {"speaker": "P1", "subject": "cat", "content": "Alice has a grey cat called Biscuit"}


def memories(rt) -> list[str]:
    return [r["content"] for r in rt.engine.db.rows("SELECT content FROM memories")]


async def test_a_reply_goes_before_the_extraction_that_holds_the_model(tmp_path, srv):
    rt = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await rt.start(background_loop=False)
    try:
        srv.script("Nice!")
        await rt.orchestrator.reply(
            dm("telegram", "7", "I have a grey cat called Biscuit", mid="1")
        )
        srv.script(Hang())  # the extraction: a CPU model writing for minutes
        extracting = asyncio.create_task(rt.background.flush())
        await srv.wait_for_requests(2)
        assert "tools" not in srv.chat_requests[1]  # the extraction holds the model

        srv.script("Hello again!", facts(CAT))
        async with asyncio.timeout(30):  # a bound for a broken build, not a speed check
            reply = await rt.orchestrator.reply(dm("telegram", "7", "how are you?", mid="2"))
        assert reply.text == "Hello again!"
        # the extraction's request was closed before the reply's was answered
        assert srv.closed_by_client == ["request"]
        await extracting
        asked = ["tools" in body for body in srv.chat_requests]
        assert asked == [True, False, True, False]  # reply, extraction, reply, extraction again
        assert memories(rt) == ["Alice has a grey cat called Biscuit"]
        assert rt.engine.db.scalar("SELECT COUNT(*) FROM job_claims") == 0
        # what was said meanwhile waits for the next extraction
        buffered = rt.engine.db.rows("SELECT text FROM extraction_buffer")
        assert [r["text"] for r in buffered] == ["how are you?"]
    finally:
        srv.default = lambda body: "[]"
        await rt.stop()


def test_only_a_local_server_shared_by_replies_and_jobs_gets_a_gate():
    local = "http://127.0.0.1:8080/v1"
    assert model_gate(load_settings(llm_base_url=local)) is not None
    assert model_gate(load_settings(llm_base_url="https://api.openai.com/v1")) is None
    apart = load_settings(llm_base_url=local, extraction_base_url="http://127.0.0.1:9090/v1")
    assert model_gate(apart) is None

"""ORCH-9: a prompt built for the servers' prompt caches, and the cached share they report read back.

The system prompt starts with what never changes in a conversation (persona, rules); the memory sections and
the day follow; the minute comes last, in the user turn. Two turns an hour apart, with a memory stored in
between, share the system prompt's start byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from conftest import remember

from bot.model.client import ChatClient
from bot.spending.usage import Usage, usage_of
from memory.clock import FakeClock
from tests.fakes import FakeOpenAI
from tests.fakes.openai_server import HTTPError, RawAnswer, RawStream
from tests.pipeline_support import build_runtime, dm


@pytest.fixture
async def srv():
    async with FakeOpenAI() as server:
        yield server


async def test_the_system_prompt_starts_the_same_across_turns_an_hour_apart_with_different_memories(
    srv, tmp_path
):
    clock = FakeClock(1_795_730_000.0)  # 2026-11-26 21:53 UTC
    rt = build_runtime(tmp_path / "bot.db", srv, clock)
    await rt.start(background_loop=False)
    try:
        srv.script("Hello!")
        await rt.orchestrator.reply(dm("discord", "ada", "hi there", name="Ada"))
        clock.advance(61)
        srv.script("Nice.")
        await rt.orchestrator.reply(dm("discord", "ada", "I keep bees on my roof", name="Ada"))
        turn = rt.orchestrator.resolve(dm("discord", "ada", "x", name="Ada"))
        await rt.runner.run(
            lambda: remember(rt.engine, "Ada keeps bees on her roof", scope_id=turn.person_id)
        )
        clock.advance(3600)
        srv.script("Sure.")
        await rt.orchestrator.reply(dm("discord", "ada", "tell me about my bees", name="Ada"))
    finally:
        await rt.stop()
    first, second, third = [
        b["messages"][0]["content"] for b in srv.chat_requests if b.get("tools")
    ]
    assert "keeps bees" in third and "keeps bees" not in first  # the memories differ...
    # ...and the start is the same, byte for byte:
    shared = os.path.commonprefix([first, second, third])
    # persona and rules
    assert "# Your persona" in shared and "Keep replies short and natural" in shared
    assert len(shared) > 1000 and len(shared) > len(first) * 0.8
    for prompt in (first, second, third):
        # no clock to the minute in the system part
        assert "21:53" not in prompt and "22:54" not in prompt
    last_user = [b for b in srv.chat_requests if b.get("tools")][-1]["messages"][-1]["content"]
    assert last_user.startswith("tell me about my bees") and last_user.endswith("(sent 22:54 UTC)")


async def test_the_history_is_replayed_without_the_minute_so_the_previous_turns_stay_cacheable(
    srv, tmp_path
):
    clock = FakeClock(1_795_730_000.0)
    rt = build_runtime(tmp_path / "bot.db", srv, clock)
    await rt.start(background_loop=False)
    try:
        for text in ("hi there", "how are you"):
            srv.script("fine")
            await rt.orchestrator.reply(dm("discord", "ada", text, name="Ada"))
            clock.advance(60)
    finally:
        await rt.stop()
    replayed = [b for b in srv.chat_requests if b.get("tools")][-1]["messages"][1]
    assert replayed == {"role": "user", "content": "hi there"}


async def test_the_cached_share_the_server_reports_is_read_for_each_request_of_a_turn(srv):
    llm = ChatClient(srv.base_url, "k", "m", backoff_s=0)
    try:
        system = {"role": "system", "content": "You are a bot. " * 50}
        srv.script("one", "two")
        first = await llm.run([system, {"role": "user", "content": "first question"}])
        assert [u.cached for u in first.usage] == [0]  # nothing cached before the first request
        second = await llm.run(
            [system, {"role": "user", "content": "second question"}], stream=_ignore
        )
        # streamed: the figures come in the last chunk, asked for with include_usage
        (usage,) = second.usage
        assert usage.cached_share is not None and usage.cached_share > 0.9
        assert srv.chat_requests[-1]["stream_options"] == {"include_usage": True}
    finally:
        await llm.aclose()


async def test_llama_cpp_timings_are_read_when_usage_has_no_details(srv):
    body = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "timings": {"cache_n": 300, "prompt_n": 100},
    }
    llm = ChatClient(srv.base_url, "k", "m", backoff_s=0)
    try:
        srv.script(RawAnswer(body))
        answer = await llm.run([{"role": "user", "content": "hi"}])
        assert answer.text == "hi" and answer.usage == (Usage(400, 300, 0),)
        chunk = {"choices": [{"index": 0, "delta": {"content": "yo"}, "finish_reason": "stop"}]}
        last = {
            "choices": [],
            "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 40}},
        }
        srv.script(RawStream((chunk, last, "data: [DONE]\n\n")))
        answer = await llm.run([{"role": "user", "content": "hi"}], stream=_ignore)
        assert answer.text == "yo" and answer.usage == (Usage(50, 40, 0),)
    finally:
        await llm.aclose()


def test_a_server_that_reports_no_cache_leaves_the_share_unknown_not_zero():
    assert usage_of({"usage": {"prompt_tokens": 10, "completion_tokens": 2}}) == Usage(10, None, 2)
    assert usage_of({"usage": {"prompt_tokens": 10}}).cached_share is None  # type: ignore[union-attr]
    assert usage_of({"choices": []}) is None
    assert usage_of(
        {"usage": {"prompt_tokens": "ten", "prompt_tokens_details": {"cached_tokens": -1}}}
    ) == Usage(0, None, 0)
    assert json.dumps(Usage(10, 4).describe()) == json.dumps(
        "prompt 10 tokens, 4 cached (40%), 0 generated"
    )


async def _ignore(text: str) -> None:
    return None


async def test_a_server_that_refuses_stream_options_is_asked_without_them_once_and_for_all(srv):
    refusal = {
        "error": {
            "message": "Unrecognized request argument supplied: stream_options",
            "type": "invalid_request_error",
        }
    }
    llm = ChatClient(srv.base_url, "k", "m", backoff_s=0)
    try:
        srv.script(HTTPError(400, refusal), "hello", "again")
        assert (await llm.run([{"role": "user", "content": "hi"}], stream=_ignore)).text == "hello"
        assert (await llm.run([{"role": "user", "content": "hi"}], stream=_ignore)).text == "again"
        assert [("stream_options" in b) for b in srv.chat_requests] == [True, False, False]
    finally:
        await llm.aclose()


async def test_the_replayed_history_starts_at_the_same_message_for_turns_on_end_not_one_turn_later_each_turn(
    srv, tmp_path
):
    rt = build_runtime(tmp_path / "bot.db", srv, FakeClock(1_795_730_000.0))
    await rt.start(background_loop=False)
    try:
        for i in range(24):
            srv.script(f"answer {i}")
            await rt.orchestrator.reply(dm("discord", "ada", f"message {i}", name="Ada"))
    finally:
        await rt.stop()
    replies = [b["messages"] for b in srv.chat_requests if b.get("tools")]
    firsts = [m[1]["content"] if len(m) > 2 else None for m in replies]
    moves = [i for i in range(1, len(firsts)) if firsts[i] != firsts[i - 1]]
    # 24 turns in a window of 20 messages: the start moved a few times, not every turn
    assert len(moves) <= 4
    assert all(b - a >= 4 for a, b in zip(moves, moves[1:], strict=False))
    for i, messages in enumerate(
        replies
    ):  # the newest turns are always there, and never more than the window
        assert messages[-1]["content"].startswith(f"message {i}") and len(messages) - 2 <= 19
        if i:
            assert messages[-3:-1] == [
                {"role": "user", "content": f"message {i - 1}"},
                {"role": "assistant", "content": f"answer {i - 1}"},
            ]


async def test_two_runs_at_once_each_get_their_own_usage(srv):
    """The client is shared by every chat: a run's figures were kept on it, so the one that ended
    last overwrote the other's (issue 46); each answer now carries its own."""

    def answer(text: str, prompt: int) -> RawAnswer:
        message = {"role": "assistant", "content": text}
        return RawAnswer(
            {
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 1},
            }
        )

    llm = ChatClient(srv.base_url, "k", "m", backoff_s=0)
    try:
        srv.script(answer("one", 111), answer("two", 222))
        both = await asyncio.gather(
            llm.run([{"role": "user", "content": "a"}]), llm.run([{"role": "user", "content": "b"}])
        )
        assert sorted((a.text, [u.prompt for u in a.usage]) for a in both) == [
            ("one", [111]),
            ("two", [222]),
        ]
    finally:
        await llm.aclose()

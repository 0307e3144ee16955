"""Malformed HTTP 200 answers from the model server end as LLMError after bounded retries (ORCH-6).

The real openai SDK talks to the fake server, which serves each bad answer byte for byte (``RawAnswer``,
``RawStream``); nothing of ``bot.model.client`` is patched. The orchestrator catches only ``LLMError``, so any other
exception type escaping ``ChatClient`` would crash a reply instead of apologising.
"""

from __future__ import annotations

import logging

import pytest

from bot.model.client import ChatClient, LLMError, StreamCut, TurnTimeout
from tests.fakes import FakeOpenAI, ToolCall
from tests.fakes.openai_server import RawAnswer, RawStream

API_KEY = "sk-test-secret-key-0123456789"
MAX_RETRIES = 2
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def srv():
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def llm(srv):
    client = ChatClient(srv.base_url, API_KEY, "fake-model", max_retries=MAX_RETRIES, backoff_s=0.0)
    yield client
    await client.aclose()


class RecordingTools:
    """A ToolBox that answers every call with "done" and keeps what it was called with."""

    remembering = forgot = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def schemas(self) -> list[dict]:
        return [
            {"type": "function", "function": {"name": "remember", "parameters": {"type": "object"}}}
        ]

    async def call(self, name: str, arguments: str) -> str:
        self.calls.append((name, arguments))
        return "done"


class Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.parts.append(text)


def completion(message: dict | None) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def with_calls(*calls: dict) -> dict:
    return completion({"role": "assistant", "content": None, "tool_calls": list(calls)})


def chunk(delta: dict | None, finish: str | None = None) -> dict:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


DONE = "data: [DONE]\n\n"

MALFORMED = {
    "a text/plain body": RawAnswer("Sure! Here is my answer.", content_type="text/plain"),
    "a JSON content type over a non-JSON body": RawAnswer("<html>bad gateway</html>"),
    "an empty JSON object": RawAnswer({}),
    "a JSON array": RawAnswer([1, 2]),
    "a JSON null": RawAnswer(None),
    "no choices": RawAnswer({"choices": []}),
    "choices that are not a list": RawAnswer({"choices": {"0": "x"}}),
    "a null message": RawAnswer(completion(None)),
    "content that is not a string": RawAnswer(
        completion({"role": "assistant", "content": {"text": "hi"}})
    ),
    "tool_calls that are not a list": RawAnswer(
        completion({"role": "assistant", "tool_calls": "remember"})
    ),
    "a tool call with a null function": RawAnswer(
        with_calls({"id": "c1", "type": "function", "function": None})
    ),
    "a tool call without a name": RawAnswer(
        with_calls({"id": "c1", "function": {"arguments": "{}"}})
    ),
    "a tool call with an empty name": RawAnswer(
        with_calls({"id": "c1", "function": {"name": "", "arguments": "{}"}})
    ),
    "a tool call with a number for a name": RawAnswer(
        with_calls({"id": "c1", "function": {"name": 7}})
    ),
    "a tool call with an object for arguments": RawAnswer(
        with_calls({"id": "c1", "function": {"name": "remember", "arguments": {"fact": "x"}}})
    ),
    "a tool call with a number for arguments": RawAnswer(
        with_calls({"id": "c1", "function": {"name": "remember", "arguments": 5}})
    ),
}

MALFORMED_STREAMS = {
    "a stream without any event": RawStream(()),
    "a stream of only [DONE]": RawStream((DONE,)),
    "a stream cut before any text": RawStream(
        (chunk({"role": "assistant", "content": ""}),), cut=True
    ),
    "a stream of tool call fragments that ends before its finish_reason": RawStream(
        (
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "remember", "arguments": "{"}}
                    ]
                }
            ),
        )
    ),
    "a stream of garbage SSE data": RawStream(("data: {{{not json\n\n", DONE)),
    "a stream of lines that are not SSE": RawStream(("garbage\n\nmore garbage\n\n",)),
    "a stream of a JSON number": RawStream(("data: 5\n\n", DONE)),
    "a stream chunk with a null delta": RawStream((chunk(None, "stop"), DONE)),
    "a stream chunk with content that is not a string": RawStream(
        (chunk({"content": 5}, "stop"), DONE)
    ),
    "a streamed tool call with a null function": RawStream(
        (chunk({"tool_calls": [{"index": 0, "id": "c1", "function": None}]}, "tool_calls"), DONE)
    ),
    "a streamed tool call without a name": RawStream(
        (
            chunk(
                {"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]},
                "tool_calls",
            ),
            DONE,
        )
    ),
    "a streamed tool call with arguments that are not a string": RawStream(
        (
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "remember", "arguments": 5}}
                    ]
                },
                "tool_calls",
            ),
            DONE,
        )
    ),
    "a plain JSON completion where a stream was asked for": RawAnswer(
        completion({"role": "assistant", "content": "hi"})
    ),
}

# Text already reached the person: a retry would show it again, so these fail at once (StreamCut).
CUT_AFTER_TEXT = {
    "a stream cut mid-answer": RawStream(
        (chunk({"role": "assistant", "content": "Hel"}),), cut=True
    ),
    "a stream that ends cleanly before its finish_reason": RawStream(
        (chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}))
    ),
}


# -- every malformed answer is retried, then becomes LLMError -------------------------------------------
@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_answer_is_retried_then_raises_llm_error(srv, llm, answer):
    srv.script(*[answer] * (MAX_RETRIES + 1))
    tools = RecordingTools()
    with pytest.raises(LLMError):
        await llm.run(HELLO, tools)
    assert len(srv.chat_requests) == MAX_RETRIES + 1
    assert tools.calls == []


@pytest.mark.parametrize("answer", MALFORMED_STREAMS.values(), ids=MALFORMED_STREAMS.keys())
async def test_a_malformed_stream_is_retried_then_raises_llm_error(srv, llm, answer):
    srv.script(*[answer] * (MAX_RETRIES + 1))
    tools = RecordingTools()
    with pytest.raises(LLMError):
        await llm.run(HELLO, tools, Sink())
    assert len(srv.chat_requests) == MAX_RETRIES + 1
    assert all(body["stream"] for body in srv.chat_requests)
    assert tools.calls == []


async def test_complete_also_turns_a_malformed_answer_into_llm_error(srv, llm):
    srv.script(*[RawAnswer({"choices": []})] * (MAX_RETRIES + 1))
    with pytest.raises(LLMError):
        await llm.complete(HELLO, temperature=0.0)
    assert len(srv.chat_requests) == MAX_RETRIES + 1


# -- the retry recovers ----------------------------------------------------------------------------------
async def test_a_good_answer_after_a_malformed_one_is_returned(srv, llm):
    srv.script(RawAnswer("oops", content_type="text/plain"), "All good now")
    assert (await llm.run(HELLO, RecordingTools())).text == "All good now"
    assert len(srv.chat_requests) == 2


async def test_a_good_tool_call_after_a_nameless_one_runs_once(srv, llm):
    srv.script(
        RawAnswer(with_calls({"id": "c1", "function": {"name": ""}})),
        ToolCall("remember", {"fact": "likes tea"}),
        "Noted",
    )
    tools = RecordingTools()
    assert (await llm.run(HELLO, tools)).text == "Noted"
    assert tools.calls == [("remember", '{"fact": "likes tea"}')]
    assert len(srv.chat_requests) == 3


@pytest.mark.parametrize("answer", CUT_AFTER_TEXT.values(), ids=CUT_AFTER_TEXT.keys())
async def test_a_stream_failing_after_text_was_shown_is_not_retried(srv, llm, answer):
    srv.script(*[answer] * (MAX_RETRIES + 1))
    sink = Sink()
    with pytest.raises(StreamCut):
        await llm.run(HELLO, RecordingTools(), sink)
    assert "".join(sink.parts).startswith("Hel") and len(srv.chat_requests) == 1


async def test_a_stream_cut_before_any_text_is_retried(srv, llm):
    srv.script(RawStream((chunk({"role": "assistant", "content": ""}),), cut=True), "Hello again")
    sink = Sink()
    assert (await llm.run(HELLO, RecordingTools(), sink)).text == "Hello again"
    assert "".join(sink.parts) == "Hello again"
    assert len(srv.chat_requests) == 2


async def test_a_stream_cut_after_text_was_shown_is_not_retried_so_the_text_is_never_shown_twice(
    srv, llm
):
    srv.script(
        RawStream((chunk({"role": "assistant", "content": "Hel"}),), cut=True), "Hello", "Hello"
    )
    sink = Sink()
    with pytest.raises(StreamCut):
        await llm.run(HELLO, RecordingTools(), sink)
    assert "".join(sink.parts) == "Hel"  # not "HelHelHel"
    assert len(srv.chat_requests) == 1


async def test_a_trickling_stream_ends_at_the_turns_one_deadline_without_a_retry(srv):
    trickle = RawStream(tuple(chunk({"content": "la "}) for _ in range(40)), interval=0.05)
    srv.script(trickle, trickle, trickle)
    client = ChatClient(
        srv.base_url,
        API_KEY,
        "fake-model",
        max_retries=MAX_RETRIES,
        backoff_s=0.0,
        timeout=60,
        turn_deadline_s=0.5,
    )
    sink = Sink()
    try:
        with pytest.raises(TurnTimeout):
            await client.run(HELLO, None, sink)
    finally:
        await client.aclose()
    assert len(srv.chat_requests) == 1 and 0 < len(sink.parts) < 40


async def test_a_good_stream_after_a_garbage_one_is_returned(srv, llm):
    srv.script(RawStream(("data: {{{\n\n",)), "Fine")
    assert (await llm.run(HELLO, None, Sink())).text == "Fine"
    assert len(srv.chat_requests) == 2


# -- answers that are odd but usable ---------------------------------------------------------------------
async def test_a_lone_surrogate_in_the_content_becomes_a_replacement_character(srv, llm):
    srv.script(
        RawAnswer(
            '{"choices": [{"message": {"role": "assistant", "content": "caf\\ud800 au lait"}}]}'
        )
    )
    text = (await llm.run(HELLO, RecordingTools())).text
    assert text == "caf\ufffd au lait"
    text.encode("utf-8")  # storable in SQLite and sendable: strict UTF-8 encodes it
    assert len(srv.chat_requests) == 1


async def test_a_lone_surrogate_in_tool_arguments_reaches_the_tool_replaced(srv, llm):
    srv.script(
        RawAnswer(
            with_calls(
                {
                    "id": "c1",
                    "function": {"name": "remember", "arguments": '{"fact": "tea \udc00"}'},
                }
            )
        ),
        "ok",
    )
    tools = RecordingTools()
    await llm.run(HELLO, tools)
    assert tools.calls == [("remember", '{"fact": "tea \ufffd"}')]


async def test_a_lone_surrogate_in_a_stream_is_replaced_in_the_sink_and_the_answer(srv, llm):
    srv.script(
        RawStream(
            (
                chunk({"role": "assistant", "content": "caf\ud800"}),
                chunk({"content": " ok"}, "stop"),
                DONE,
            )
        )
    )
    sink = Sink()
    assert (await llm.run(HELLO, None, sink)).text == "caf\ufffd ok"
    assert "".join(sink.parts) == "caf\ufffd ok"


async def test_a_surrogate_pair_split_across_stream_chunks_is_kept_in_the_answer(srv, llm):
    srv.script(
        RawStream((chunk({"content": "smile \ud83d"}), chunk({"content": "\ude00"}, "stop"), DONE))
    )
    assert (await llm.run(HELLO, None, Sink())).text == "smile \U0001f600"


async def test_an_answer_with_neither_content_nor_tool_calls_is_empty_text(srv, llm):
    srv.script(
        RawAnswer(completion({"role": "assistant", "content": None})),
        RawAnswer(completion({"role": "assistant"})),  # asked once more (issue 45): empty again
        RawAnswer(completion({"role": "assistant"})),
    )
    assert (await llm.run(HELLO, RecordingTools())).text == ""
    assert await llm.complete(HELLO) == ""
    assert len(srv.chat_requests) == 3 and "tools" not in srv.chat_requests[1]


async def test_a_tool_call_without_id_or_arguments_still_runs_and_is_answered(srv, llm):
    srv.script(RawAnswer(with_calls({"function": {"name": "remember"}})), "Done")
    tools = RecordingTools()
    assert (await llm.run(HELLO, tools)).text == "Done"
    assert tools.calls == [("remember", "{}")]
    call, result = srv.chat_requests[1]["messages"][-2:]
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]


async def test_a_streamed_usage_chunk_without_choices_is_not_an_answer_of_its_own(srv, llm):
    usage = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    srv.script(RawStream((chunk({"content": "Hi"}, "stop"), usage, DONE)))
    assert (await llm.run(HELLO, None, Sink())).text == "Hi"


# -- logging ---------------------------------------------------------------------------------------------
async def test_each_bad_answer_logs_one_short_warning_without_the_api_key(srv, llm, caplog):
    srv.script(*[RawAnswer("x" * 5000, content_type="text/plain")] * (MAX_RETRIES + 1))
    with caplog.at_level(logging.WARNING, logger="bot.model.client"), pytest.raises(LLMError):
        await llm.run(HELLO)
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.model.client"]
    assert len(lines) == MAX_RETRIES + 1
    assert all(len(line) < 250 and API_KEY not in line for line in lines)


NOTE = "(Reminder set for Tue 8 Dec, 18:00 (UTC). /reminders lists them.)"


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        # issue 45: the console showed the copy the stored reply did not have
        (f"Got it, no prawns for you. {NOTE}", "Got it, no prawns for you."),
        (f"Got it. {NOTE} Enjoy dinner!", "Got it. Enjoy dinner!"),
        ("Got it, no prawns (sent 18:02 Tue) for you.", "Got it, no prawns for you."),
        # the model's own asides stream on
        ("Got it (no prawns, promise) for you.", "Got it (no prawns, promise) for you."),
        ("Got it (Reminders are handy) for you.", "Got it (Reminders are handy) for you."),
        ("Got it, no prawns (Reminder set for", "Got it, no prawns (Reminder set for"),
    ],
)
async def test_a_copied_note_after_the_first_words_is_never_streamed(llm, srv, said, shown):
    """The first words of the reply are new, so the stream is open when the note comes (it was
    shown, then taken off only the stored reply)."""
    sink = Sink()
    srv.script(said)
    answer = await llm.run(HELLO, None, sink)
    assert " ".join("".join(sink.parts).split()) == shown
    assert " ".join(answer.text.split()) == shown

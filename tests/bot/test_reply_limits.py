"""What a reply shows and sends is bounded (issue 20, finding 7): a stream cut after some text is not shown
again and ends with the apology; a huge answer is sent cut to what history keeps, with the cut marked."""

from __future__ import annotations

import io

from bot.adapters.console import ConsoleChat
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.types import APOLOGY
from memory.clock import FakeClock
from memory.models import CUT_MARK, MAX_MESSAGE_CHARS
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.fakes.openai_server import RawStream
from tests.pipeline_support import build_runtime

ALICE = 55


def chunk(content: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}}],
    }


async def test_a_stream_cut_after_hel_shows_hel_once_and_then_the_apology(tmp_path):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        cut = RawStream((chunk("Hel"),), cut=True)
        llm.script(cut, cut, cut)
        lines = iter(["hello there", "/quit"])
        out = io.StringIO()

        async def read(prompt: str) -> str:
            return next(lines)

        try:
            await ConsoleChat(runtime.orchestrator, input_fn=read, output=out).run()
            stored = await runtime.runner.run(
                runtime.engine.db.rows, "SELECT role, content FROM messages ORDER BY rid"
            )
        finally:
            llm.default = lambda body: "[]"
            await runtime.stop()
    assert f"bot> Hel\nbot> {APOLOGY}\n" in out.getvalue()
    assert out.getvalue().count("Hel") == 1
    # kept; no half answer in the history
    assert stored == [{"role": "user", "content": "hello there"}]


async def test_a_huge_answer_goes_out_on_telegram_cut_to_what_history_keeps(tmp_path):
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        adapter = TelegramAdapter(
            runtime.orchestrator,
            "123:abc",
            base_url=f"{tg.url}/bot",
            base_file_url=f"{tg.url}/file/bot",
        )
        await adapter.start()
        try:
            # about 400,000 characters, then a short one
            llm.script("la " * 133_334, "You're welcome.")
            tg.push_message(ALICE, ALICE, "sing me something long")
            # answered once every part of the first reply went out
            tg.push_message(ALICE, ALICE, "thanks")
            await tg.wait_for_sent(3)
            kept = await runtime.runner.run(
                runtime.engine.db.scalar,
                "SELECT content FROM messages WHERE role = 'assistant' ORDER BY rid LIMIT 1",
            )
        finally:
            llm.default = lambda body: "[]"
            await adapter.stop()
            await runtime.stop()
    *parts, last = [m["text"] for m in tg.sent]
    assert last == "You're welcome."
    assert len(parts) == 2 and sum(len(t) for t in parts) <= MAX_MESSAGE_CHARS  # not 98 messages
    assert parts[-1].endswith(CUT_MARK.strip()) and kept.endswith(CUT_MARK)

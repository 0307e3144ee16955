"""The console's up-arrow lines after a forget (issue 44), against a real runtime and store: the
lines the store let go, the line that asked and a command holding the forgotten words leave; the
rest stay."""

from __future__ import annotations

import io

from bot.adapters.console import ConsoleChat
from bot.adapters.console_history import ListLines
from bot.cli.conversation import _typed_before
from memory.clock import FakeClock
from tests.fakes import FakeOpenAI
from tests.pipeline_support import build_runtime


async def up_arrow_lines(tmp_path, *typed: str) -> list[str]:
    """The lines the up arrow would reach after ``typed``, as the chat keeps them."""
    async with FakeOpenAI() as llm:
        llm.default = lambda body: "Noted."
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        lines = iter([*typed, "/quit"])

        async def read(prompt: str) -> str:
            return next(lines)

        async def kept() -> list[str]:
            return await runtime.runner.run(_typed_before, runtime, "local-user", "Sam")

        chat = ConsoleChat(
            runtime.orchestrator, input_fn=read, output=io.StringIO(), kept=kept, user_name="Sam"
        )
        try:
            await chat.run()
        finally:
            llm.default = lambda body: "[]"
            await runtime.stop()
    assert isinstance(chat.lines.lines, ListLines)
    return [line for line in chat.lines.lines.items() if line != "/quit"]


async def test_a_forget_takes_its_lines_and_a_command_holding_its_words_out_of_the_history(
    tmp_path,
):
    left = await up_arrow_lines(
        tmp_path,
        "my kettle is called Zanzibarite",
        "/remember my kettle Zanzibarite has a blue lid",
        "I like green tea",
        "/help",
        "/forget Zanzibarite",
    )
    assert left == ["I like green tea", "/help"]


async def test_forget_everything_answered_yes_empties_the_history(tmp_path):
    left = await up_arrow_lines(tmp_path, "I like green tea", "/help", "/forget everything", "yes")
    assert left == []


async def test_forget_everything_declined_keeps_the_lines_the_store_keeps(tmp_path):
    left = await up_arrow_lines(tmp_path, "I like green tea", "/forget everything", "no")
    assert left[:2] == ["I like green tea", "/forget everything"]

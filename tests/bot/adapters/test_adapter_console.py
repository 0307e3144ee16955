"""The console adapter with scripted input lines and a captured output stream."""

from __future__ import annotations

import io

import pytest

from bot.adapters.common import APOLOGY, ERROR_APOLOGY
from bot.adapters.console import ConsoleChat
from bot.types import Reply
from memory.clock import FakeClock
from tests.adapter_support import ScriptedConversation
from tests.fakes import FakeOpenAI
from tests.pipeline_support import build_runtime


class ScriptedInput:
    """Hands out the given lines (then EOF, or the given exception) and records the prompts shown."""

    def __init__(self, *lines: str, end: BaseException | None = None) -> None:
        self.lines = list(lines)
        self.end = end or EOFError()
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.lines:
            raise self.end
        return self.lines.pop(0)


async def chat(conv: ScriptedConversation, *lines: str, stream: bool = True, **kwargs) -> str:
    out = io.StringIO()
    await ConsoleChat(
        conv, input_fn=ScriptedInput(*lines, **kwargs), output=out, stream=stream
    ).run()
    return out.getvalue()


async def test_lines_get_replies_as_direct_messages():
    conv = ScriptedConversation("Hi! Nice to meet you.")
    out = await chat(conv, "hello", "", "my cat is Miso", stream=False)
    assert "bot> Hi! Nice to meet you.\n" in out and "bot> echo: my cat is Miso\n" in out
    # the blank line was skipped
    assert [m.text for m in conv.replies] == [
        "hello",
        "my cat is Miso",
    ]
    first = conv.replies[0]
    assert (
        first.platform,
        first.channel_id,
        first.guild_id,
        first.author_id,
        first.author_name,
    ) == (
        "console",
        "console",
        None,
        "local-user",
        "friend",
    )  # a name the prompt can use: "a DM with friend", not "with you"
    assert first.is_dm and conv.replies[0].message_id != conv.replies[1].message_id


async def test_streamed_deltas_are_printed_as_they_arrive():
    conv = ScriptedConversation(Reply(text="Hello there, friend"))
    conv.stream_parts = ["Hello", " there,", " friend"]
    out = await chat(conv, "hi")
    # not printed twice
    assert "bot> Hello there, friend\n" in out and out.count("Hello there") == 1


async def test_a_reply_that_does_not_stream_is_printed_whole():
    conv = ScriptedConversation(Reply(text="(done)"))
    out = await chat(conv, "hi")
    assert "bot> (done)\n" in out


async def test_slash_commands_go_to_command():
    conv = ScriptedConversation()
    conv.command_script.append("1. You like tea")
    out = await chat(conv, "/memories", "/remember I was born in Porto", "/link")
    assert [(c.name, c.argument) for c in conv.commands] == [
        ("memories", ""),
        ("remember", "I was born in Porto"),
        ("link", ""),
    ]
    assert "bot> 1. You like tea\n" in out and "bot> remember: I was born in Porto\n" in out
    assert conv.replies == [] and conv.commands[0].message.platform == "console"


async def test_help_and_unknown_commands_are_answered_locally():
    conv = ScriptedConversation()
    out = await chat(conv, "/help", "/frobnicate")
    assert "/remember" in out and "/quit" in out and "Unknown command /frobnicate" in out
    assert conv.seen == 0


@pytest.mark.parametrize("leave", ["/quit", "/exit"])
async def test_quit_ends_the_session(leave):
    conv = ScriptedConversation()
    source = ScriptedInput("hi", leave, "never read")
    await ConsoleChat(conv, input_fn=source, output=io.StringIO()).run()
    assert [m.text for m in conv.replies] == ["hi"] and source.lines == ["never read"]
    assert source.prompts == ["you> ", "you> "]


@pytest.mark.parametrize("end", [EOFError(), KeyboardInterrupt()])
async def test_end_of_input_and_ctrl_c_end_cleanly(end):
    conv = ScriptedConversation()
    out = await chat(conv, "hi", end=end)
    assert out.endswith("\n") and [m.text for m in conv.replies] == ["hi"]


async def test_async_input_functions_work_too():
    conv = ScriptedConversation()
    lines = iter(["hi", "/quit"])

    async def read(prompt: str) -> str:
        return next(lines)

    out = io.StringIO()
    await ConsoleChat(conv, input_fn=read, output=out).run()
    assert "bot> echo: hi\n" in out.getvalue()


async def test_a_failing_turn_is_reported_and_the_session_goes_on(caplog):
    conv = ScriptedConversation(RuntimeError("model unreachable"))
    out = await chat(conv, "hi", "again")
    # no claim that it was saved
    assert f"bot> {ERROR_APOLOGY}\n" in out and "bot> echo: again\n" in out
    assert any(r.exc_info and "model unreachable" in str(r.exc_info[1]) for r in caplog.records)


async def test_the_default_reader_reads_stdin_without_blocking_the_loop(monkeypatch):
    from bot.adapters.console import read_terminal_line

    monkeypatch.setattr("sys.stdin", io.StringIO("first line\n"))
    assert await read_terminal_line("you> ") == "first line"
    with pytest.raises(EOFError):
        await read_terminal_line("you> ")


async def test_a_failed_reply_is_followed_by_one_line_that_says_what_to_check():
    why = TimeoutError("no answer")
    conv = ScriptedConversation(Reply(text=APOLOGY, failed=True, failure=why), "fine again")
    asked: list[Exception | None] = []

    async def diagnose(failure: Exception | None) -> str:
        asked.append(failure)
        return "cannot reach the model server at http://127.0.0.1:9/v1: is it running?"

    out = io.StringIO()
    await ConsoleChat(
        conv, input_fn=ScriptedInput("hi", "again"), output=out, stream=False, diagnose=diagnose
    ).run()
    assert (
        f"bot> {APOLOGY}\n(!) cannot reach the model server at http://127.0.0.1:9/v1: is it running?\n"
        in out.getvalue()
    )
    assert asked == [why]  # only after the failed turn, with its failure


async def test_the_banner_names_the_console_account():
    out = await chat(ScriptedConversation(), end=EOFError())
    assert out.startswith("Chatting as friend (console:local-user).")


@pytest.mark.parametrize("login, expected", [("maya", "maya"), ("root", "friend"), ("", "friend")])
def test_the_console_person_is_called_by_the_login_name(monkeypatch, login, expected):
    from bot.adapters.console import local_user_name

    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):  # getpass reads these first
        monkeypatch.setenv(name, login)
    if not login:
        for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
            monkeypatch.delenv(name)
        monkeypatch.setattr("pwd.getpwuid", _no_account)
    assert local_user_name() == expected


def _no_account(uid: int):
    raise KeyError(f"getpwuid(): uid not found: {uid}")


# -- what the bot says while the person is at the prompt (issue 45: no `you>` after a reminder) --
class TerminalOut(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "piped"])
async def test_a_reminder_fired_at_the_prompt_draws_the_prompt_again(tmp_path, tty: bool) -> None:
    """The real runtime and reminder job: a /remind set in the console fires while the person
    sits at the prompt; the prompt follows it (at a terminal the reminder takes its line)."""
    out = TerminalOut() if tty else io.StringIO()
    lines: list[str | None] = ["/remind in 5 minutes feed the cat", None]
    async with FakeOpenAI() as srv:
        runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
        await runtime.start(background_loop=False)
        assert runtime.reminders is not None

        async def typed(prompt: str) -> str:
            out.write(prompt)  # as input() writes it
            line = lines.pop(0) if lines else "/quit"
            if line is not None:
                out.write(line + "\n")
                return line
            runtime.engine.clock.advance(6 * 60)
            assert (await runtime.reminders.run()).sent == 1
            return "/quit"

        console = ConsoleChat(runtime.orchestrator, stream=False, input_fn=typed, output=out)
        runtime.reminders.posts["console"] = console
        try:
            await console.run()
        finally:
            await runtime.stop()
    transcript = out.getvalue()
    start = "\r\x1b[K" if tty else "\n"
    assert transcript.endswith(f"you> {start}bot> \u23f0 Reminder: feed the cat\nyou> "), transcript


async def test_a_message_the_bot_starts_during_a_reply_is_not_followed_by_a_prompt() -> None:
    """Only at the prompt is it drawn again: between a line and its answer the answer comes next."""
    out = io.StringIO()
    console = ConsoleChat(ScriptedConversation("Hi!"), input_fn=ScriptedInput(), output=out)
    await console.send_direct("console", "How did the race go?")
    assert out.getvalue() == "\nbot> How did the race go?\n"

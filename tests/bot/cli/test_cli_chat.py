"""``companion chat`` end to end: the real runtime, the real openai SDK against the local fake server, and
lines typed on a (replaced) stdin. The terminal carries the conversation; logs go to a file."""

from __future__ import annotations

import asyncio
import io
import re
import sys
from pathlib import Path

import pytest

from bot.types import APOLOGY
from memory.storage.db import Database, read_only
from tests.cli_support import Cli, Result
from tests.fakes import Delay, FakeOpenAI, HTTPError

LOG_NOISE = ("applied migration", "Scheduler", "HTTP Request", "INFO", "WARNING")


def typed(monkeypatch: pytest.MonkeyPatch, *lines: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))


async def chat(cli: Cli, *argv: str) -> Result:
    return await asyncio.to_thread(cli, "chat", "--no-stream", "--new-store", *argv)


async def test_chat_is_quiet_and_logs_to_a_file_beside_the_store(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script("Hello Maya! Nice to meet you.")
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        typed(monkeypatch, "hi, I am new here", "/quit")
        result = await chat(cli, "--name", "Maya")

    assert result.code == 0, result.err
    assert (
        "Chatting as Maya (console:local-user)" in result.out
        and "Companion> Hello Maya! Nice to meet you." in result.out
    )
    assert not any(noise in result.out + result.err for noise in LOG_NOISE), result.out + result.err
    log = cli.db.with_suffix(".log").read_text()
    assert "Scheduler started" in log and "HTTP Request" in log
    # not "a DM with you"
    assert re.search(r'a DM with "?Maya"?\.', srv.chat_requests[0]["messages"][0]["content"])


async def test_verbose_shows_the_logs_and_log_file_moves_them(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        typed(monkeypatch, "/quit")
        verbose = await chat(cli, "--verbose")
        typed(monkeypatch, "/quit")
        elsewhere = await chat(cli, "--log-file", str(tmp_path / "logs" / "chat.log"))
    assert verbose.code == 0 and "Scheduler started" in verbose.err
    assert (
        elsewhere.code == 0 and "Scheduler started" in (tmp_path / "logs" / "chat.log").read_text()
    )


async def test_an_unreachable_model_is_one_line_naming_the_url(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "http://127.0.0.1:9/v1"  # nothing listens there
    monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", url)
    monkeypatch.setenv("COMPANION_LLM_MAX_RETRIES", "0")
    typed(monkeypatch, "hello?", "/quit")
    result = await chat(cli)

    assert result.code == 0 and "Traceback" not in result.out + result.err
    # said before the first line is typed
    assert f"warning: cannot reach the model server at {url}" in result.err
    assert f"Companion> {APOLOGY}\n(!) cannot reach the model server at {url}" in result.out
    hint = next(line for line in result.out.splitlines() if line.startswith("(!)"))
    assert "OPENAI_BASE_URL" in hint and str(cli.db.with_suffix(".log")) in hint
    # the details are kept, in the file
    assert "Traceback" in cli.db.with_suffix(".log").read_text()


async def test_a_server_that_answers_but_refuses_points_at_the_model_name(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script(HTTPError(404))
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("COMPANION_CHAT_MODEL", "no-such-model")
        typed(monkeypatch, "hello?", "/quit")
        result = await chat(cli)
    assert result.code == 0 and "warning:" not in result.err
    hint = next(line for line in result.out.splitlines() if line.startswith("(!)"))
    assert "COMPANION_CHAT_MODEL (no-such-model)" in hint and "companion doctor" in hint
    assert "Traceback" not in result.out + result.err


async def test_the_console_name_comes_from_the_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("COMPANION_CONSOLE_NAME", "Ada")
        typed(monkeypatch, "hi", "/quit")
        result = await chat(cli)
    assert "Chatting as Ada" in result.out
    assert re.search(r'a DM with "?Ada"?\.', srv.chat_requests[0]["messages"][0]["content"])


def test_chat_help_documents_the_console_account(cli: Cli) -> None:
    result = cli("chat", "--help")
    assert (
        result.code == 0
        and "console:local-user" in result.out
        and "COMPANION_CONSOLE_NAME" in result.out
    )


def stored_user_turns(cli: Cli) -> list[str]:
    db = Database(read_only(cli.db))
    try:
        return [
            r["content"]
            for r in db.rows("SELECT content FROM messages WHERE role = 'user' ORDER BY rid")
        ]
    finally:
        db.close()


async def test_a_line_of_bytes_that_are_not_utf8_is_stored_with_replacement_characters_and_answered(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script("Nice town!")
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        # Latin-1 bytes on a UTF-8 terminal
        raw = io.BytesIO(b"I live in Caf\xe9 \xff town\n/quit\n")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw, encoding="utf-8"))
        result = await chat(cli)
    assert result.code == 0 and "Traceback" not in result.out + result.err
    assert "Companion> Nice town!" in result.out
    assert stored_user_turns(cli) == ["I live in Caf\ufffd \ufffd town"]


async def test_a_lone_surrogate_is_stored_replaced_and_no_apology_claims_a_save_that_did_not_happen(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script("What a name!")
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        # how surrogateescape reads the byte 0xff
        typed(monkeypatch, "my cat is called Mi\udcffo", "/quit")
        result = await chat(cli)
    assert result.code == 0 and "saved" not in result.out
    assert "Companion> What a name!" in result.out
    assert stored_user_turns(cli) == ["my cat is called Mi\ufffdo"]
    assert "Mi\ufffdo" in srv.chat_requests[0]["messages"][-1]["content"]


async def test_a_server_that_hangs_is_reported_as_a_timeout_after_one_wait(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script(Delay(5.0, "too late"))
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("COMPANION_LLM_TIMEOUT_S", "0.3")
        typed(monkeypatch, "hello?", "/quit")
        result = await chat(cli)
        # replies offer tools; the extraction at exit does not
        asked = len([r for r in srv.chat_requests if "tools" in r])
    hint = next(line for line in result.out.splitlines() if line.startswith("(!)"))
    assert (
        hint.startswith("(!) timed out:") and "0.3 s" in hint and "COMPANION_LLM_TIMEOUT_S" in hint
    )
    assert "answers, but not to this request" not in result.out
    assert asked == 1  # a hanging server is not asked again (and again) while the person waits


async def test_the_console_learns_the_persons_name_offered_once_and_keeps_it_across_chats(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person typed "I'm Sam" and the prompt still said a DM with "friend": the name is offered once, /name
    takes it, and the next chat starts with it; replies are labelled with the persona's name."""
    async with FakeOpenAI() as srv:
        srv.default = lambda body: "Nice to meet you!"
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.delenv("COMPANION_CONSOLE_NAME", raising=False)
        typed(monkeypatch, "hi, I'm Sam.", "I'm Sam, really", "/name Sam", "how are you?", "/quit")
        first = await chat(cli)
        typed(monkeypatch, "hello again", "/quit")
        second = await asyncio.to_thread(cli, "chat", "--no-stream")
    assert first.code == 0 and first.out.count("(Shall I call you Sam? /name Sam)") == 1
    assert (
        "Companion> I'll call you Sam." in first.out and "Companion> Nice to meet you!" in first.out
    )
    assert re.search(r'a DM with "?Sam"?\.', srv.chat_requests[2]["messages"][0]["content"])
    assert second.code == 0 and "Chatting as Sam (console:local-user)" in second.out
    assert "Shall I call you" not in second.out


@pytest.mark.parametrize(
    "line,offered",
    [
        ("I'm Sam", "Sam"),
        ("hello, I am Priya! nice to meet you", "Priya"),
        ("you can call me Jo", "Jo"),
        ("my name is Ana-Lucia and I cook", "Ana-Lucia"),
        ("I'm tired", None),
        ("I'm Tired today", None),
        ("I'm going to the shop", None),
        ("i'm sam", None),
        ("I'm Not sure", None),
    ],
)
def test_a_said_name_is_offered_only_when_it_is_one(line: str, offered: str | None) -> None:
    from bot.adapters.console import NameOffers

    assert NameOffers(chosen=False).offer(line) == offered
    assert NameOffers(chosen=True).offer(line) is None


async def test_quit_does_not_wait_on_a_slow_extraction_model_and_the_turn_stays_buffered(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU-served model made /quit wait 27-41 s on the flush of extraction: it now stops after
    COMPANION_SHUTDOWN_FLUSH_S, closes the model's request, and leaves the turn for the next start (WRITE-1)."""
    from tests.fakes.openai_server import Hang

    async with FakeOpenAI() as srv:
        srv.script("What a lovely cat!", Hang())  # the reply, then an extraction that never answers
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("COMPANION_SHUTDOWN_FLUSH_S", "0.2")
        typed(monkeypatch, "my cat is called Biscuit", "/quit")
        async with asyncio.timeout(60):  # a bound for a broken build, not a speed check
            result = await chat(cli)
        await srv.wait_until(lambda: srv.closed_by_client == ["request"])
    assert result.code == 0 and "Companion> What a lovely cat!" in result.out
    db = Database(read_only(cli.db))
    try:
        assert [r["text"] for r in db.rows("SELECT text FROM extraction_buffer")] == [
            "my cat is called Biscuit"
        ]
    finally:
        db.close()


async def test_a_slow_reply_shows_the_working_line_before_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: "I'm Sam" showed nothing for 420 s. Piped, one line says the bot is on it (on a
    terminal it counts the seconds: tests/test_chat_terminal.py); a quick reply goes without it."""
    async with FakeOpenAI() as srv:
        srv.script("Quick hello.", Delay(3.0, "Hello after a while."))
        srv.default = lambda body: "[]"
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        typed(monkeypatch, "hi", "I'm Sam", "/quit")
        result = await chat(cli)
    assert result.code == 0, result.err
    assert "(Companion is thinking…)\nCompanion> Hello after a while.\n" in result.out
    assert result.out.count("thinking") == 1


async def test_quit_says_what_it_finishes_and_leaves_the_rest_for_the_next_start(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/quit took 10-15 s and said nothing (issue 45): it says so, gives the model QUIT_FLUSH_S
    whatever COMPANION_SHUTDOWN_FLUSH_S (5 s by default) says, and tells what waits."""
    from bot.cli.conversation import QUIT_FLUSH_S
    from tests.fakes.openai_server import Hang

    async with FakeOpenAI() as srv:
        srv.script("What a lovely cat!", Hang())  # the reply, then an extraction that never answers
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        typed(monkeypatch, "my cat is called Biscuit", "/quit")
        result = await chat(cli)
        await srv.wait_until(lambda: srv.closed_by_client == ["request"])
    assert result.code == 0, result.err
    assert result.out.endswith(
        "Saving what you said…\nSaved. 1 message will be learned from at the next start.\n"
    )
    log = cli.db.with_suffix(".log").read_text()
    assert f"stopped extracting after {QUIT_FLUSH_S:g} s" in log
    db = Database(read_only(cli.db))
    try:
        assert db.scalar("SELECT COUNT(*) FROM extraction_buffer") == 1
    finally:
        db.close()

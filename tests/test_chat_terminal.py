"""``companion chat`` in a real terminal (a pty), against the fake OpenAI server (issue 22): line editing and a
history (the up arrow recalls the last line, never printed as ``^[[A``), "thinking..." while the model answers,
replies wrapped at words to the terminal's width, and Ctrl-C during a reply cancelling that reply at once while
the chat goes on."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from bot.adapters.common import COMMANDS
from tests.fakes import Delay, FakeOpenAI
from tests.fakes.openai_server import RawStream

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 40
STORY = (
    "Once upon a time a small fox lived by the river and every morning she counted the boats going by "
    * 2
)


def chunk(text: str) -> dict:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }


def _controlling() -> None:
    """The pty becomes the child's controlling terminal, so Ctrl-C typed there is a SIGINT, as at a real one."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A child process on a pty WIDTH columns wide; everything it prints is gathered by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, WIDTH, 0, 0))
        self.settings_before = termios.tcgetattr(slave)
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            preexec_fn=_controlling,
            close_fds=True,
        )
        self.slave = slave  # kept open: the terminal's settings are read after the child has gone
        self.screen = ""
        self._lock = threading.Lock()
        threading.Thread(target=self._gather, daemon=True).start()

    def _gather(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.screen += data.decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        os.close(self.master)
        os.close(self.slave)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def expect(self, pattern: str, since: int = 0, timeout: float = 30.0) -> int:
        """Wait until ``pattern`` shows after position ``since``; the position after it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = re.search(pattern, self.screen[since:])
            if found:
                return since + found.end()
            await asyncio.sleep(0.05)
        raise AssertionError(f"{pattern!r} never showed; the screen:\n{self.screen[since:]}")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COMPANION_", "OPENAI_"))}
    return {
        **clean,
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "c"),
    }


async def test_in_a_terminal_the_chat_edits_lines_shows_thinking_wraps_replies_and_ctrl_c_cancels_only_the_reply(
    tmp_path, env
) -> None:
    async with FakeOpenAI() as srv:
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [
            sys.executable,
            "-m",
            "bot",
            "--db",
            str(tmp_path / "store.db"),
            "--embeddings",
            "none",
            "chat",
            "--new-store",
        ]
        term = Terminal(argv, env)
        try:
            at = await term.expect(r"you> ")
            # a slow reply: the working line shows at once, counting the seconds in place (issue 45)
            srv.script(Delay(2.5, "Hello there."))
            term.type("hello\r")
            at = await term.expect(r"Companion is thinking…\r\x1b\[KCompanion is thinking… 1 s", at)
            at = await term.expect(r"\r\x1b\[KCompanion> Hello there\.", at)
            at = await term.expect(r"you> ", at)
            # a reply that would trickle for a minute: Ctrl-C must end it at once, and the chat goes on
            srv.script(RawStream(tuple(chunk(f"word{i} ") for i in range(200)), interval=0.3))
            term.type("tell me a long story\r")
            at = await term.expect(r"Companion is thinking…", at)
            at = await term.expect(r"word2 ", at)
            term.type("\x03")
            at = await term.expect(r"\(reply cancelled\)", at)
            at = await term.expect(r"you> ", at)

            srv.script(STORY)
            term.type("\x1b[A\r")  # the up arrow recalls the last line; Enter sends it again
            at = await term.expect(r"the boats going by\s*\r?\n.*you> ", at)
            assert srv.chat_requests[-1]["messages"][-1]["content"].startswith(
                "tell me a long story\n\n(sent "
            )
            reply = term.screen[term.screen.rindex("Companion> ") :].split("you> ")[0]
            lines = [line for line in reply.replace("\x1b[K", "").split("\r\n") if line.strip()]
            assert len(lines) > 3 and all(len(line.split("\r")[-1]) <= WIDTH for line in lines), (
                lines
            )
            # broken at spaces, not inside words
            assert not any(line.endswith(("Onc", "upo", "riv")) for line in lines)

            term.type("/quit\r")
            assert await asyncio.to_thread(term.proc.wait, 30) == 0
        finally:
            term.close()
    assert (
        "^[[A" not in term.screen
        and "interrupted" not in term.screen
        and "Traceback" not in term.screen
    )


async def test_ctrl_c_at_the_prompt_leaves_cleanly_and_gives_the_terminal_back_as_it_was(
    tmp_path, env
) -> None:
    """Ctrl-C at ``you>`` ends the chat as Ctrl-D does: exit 0, no "interrupted" error, and echo and line
    mode back on (the line editor had left the terminal raw: nothing typed showed until ``stty sane``)."""
    async with FakeOpenAI() as srv:
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [
            sys.executable,
            "-m",
            "bot",
            "--db",
            str(tmp_path / "store.db"),
            "--embeddings",
            "none",
            "chat",
            "--new-store",
        ]
        term = Terminal(argv, env)
        try:
            await term.expect(r"you> ")
            await asyncio.sleep(0.3)  # the line editor is now waiting, the terminal in its raw mode
            term.type("\x03")
            assert await asyncio.to_thread(term.proc.wait, 30) == 0
            after = termios.tcgetattr(term.slave)
        finally:
            term.close()
    lflag = 3
    assert after[lflag] & (termios.ECHO | termios.ICANON) == term.settings_before[lflag] & (
        termios.ECHO | termios.ICANON
    )
    assert after == term.settings_before
    assert "interrupted" not in term.screen and "Traceback" not in term.screen


async def test_a_pasted_block_is_one_message_and_help_breaks_at_spaces(tmp_path, env) -> None:
    """A pasted 3-line block became 3 turns; /help broke mid-word at 40 columns."""
    async with FakeOpenAI() as srv:
        srv.default = lambda body: "Got all three lines."
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [
            sys.executable,
            "-m",
            "bot",
            "--db",
            str(tmp_path / "store.db"),
            "--embeddings",
            "none",
            "chat",
            "--new-store",
        ]
        term = Terminal(argv, env)
        try:
            at = await term.expect(r"you> ")
            # a terminal's bracketed paste
            term.type("\x1b[200~first line\nsecond line\nthird line\x1b[201~\r")
            at = await term.expect(r"Got all three lines\.", at)
            at = await term.expect(r"you> ", at)
            # a paste with no markers: the lines at once
            term.type("fourth line\rfifth line\rsixth line\r")
            at = await term.expect(r"Got all three lines\.", at)
            at = await term.expect(r"you> ", at)
            term.type("/help\r")
            at = await term.expect(r"/quit\s+Leave", at)
            help_text = term.screen[term.screen.rindex("Commands:") : at]
            term.type("/quit\r")
            assert await asyncio.to_thread(term.proc.wait, 30) == 0
        finally:
            term.close()
    # extraction's requests do not stream
    replies = [body for body in srv.chat_requests if body.get("stream")]
    assert [
        re.sub(r"\s+", " ", body["messages"][-1]["content"].split("\n\n(sent ")[0])
        for body in replies
    ] == [
        "first line second line third line",
        "fourth line fifth line sixth line",
    ]
    lines = [line.split("\r")[-1] for line in help_text.replace("\x1b[K", "").split("\r\n")]
    assert all(len(line) <= WIDTH for line in lines), lines
    words = set(
        re.findall(
            r"[A-Za-z]+", " ".join([*COMMANDS.values(), "What I call you: /name Sam", "Leave"])
        )
    )
    broken = [
        line.split()[-1]
        for line in lines
        if line.split() and line.split()[-1].isalpha() and line.split()[-1] not in words
    ]
    assert broken == [], broken


async def test_the_up_arrow_reaches_lines_of_an_earlier_chat_but_not_a_forgotten_one(
    tmp_path, env
) -> None:
    """No input history across sessions; a history file would keep words a forget must remove, so the earlier
    lines come from the store's own messages: a forgotten line is not there to recall."""
    async with FakeOpenAI() as srv:
        srv.default = lambda body: "Noted."
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [
            sys.executable,
            "-m",
            "bot",
            "--db",
            str(tmp_path / "store.db"),
            "--embeddings",
            "none",
            "chat",
            "--new-store",
        ]
        for lines in (
            ["my kettle is called Zanzibarite", "I like green tea", "/forget Zanzibarite"],
            [],
        ):
            term = Terminal(argv, env)
            try:
                at = await term.expect(r"you> ")
                for line in lines:
                    term.type(line + "\r")
                    at = await term.expect(r"you> ", at)
                if not lines:  # the second chat: the up arrow, twice, then Enter
                    term.type("\x1b[A")
                    await term.expect(r"I like green tea", at)
                    term.type("\x1b[A\r")
                    at = await term.expect(r"you> ", at)
                term.type("/quit\r")
                assert await asyncio.to_thread(term.proc.wait, 30) == 0
            finally:
                term.close()
    replies = [body for body in srv.chat_requests if body.get("stream")]
    recalled = replies[-1]["messages"][-1]["content"].split("\n\n(sent ")[0]
    assert recalled == "I like green tea" and "Zanzibarite" not in term.screen


@pytest.mark.parametrize(
    "forget", ["/forget Zanzibarite", "Please forget that my kettle is called Zanzibarite."]
)
async def test_after_a_forget_the_up_arrow_no_longer_reaches_the_lines_that_held_it(
    tmp_path, env, forget: str
) -> None:
    """readline keeps every line typed in memory (issue 44): after a forget, by command or in
    words, the line that said it and the line that asked leave the up arrow's reach in that chat."""
    async with FakeOpenAI() as srv:
        srv.default = lambda body: "Noted."
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [
            sys.executable,
            "-m",
            "bot",
            "--db",
            str(tmp_path / "store.db"),
            "--embeddings",
            "none",
            "chat",
            "--new-store",
        ]
        term = Terminal(argv, env)
        try:
            at = await term.expect(r"you> ")
            for line in ("my kettle is called Zanzibarite", "I like green tea", forget):
                term.type(line + "\r")
                at = await term.expect(r"you> ", at)
            term.type("\x1b[A")
            await term.expect(r"I like green tea", at)
            term.type("\x1b[A\x1b[A\x1b[A")  # further up: nothing older is left to reach
            await asyncio.sleep(0.5)
            shown = term.screen[at:]
            term.type("\r")
            at = await term.expect(r"you> ", at)
            term.type("/quit\r")
            assert await asyncio.to_thread(term.proc.wait, 30) == 0
        finally:
            term.close()
    assert "Zanzibarite" not in shown and "forget" not in shown.lower()
    replies = [body for body in srv.chat_requests if body.get("stream")]
    recalled = replies[-1]["messages"][-1]["content"].split("\n\n(sent ")[0]
    assert recalled == "I like green tea"

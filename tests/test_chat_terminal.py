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

from tests.fakes import FakeOpenAI
from tests.fakes.openai_server import RawStream

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 40
STORY = "Once upon a time a small fox lived by the river and every morning she counted the boats going by " * 2


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
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, preexec_fn=_controlling, close_fds=True)
        os.close(slave)
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
    return {**clean, "PYTHONPATH": str(ROOT), "TERM": "xterm", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c")}


async def test_in_a_terminal_the_chat_edits_lines_shows_thinking_wraps_replies_and_ctrl_c_cancels_only_the_reply(tmp_path, env) -> None:
    async with FakeOpenAI() as srv:
        env |= {"COMPANION_OPENAI_BASE_URL": srv.base_url, "COMPANION_OPENAI_API_KEY": "test-key"}
        argv = [sys.executable, "-m", "bot", "--db", str(tmp_path / "store.db"), "--embeddings", "none", "chat", "--new-store"]
        term = Terminal(argv, env)
        try:
            at = await term.expect(r"you> ")
            # a reply that would trickle for a minute: Ctrl-C must end it at once, and the chat goes on
            srv.script(RawStream(tuple(chunk(f"word{i} ") for i in range(200)), interval=0.3))
            term.type("tell me a long story\r")
            at = await term.expect(r"thinking\.\.\.", at)
            at = await term.expect(r"word2 ", at)
            term.type("\x03")
            at = await term.expect(r"\(reply cancelled\)", at, timeout=5.0)
            at = await term.expect(r"you> ", at, timeout=5.0)

            srv.script(STORY)
            term.type("\x1b[A\r")  # the up arrow recalls the last line; Enter sends it again
            at = await term.expect(r"counted the boats going by\s*\r?\n.*you> ", at)
            assert srv.chat_requests[-1]["messages"][-1]["content"].startswith("tell me a long story\n\n(sent ")
            reply = term.screen[term.screen.rindex("bot> ") :].split("you> ")[0]
            lines = [line for line in reply.replace("\x1b[K", "").split("\r\n") if line.strip()]
            assert len(lines) > 3 and all(len(line.split("\r")[-1]) <= WIDTH for line in lines), lines
            assert not any(line.endswith(("Onc", "upo", "riv")) for line in lines)  # broken at spaces, not inside words

            term.type("/quit\r")
            assert await asyncio.to_thread(term.proc.wait, 30) == 0
        finally:
            if term.proc.poll() is None:
                term.proc.kill()
            os.close(term.master)
    assert "^[[A" not in term.screen and "interrupted" not in term.screen and "Traceback" not in term.screen

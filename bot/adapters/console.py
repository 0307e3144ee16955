"""Console channel (CHAN-3): chat with the bot in a terminal, against the same store as every channel.

Each line typed is a direct message from one local user; ``/quit`` or ``/exit`` (or end of input,
or Ctrl-C) ends the session, ``/help`` lists the commands, and the other slash commands go to
``Conversation.command``. With ``stream=True`` the reply is printed as it is generated.

The local user is the platform account ``console:<user_id>`` (``local-user`` unless told otherwise),
a person like any Discord or Telegram account: ``/link`` joins it to your other accounts. The name is
what the bot calls you by, so it should be a name, not "you" (the prompt would read "a DM with you").
When a reply fails, ``diagnose`` (if given) explains why in one line, such as which server to check.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import getpass
import inspect
import io
import itertools
import logging
import os
import re
import select
import shutil
import signal
import sys
import termios
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence  # noqa: F401 (Awaitable is used in a string annotation)
from typing import TextIO

from bot.types import Conversation, IncomingMessage

from .common import COMMANDS, ERROR_APOLOGY
from .console_history import KeptLines, ListLines, TypedHistory, terminal_lines
from .working import CLEAR, Working

logger = logging.getLogger(__name__)

PROMPT = "you> "
# The console's own commands beside the chat ones (COMMANDS), as /help lists them.
CONSOLE_COMMANDS = {"name": "What I call you: /name Sam", "help": "This list", "quit": "Leave"}
QUIT = frozenset({"/quit", "/exit"})
PASTE_GAP_S = 0.03

InputFn = Callable[[str], "str | Awaitable[str]"]
Diagnose = Callable[[Exception | None], Awaitable["str | None"]]
DEFAULT_USER_ID = "local-user"
DEFAULT_NAME = "friend"


class ConsoleChat:
    """A read-reply loop over ``input_fn`` (default: the terminal) and ``output`` (default: stdout)."""

    platform = "console"

    def __init__(
        self,
        conversation: Conversation,
        *,
        user_id: str = DEFAULT_USER_ID,
        user_name: str = DEFAULT_NAME,
        bot_name: str = "bot",
        name_chosen: bool = True,
        history: list[str] | None = None,
        stream: bool = True,
        input_fn: InputFn | None = None,
        output: TextIO | None = None,
        diagnose: Diagnose | None = None,
        kept: KeptLines | None = None,
    ) -> None:
        self._conversation = conversation
        self._diagnose = diagnose
        self._user_id = user_id
        self._user_name = user_name
        self._prefix = f"{bot_name}> "  # replies are labelled with the persona's name
        # A name nobody chose (the login name, or "friend") is offered to be replaced by the one the person says.
        self._names = NameOffers(chosen=name_chosen)
        # earlier chats' lines, for the up arrow (the terminal's line editor)
        self._history = history or []
        self._stream = stream
        self._input = input_fn or read_terminal_line
        # what a forget takes out of the up arrow's lines (``kept``: the lines still stored)
        terminal = self._input is read_terminal_line
        self.lines = TypedHistory(terminal_lines() if terminal else ListLines(), kept)
        self._everything_asked = (
            False  # "/forget everything" asked: the answer's turn may forget it all
        )
        self._out = output or sys.stdout
        # On a terminal: "thinking… 3 s", replies wrapped at words, Ctrl-C cancelling a reply.
        self._tty = bool(getattr(self._out, "isatty", lambda: False)())
        self._ids = itertools.count(1)
        # At the prompt: what the bot says meanwhile (a reminder, a check-in) redraws the prompt.
        self._at_prompt = False
        # Message ids are unique per store (a re-delivered id is not stored twice): this session's own prefix.
        self._session = uuid.uuid4().hex[:12]

    async def run(self) -> None:
        """Chat until /quit, /exit, end of input or Ctrl-C (at the prompt; during a reply it cancels the reply)."""
        if self._input is read_terminal_line:
            line_editing()
        self.lines.load(self._history)
        with terminal_restored():
            self._write(
                f"Chatting as {self._user_name} (console:{self._user_id}). /help lists commands, /quit leaves.\n"
            )
            while (line := await self._read()) is not None:
                line = line.strip()
                if line in QUIT:
                    break
                if line:
                    await self._handle(line)

    def say(self, text: str) -> None:
        """A line of the chat's own (not the bot's words): "Saving what you said…" at /quit."""
        self._write(f"{text}\n")

    async def send_direct(self, channel_id: str, text: str) -> None:
        """A message the bot starts (ORCH-8 check-ins): printed between turns, like a reply."""
        self._between_turns(text)

    async def send_to_channel(
        self, channel_id: str, text: str, mention_user_id: str | None = None
    ) -> None:
        """A reminder (ORCH-13): printed between turns, like a reply."""
        self._between_turns(text)

    async def send_to_user(self, user_id: str, text: str) -> None:
        self._between_turns(text)

    def _between_turns(self, text: str) -> None:
        """A message the bot starts, on lines of its own. At the prompt it takes the prompt's line
        (at a terminal) and the prompt is drawn again after it, with what was typed so far: the
        person was left with no ``you>`` to type at (issue 45)."""
        if not self._at_prompt:
            self._write(f"\n{self._prefix}{text}\n")
            return
        start = "\r\x1b[K" if self._tty else "\n"
        said = self._fit(text, len(self._prefix))
        self._write(f"{start}{self._prefix}{said}\n{PROMPT}{self._typed_so_far()}")

    def _typed_so_far(self) -> str:
        if self._input is not read_terminal_line or "readline" not in sys.modules:
            return ""
        import readline

        return readline.get_line_buffer()

    async def member_here(self, channel_id: str, user_id: str) -> bool | None:
        """The console's one chat is the operator's own."""
        return True

    async def _read(self) -> str | None:
        """The next line, or None when the input ends (EOF or Ctrl-C): a normal way to leave."""
        self._at_prompt = True
        try:
            line = self._input(PROMPT)
            line = await line if inspect.isawaitable(line) else line
            self.lines.typed(line)
            return line
        except (EOFError, KeyboardInterrupt):
            self._at_prompt = False
            self._write("\n")
            return None
        finally:
            self._at_prompt = False

    async def _handle(self, line: str) -> None:
        try:
            if line.startswith("/"):
                await self._command(line)
            else:
                await self._reply(line)
        except Exception:
            # One failed turn (the store, the model...) is reported and the session goes on.
            logger.exception("console: handling %r failed", line[:80])
            self._write(f"{self._prefix}{ERROR_APOLOGY}\n")

    async def _command(self, line: str) -> None:
        name, _, argument = line[1:].partition(" ")
        name = name.lower()
        if name == "name":
            self._write(self._rename(argument.strip()))
            return
        if name not in COMMANDS:
            self._write(
                self._help() if name == "help" else f"Unknown command /{name}. Try /help.\n"
            )
            return
        text = await self._conversation.command(name, argument.strip(), self._message(line))
        self._write(f"{self._prefix}{self._fit(text, len(self._prefix))}\n")
        await self._after_command(name, argument.strip(), line)

    async def _after_command(self, name: str, argument: str, line: str) -> None:
        """A command that may have forgotten something: its lines leave the up arrow's reach."""
        words = argument.lower().split()
        if name == "forget" and words and words[0] in ("everything", "all"):
            self._everything_asked = words[-1] != "confirm"
            if self._everything_asked:
                return  # only asked: nothing is gone yet
        if name == "forget" or (name, words[:1]) in (("privacy", ["off"]), ("about", ["veto"])):
            await self.lines.forgot(line, argument if name == "forget" else "")

    def _fit(self, text: str, indent: int) -> str:
        """At a terminal, ``text`` broken at spaces to its width (a command's answer broke mid-word at 40 columns);
        continuation lines indented by ``indent``, the first assumed to start there."""
        if not self._tty:
            return text
        wrap = Wrapper(shutil.get_terminal_size((80, 24)).columns, indent)
        return wrap.feed(text) + wrap.flush()

    async def _reply(self, line: str) -> None:
        """The answer, which Ctrl-C cancels at once (the chat goes on); the rest of the session is not touched."""
        answer = asyncio.ensure_future(self._answer(line))
        with _on_ctrl_c(answer.cancel):
            try:
                await answer
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the session itself is ending, not just this reply
                self._write((CLEAR if self._tty else "\n") + "(reply cancelled)\n")

    async def _answer(self, line: str) -> None:
        wrap = Wrapper(
            shutil.get_terminal_size((80, 24)).columns if self._tty else 0, len(self._prefix)
        )
        streamed = False
        working = Working(self._write, self._prefix.removesuffix("> "), tty=self._tty)

        async def sink(delta: str) -> None:
            nonlocal streamed
            if not streamed:
                self._write(working.stop() + self._prefix)
                streamed = True
            self._write(wrap.feed(delta))

        working.start()
        try:
            reply = await self._conversation.reply(
                self._message(line), sink if self._stream else None
            )
        finally:
            cleared = working.stop()
        # A conversation may answer without streaming (a tool-only turn, an apology): print it whole. A stream
        # cut after some text already shown ends with the apology on its own line, after what was shown.
        if streamed:
            self._write(wrap.feed("") + wrap.flush())
            self._write(f"\n{self._prefix}{reply.text}\n" if reply.failed else "\n")
        else:
            whole = Wrapper(wrap.width, len(self._prefix))
            self._write(f"{cleared}{self._prefix}{whole.feed(reply.text)}{whole.flush()}\n")
        if reply.forgotten or self._everything_asked:
            self._everything_asked = False
            await self.lines.forgot(line)
        if reply.failed:
            await self._explain(reply.failure)
        elif offered := self._names.offer(line):
            self._write(f"(Shall I call you {offered}? /name {offered})\n")

    def _rename(self, name: str) -> str:
        """``/name Sam``: what the bot calls the person from the next message on (kept with their account)."""
        cleaned = " ".join(name.split())[:64]
        if not cleaned:
            return f"I call you {self._user_name}. /name <your name> changes it.\n"
        self._user_name = cleaned
        self._names.chosen = True
        return f"{self._prefix}I'll call you {cleaned}.\n"

    async def _explain(self, failure: Exception | None) -> None:
        """After an apology, the one line that tells the person at the terminal what to fix (the model is down...)."""
        hint = await self._diagnose(failure) if self._diagnose else None
        if hint:
            self._write(f"(!) {hint}\n")

    def _message(self, text: str) -> IncomingMessage:
        return IncomingMessage(
            platform="console",
            channel_id="console",
            author_id=self._user_id,
            author_name=self._user_name,
            text=text,
            guild_id=None,
            message_id=f"{self._session}-{next(self._ids)}",
            created_at=time.time(),
        )

    def _help(self) -> str:
        described = {
            **{n: h for n, h in COMMANDS.items() if n != "start"},
            **{n: h for n, h in CONSOLE_COMMANDS.items() if n != "help"},
        }
        lines = [
            f"  /{name:<9} {self._fit(help_text, 13)}" for name, help_text in described.items()
        ]
        return "Commands:\n" + "\n".join(lines) + "\n"

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


SAID_NAME = re.compile(
    r"(?:^|[.!?]\s+)(?:hi|hello|hey)?[,!]?\s*(?:i'm|i am|im)\s+([A-Z][\w'-]{1,30})(?=\s*(?:[,.!?]|$|and\b|here\b))"
    r"|\b(?:my name is|my name's|call me)\s+([A-Z][\w'-]{1,30})",
    re.IGNORECASE,
)
NOT_NAMES = frozenset(
    [
        "not",
        "so",
        "just",
        "really",
        "here",
        "back",
        "fine",
        "good",
        "okay",
        "ok",
        "sorry",
        "happy",
        "sure",
        "tired",
        "sad",
        "glad",
        "done",
        "home",
        "new",
        "going",
        "very",
        "also",
        "still",
        "busy",
        "bored",
        "hungry",
        "ready",
        "free",
        "well",
        "great",
        "excited",
        "worried",
        "thinking",
        "working",
    ]
)


class NameOffers:
    """A name the person says ("I'm Sam", "call me Sam"), offered once as ``/name Sam`` while the name in use
    is one nobody chose; never again once they chose one, and each name only once."""

    def __init__(self, *, chosen: bool) -> None:
        self.chosen = chosen
        self._offered: set[str] = set()

    def offer(self, line: str) -> str | None:
        if self.chosen:
            return None
        found = SAID_NAME.search(line)
        name = next((group for group in found.groups() if group), None) if found else None
        if (
            name is None
            or not name[0].isupper()
            or name.lower() in NOT_NAMES
            or name in self._offered
        ):
            return None
        self._offered.add(name)
        return name


class Wrapper:
    """Text streamed in pieces, broken at spaces so no word is split at the terminal's edge; continuation lines
    are indented under the reply's first word. A width of 0 leaves the text as it is."""

    def __init__(self, width: int, indent: int) -> None:
        self.width, self.indent = width, indent
        self.column = indent
        self.word = ""

    def feed(self, text: str) -> str:
        if not self.width:
            return text
        out = []
        for char in text:
            if char in " \n":
                out.append(self.flush())
                if char == "\n":
                    out.append("\n" + " " * self.indent)
                    self.column = self.indent
                elif self.column < self.width:
                    out.append(" ")
                    self.column += 1
            else:
                self.word += char
        return "".join(out)

    def flush(self) -> str:
        """The word held back (it may yet grow), placed on this line or the next."""
        word, self.word = self.word, ""
        if not word or not self.width:
            return word
        prefix = ""
        if self.column + len(word) > self.width and self.column > self.indent:
            prefix = "\n" + " " * self.indent
            self.column = self.indent
        self.column += len(word)
        return prefix + word


@contextlib.contextmanager
def _on_ctrl_c(callback: Callable[[], object]) -> Iterator[None]:
    """While inside, Ctrl-C calls ``callback`` instead of ending the session; the handler before is put back.
    During a reply it cancels that reply; at the prompt it ends the read as end of input does (without it the
    SIGINT tore the process down, exit 130, while the reading thread held the terminal in readline's raw mode)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread: elsewhere (tests driving the chat) there is nothing to catch
        return
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
    except (NotImplementedError, RuntimeError):  # no signals on this loop (Windows)
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)


def line_editing(history: Sequence[str] = ()) -> None:
    """On a terminal, ``input()`` gets line editing and a history (arrow keys printed ``^[[A`` without it), and
    a pasted block of several lines arrives as one message: Python turns readline's bracketed paste off, and a
    pasted 3-line block was 3 turns, each answered."""
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):  # a Python built without readline still chats
            import readline

            readline.parse_and_bind("set enable-bracketed-paste on")
            for line in history:  # the up arrow reaches earlier chats' lines too
                readline.add_history(line)


def local_user_name() -> str:
    """The login name of whoever runs the chat, for the bot to call them by; a friendly word when there is none.

    root is skipped: it names an account, not a person ("a DM with root").
    """
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (containers), no USER variables
        return DEFAULT_NAME
    return name if name and name != "root" else DEFAULT_NAME


async def read_terminal_line(prompt: str) -> str:
    """``input(prompt)`` without blocking the event loop.

    The read runs in a daemon thread rather than ``asyncio.to_thread``: a Ctrl-C while ``input()`` waits
    would otherwise leave a non-daemon executor thread that keeps the process alive until Enter.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(result: str, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def read() -> None:
        line, error = "", None  # on an error the future gets the exception, never this ""
        try:
            _tolerant(sys.stdin)
            line = input(prompt)
            while _more_waiting(
                sys.stdin
            ):  # the rest of a pasted block: no person types a line in 30 ms
                line += "\n" + input("")
        except BaseException as exc:  # EOFError and KeyboardInterrupt end the session in the loop
            error = exc
        with contextlib.suppress(
            RuntimeError
        ):  # the loop has closed (the session ended while this read was waiting)
            loop.call_soon_threadsafe(settle, line, error)

    threading.Thread(target=read, name="console-input", daemon=True).start()
    with _on_ctrl_c(lambda: settle("", KeyboardInterrupt())):
        return await future


@contextlib.contextmanager
def terminal_restored() -> Iterator[None]:
    """The terminal's settings as they were before the chat, whatever ends it.

    readline switches the terminal to raw mode (no echo, no line buffering) while it waits for a line, and a
    read still waiting in its thread when the chat ends never switches it back: the next program typed into
    showed nothing until ``stty sane``. The settings are put back on the way out, and once more at exit.
    """
    fd = _terminal_fd()
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)

    def restore() -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    atexit.register(restore)
    try:
        yield
    finally:
        restore()


def _terminal_fd() -> int | None:
    try:
        fd = sys.stdin.fileno()
    except (
        AttributeError,
        ValueError,
        io.UnsupportedOperation,
    ):  # replaced by a StringIO (tests), or closed
        return None
    return fd if os.isatty(fd) else None


def _more_waiting(stdin: TextIO) -> bool:
    """Whether more typed input is already waiting, 30 ms after a line ended: the next lines of a paste. A
    terminal's bracketed paste (on where readline allows it) already makes a pasted block one line; without it
    (libedit, a terminal or tmux that sends no paste markers) a 3-line paste was 3 turns, each answered."""
    try:
        return stdin.isatty() and bool(select.select([stdin], [], [], PASTE_GAP_S)[0])
    except (OSError, ValueError):
        return False


def _tolerant(stdin: TextIO) -> None:
    """Bytes on stdin that are not UTF-8 are read as U+FFFD: a strict stream raised UnicodeDecodeError from
    ``input()`` and ended the session, and the line was lost. (Under surrogateescape they arrive as lone
    surrogates, which ``IncomingMessage`` replaces.)"""
    if isinstance(stdin, io.TextIOWrapper) and stdin.errors == "strict":
        stdin.reconfigure(errors="replace")

"""The console chat's line history (the up arrow) after a forget (issue 44): the lines that held
what was forgotten leave it, so the up arrow does not bring back words the store no longer holds.

No history file is written: earlier chats' lines come from the store's messages
(``bot.cli.conversation``). In a session, readline keeps every line typed in memory; after a
forget (``/forget``, a forget in words, the model's tool, ``/forget everything``, ``/privacy off``,
an ``/about veto``) these go:

    the line that asked       "/forget Zanzibarite", "please forget my kettle's name"
    lines the store let go    a line typed (this chat or an earlier one) that is no longer among
                              the person's stored messages, when the chat can ask the store
                              (``kept``); a line no stored message holds ("no" to a question)
    lines holding its words   any line, a command too ("/remember my kettle is Zanzibarite"),
                              holding every content word of what ``/forget`` named
    everything                when the store holds none of the person's lines any more

Without a terminal (piped input, tests driving the chat) the same rules apply to a plain list.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

KeptLines = Callable[[], Awaitable[list[str]]]  # the person's lines the store still holds


class Lines(Protocol):
    def items(self) -> list[str]: ...
    def remove(self, index: int) -> None: ...
    def add(self, line: str) -> None: ...


class ListLines:
    """A history kept in a list: where there is no readline (piped input, a Python without it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def items(self) -> list[str]:
        return list(self.lines)

    def remove(self, index: int) -> None:
        del self.lines[index]

    def add(self, line: str) -> None:
        self.lines.append(line)


class ReadlineLines:
    """readline's own in-memory history, which ``input()`` adds every line to."""

    def __init__(self, readline) -> None:  # the module
        self.readline = readline

    def items(self) -> list[str]:
        rl = self.readline
        return [rl.get_history_item(i) or "" for i in range(1, rl.get_current_history_length() + 1)]

    def remove(self, index: int) -> None:
        self.readline.remove_history_item(index)

    def add(self, line: str) -> None:
        self.readline.add_history(line)


def terminal_lines() -> Lines:
    """readline's history on a terminal, else a list."""
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline

            return ReadlineLines(readline)
    return ListLines()


class TypedHistory:
    """The lines the up arrow reaches, and what a forget takes out of them."""

    def __init__(self, lines: Lines, kept: KeptLines | None = None) -> None:
        self.lines, self.kept = lines, kept

    def load(self, earlier: Iterable[str]) -> None:
        for line in earlier:
            self.lines.add(line)

    def typed(self, line: str) -> None:
        """A line read without readline (which adds its own), kept alike."""
        if isinstance(self.lines, ListLines):
            self.lines.add(line)

    async def forgot(self, asked: str, words: str = "", *, everything: bool = False) -> int:
        """After a forget asked by the line ``asked`` (``words``: what ``/forget`` named): the lines
        that go (the module's table). Returns how many went."""
        # here, not at the top: `companion --help` imports this module and must not pay for the store
        from memory import content_words

        stored = None if self.kept is None else {_plain(s) for s in await self.kept()}
        wanted = content_words(words) if words.strip() else frozenset()
        everything = everything or stored == set()

        def goes(line: str) -> bool:
            plain = _plain(line)
            if everything or plain == _plain(asked):
                return True
            if wanted and wanted <= content_words(line):
                return True
            return (
                stored is not None
                and not line.lstrip().startswith("/")
                and not any(plain in s for s in stored)  # a pasted block is one message
            )

        items = self.lines.items()
        gone = [i for i, line in enumerate(items) if goes(line)]
        for index in reversed(gone):  # from the end, so the earlier indexes hold
            self.lines.remove(index)
        return len(gone)


def _plain(line: str) -> str:
    return " ".join(line.split())

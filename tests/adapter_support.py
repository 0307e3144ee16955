"""A scripted stand-in for the orchestrator, for the channel-adapter tests.

``ScriptedConversation`` implements the ``bot.types.Conversation`` Protocol: every message it is given
(to reply to, to observe, or as a command) is recorded, and its answers come from a script the test
fills. No mocks: tests assert on what the adapter handed over and on what the fake servers received.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from bot.types import IncomingMessage, Reaction, Reply, StreamSink, Verdict
from tests.fakes._base import WAIT_S, Waitable


@dataclass(frozen=True)
class Command:
    name: str
    argument: str
    message: IncomingMessage


class ScriptedConversation(Waitable):
    """Answers ``reply()`` from ``script`` (then ``echo: <text>``) and ``command()`` with ``<name>: <arg>``.

    A script entry is a ``Reply``, a plain string, an exception to raise, or an async function of the
    message returning one of those (to hold a reply back until the test lets it go). ``stream_parts``
    are sent to a stream sink, when one is given, before the reply returns.
    """

    def __init__(self, *script: Reply | str | BaseException | Callable) -> None:
        self.script = list(script)
        self.command_script: list[str | BaseException | Callable] = []
        self.stream_parts: list[str] = []
        self.observe_error: BaseException | None = None  # raised by every observe() once set
        self.replies: list[IncomingMessage] = []
        self.observed: list[IncomingMessage] = []
        self.commands: list[Command] = []
        self.voice_sessions_ended: list[
            tuple[str, str, str]
        ] = []  # (platform, guild id, channel id)
        self.deleted: list[
            tuple[str, str, tuple[str, ...]]
        ] = []  # (platform, channel id, message ids)
        self.edited: list[IncomingMessage] = []
        self.verdicts: list[
            Verdict
        ] = []  # what ``manners`` answers next, in order (then: answered where listening)
        self.asked_manners: list[tuple[IncomingMessage, bool]] = []
        self.posted_ids: list[tuple[IncomingMessage, tuple[str, ...]]] = []
        self.reactions: list[Reaction] = []
        super().__init__()

    # -- the Conversation Protocol ------------------------------------------------------------------
    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        self._record(self.replies, message)
        answer = self.script.pop(0) if self.script else f"echo: {message.text}"
        if callable(answer):
            answer = await answer(message)
        if isinstance(answer, BaseException):
            raise answer
        if stream is not None:
            for part in self.stream_parts:
                await stream(part)
        return answer if isinstance(answer, Reply) else Reply(text=answer)

    async def observe(self, message: IncomingMessage) -> None:
        self._record(self.observed, message)
        if self.observe_error is not None:
            raise self.observe_error

    async def manners(self, message: IncomingMessage, listening: bool) -> Verdict:
        self._record(self.asked_manners, (message, listening))
        return self.verdicts.pop(0) if self.verdicts else Verdict(listening)

    async def posted(self, message: IncomingMessage, post_ids: tuple[str, ...]) -> None:
        self._record(self.posted_ids, (message, post_ids))

    async def reacted(self, reaction: Reaction) -> None:
        self._record(self.reactions, reaction)

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        self._record(self.commands, Command(name, argument, message))
        answer = self.command_script.pop(0) if self.command_script else f"{name}: {argument}"
        if callable(answer):
            answer = await answer(name, argument)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def voice_ended(self, platform: str, guild_id: str, channel_id: str) -> None:
        self._record(self.voice_sessions_ended, (platform, guild_id, channel_id))

    async def message_deleted(
        self, platform: str, channel_id: str, message_ids: tuple[str, ...]
    ) -> None:
        self._record(self.deleted, (platform, channel_id, message_ids))

    async def message_edited(self, message: IncomingMessage) -> None:
        self._record(self.edited, message)

    # -- waiting ------------------------------------------------------------------------------------
    @property
    def seen(self) -> int:
        """Everything handed over so far, of any kind."""
        return len(self.replies) + len(self.observed) + len(self.commands)

    def _record(self, log: list, item: object) -> None:
        log.append(item)
        self._notify()


async def wait_for_logged_error(
    caplog: pytest.LogCaptureFixture, text: str, timeout: float = WAIT_S
) -> logging.LogRecord:
    """The first captured record carrying an exception whose message contains ``text`` (polled every 10 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in caplog.records if r.exc_info and text in str(r.exc_info[1])]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no logged exception mentioning {text!r} within {timeout}s")
        await asyncio.sleep(0.01)

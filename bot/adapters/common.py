"""Small pieces every adapter needs: the command list, errors, per-chat ordering, who spoke recently.

Nothing here imports a platform library, so the console adapter (and tests) can use it freely.

Errors raised by adapters' ``start()``::

    AdapterError            the channel could not be started
     +-- LoginRejected      the platform refused the token (the message never contains it)
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from ..types import APOLOGY, ERROR_APOLOGY, Conversation, IncomingMessage, Verdict

logger = logging.getLogger(__name__)

__all__ = [
    "APOLOGY",
    "COMMANDS",
    "ERROR_APOLOGY",
    "EXPORT_CAPTION",
    "EXPORT_FILE",
    "AdapterError",
    "ChatLocks",
    "LoginRejected",
    "RecentSpeakers",
    "attachment",
    "deliver",
]

# The slash commands every channel offers, with the one-line help the platforms show.
COMMANDS: dict[str, str] = {
    "start": "Say hello and see what I can do",
    "remember": "Remember something: /remember <text>",
    "forget": "Forget something: /forget <text>",
    "memories": "List what I remember about you",
    "link": "Link this account to another platform (in a private chat): /link [code]",
    "share": "Share what you tell me across servers: /share on|off",
    "export": "Export what I remember about you",
    "checkins": "Let me check in on your plans now and then, in our private chat: /checkins on|off",
    "privacy": "What I keep, and stop it: /privacy [off|on|server off|server on]",
    "about": "What I keep about you, and veto it: /about me | /about veto <id>",
    "persona": "This server's or group's own persona (admins): /persona show|set <text>|reset",
    "timezone": "Your time zone: /timezone Europe/Lisbon (alone: shows it; reset: the default)",
    "remind": "A reminder here at a time: /remind <when> <what>, like /remind Friday at 9 call mum",
    "reminders": "Your reminders: /reminders lists them, /reminders cancel <n> cancels one",
    "manners": "When I speak in this channel or group (admins set it): /manners addressed|chime-in|all",
    "usage": "What my model calls cost: /usage [me|server|all] [days]",
}


EXPORT_FILE = "companion-export.json"
EXPORT_CAPTION = "Everything I store about you, as one JSON file."


def attachment(command: str, answer: str) -> bytes | None:
    """The file a command's answer is sent as, or None to send it as text: ``/export``'s JSON document goes
    whole as ``EXPORT_FILE`` (cut into chat messages it was invalid JSON past the first few thousand characters).
    Its refusals ("ask me in a DM") are text."""
    if command == "export" and answer.lstrip().startswith("{"):
        return answer.encode()
    return None


class AdapterError(Exception):
    """A channel adapter could not start."""


class LoginRejected(AdapterError):
    """The platform refused the bot token."""


class ChatLocks:
    """One lock per chat: a chat's messages are handled in arrival order, different chats in parallel.

    Locks are dropped as soon as nobody holds or waits for them, so the table never grows.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


class RecentSpeakers:
    """The last ``size`` distinct (user id, name) pairs seen in each channel, oldest first."""

    def __init__(self, size: int = 20) -> None:
        self.size = size
        self._channels: dict[str, deque[tuple[str, str]]] = {}

    def others(self, channel_id: str, author_id: str) -> tuple[tuple[str, str], ...]:
        """Who else spoke here recently (the author is left out: they are the message's author)."""
        return tuple(p for p in self._channels.get(channel_id, ()) if p[0] != author_id)

    def saw(self, channel_id: str, author_id: str, name: str) -> None:
        """Record a speaker, moving them to the newest end if already present."""
        recent = self._channels.setdefault(channel_id, deque(maxlen=self.size))
        for pair in [p for p in recent if p[0] == author_id]:
            recent.remove(pair)
        recent.append((author_id, name))


async def deliver(
    conversation: Conversation,
    locks: ChatLocks,
    incoming: IncomingMessage,
    listening: bool,
    answer: Callable[[], Awaitable[None]],
    react: Callable[[str], Awaitable[None]],
) -> None:
    """One chat's messages in order. Spoken to the bot (a DM, a mention, a reply to it): answered. Other group talk
    goes to the conversation's manners first (ORCH-10), a decision on the CPU: answered, or observed (stored for
    history and extraction) with an emoji when a light acknowledgement fits. ``listening``: a channel the operator
    listed for the bot."""
    async with locks.hold(incoming.channel_id):
        verdict = (
            Verdict(True) if incoming.addressed else await conversation.manners(incoming, listening)
        )
        if not verdict.answer:
            await conversation.observe(incoming)
            if verdict.reaction:
                await _reacted(react, verdict.reaction, incoming)
        elif incoming.text or incoming.images:  # a photo alone is a message too (ORCH-11)
            await answer()


async def _reacted(
    react: Callable[[str], Awaitable[None]], emoji: str, incoming: IncomingMessage
) -> None:
    """An acknowledgement is cosmetic: failing to add it is logged, and the message stays stored."""
    try:
        await react(emoji)
    except Exception:
        logger.exception(
            "%s: could not react to a message in %s", incoming.platform, incoming.channel_id
        )

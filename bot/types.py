"""Plain values that cross the boundary between channel adapters and the orchestrator.

Adapters turn a platform event into an ``IncomingMessage`` and send back what the orchestrator
returns; they know nothing of SQL, memory or the LLM. The orchestrator knows nothing of discord or
telegram objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from memory import valid_unicode
from memory.models import Reaction

# The apology when the model failed (ORCH-6) or its answer was cut: the orchestrator says it only after the
# message was stored, so "saved" is true.
# What the person reads when the model gave no words, also when asked once more (issue 45: "…")
NO_ANSWER = "The model gave no answer this time. Your message is saved; try saying it another way."
APOLOGY = "Sorry — I couldn't think straight just now. Your message is saved; please try again in a moment."
# What an adapter says when anything else failed: it cannot know whether the message was stored, so no claim.
ERROR_APOLOGY = (
    "Sorry — something went wrong on my side with that message; please send it again in a moment."
)


@dataclass(frozen=True, slots=True)
class Attachment:
    """An image a person attached (ORCH-11), not yet downloaded: nothing is fetched when the model cannot see or
    the platform's declared size is already over the limit (``bot.images.intake``)."""

    name: str  # the file name as sent ("photo.jpg" for a Telegram photo)
    size: int | None  # bytes, as the platform declares them; None when it does not say
    fetch: Callable[[], Awaitable[bytes]]  # the bytes, from the platform's file server


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    platform: str  # "discord" | "telegram" | "console"
    channel_id: str  # the chat/channel the message came from
    author_id: str  # the platform's user id (not yet our person id)
    author_name: str
    text: str
    guild_id: str | None = None  # Discord guild or Telegram group chat id; None in a DM
    message_id: str | None = None
    participants: tuple[
        tuple[str, str], ...
    ] = ()  # other (platform user id, name) pairs present, if known
    created_at: float | None = None
    modality: str = "text"  # "voice" for a transcribed utterance
    author_is_admin: bool = False  # the author may change this server's lore (Discord manage_guild, Telegram chat admin)
    readable_channels: tuple[
        str, ...
    ] = ()  # other channels of this server the author can read (the adapter knows)
    # the author may write here (a Discord slash command may come from a channel they only read)
    may_post: bool = True
    # Spoken to the bot (a DM, a mention, a reply to it). False for group talk the bot may answer or not: with
    # others present it may then answer [SKIP] and stay silent (VOICE-1; unaddressed text in configured channels).
    addressed: bool = True
    # SEC-5: (platform user id, name) of the accounts this message @mentions or replies to (the bot left out): the
    # platform says who they are, so a fact naming one is tied to that person, whoever else shows the same name
    mentions: tuple[tuple[str, str], ...] = ()
    images: tuple[Attachment, ...] = ()  # ORCH-11: photos and image files attached to it

    def __post_init__(self) -> None:
        # Every adapter builds one: undecodable input (lone surrogates from bytes that were not UTF-8) is
        # replaced here, once, so nothing downstream fails to encode a message the person already sent.
        object.__setattr__(self, "text", valid_unicode(self.text))
        object.__setattr__(self, "author_name", valid_unicode(self.author_name))
        object.__setattr__(
            self,
            "participants",
            tuple((uid, valid_unicode(name)) for uid, name in self.participants),
        )
        object.__setattr__(
            self, "mentions", tuple((uid, valid_unicode(name)) for uid, name in self.mentions)
        )

    @property
    def is_dm(self) -> bool:
        return self.guild_id is None


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    forgotten: tuple[str, ...] = ()  # contents deleted while building this reply (ORCH-3)
    failed: bool = False  # the LLM failed and this is the short apology (ORCH-6)
    failure: Exception | None = None  # why, when ``failed``: what the console explains in a line
    skipped: bool = (
        False  # the model chose to stay silent ([SKIP]); ``text`` is empty, the turn is stored
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """ORCH-10, for a message not spoken to the bot: ``answer`` sends it to ``Conversation.reply``; otherwise it is
    observed, and ``reaction`` (an emoji) is added to it when set: a light acknowledgement instead of a message."""

    answer: bool
    reaction: str | None = None
    score: float = 0.0
    why: str = ""


# Called with each text delta while a reply streams (the console prints them as they come).
StreamSink = Callable[[str], Awaitable[None]]


class Conversation(Protocol):
    """What every adapter talks to (implemented by ``bot.orchestrator.Orchestrator``)."""

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        """Answer a message that is addressed to the bot (the adapter decided it is)."""

    async def observe(self, message: IncomingMessage) -> None:
        """Record a message the bot saw but is not answering (group chatter), for history and extraction."""

    async def manners(self, message: IncomingMessage, listening: bool) -> Verdict:
        """ORCH-10: a group message not spoken to the bot; answer it? ``listening``: a channel the operator listed
        (its mode is chime-in unless its admins chose another; elsewhere addressed)."""

    async def posted(self, message: IncomingMessage, post_ids: tuple[str, ...]) -> None:
        """The reply to ``message`` went out as these platform messages (ORCH-12: a reaction on one finds it)."""

    async def reacted(self, reaction: Reaction) -> None:
        """Someone reacted to a message (ORCH-12); on a reply of the bot it moves the memories that reply used."""

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        """Run a slash command: remember, forget, memories, link, export, start. Needs no LLM."""

    async def voice_ended(self, platform: str, guild_id: str, channel_id: str) -> None:
        """A voice session in this channel ended (leave, empty channel, idle, shutdown): persist what it was about."""

    async def message_deleted(
        self, platform: str, channel_id: str, message_ids: tuple[str, ...]
    ) -> None:
        """Messages were deleted where they were written: they leave the history, with what was learned only from them."""

    async def message_edited(self, message: IncomingMessage) -> None:
        """A message was edited where it was written (``message.message_id`` names it): the stored text is
        replaced and what was learned from it is learned again."""


class Places(Protocol):
    """SEC-7: told by an adapter when the bot is removed from a server or group, or added (back) to one
    (implemented by ``bot.retention.PlaceWatch``)."""

    async def left(self, platform: str, guild_id: str) -> None: ...

    async def joined(self, platform: str, guild_id: str) -> None: ...


class PassThrough:
    """A ``Conversation`` wrapped around another: everything but ``reply`` goes to the inner one unchanged.
    Only the protocol passes: an adapter reads nothing else of what it talks to."""

    def __init__(self, inner: Conversation) -> None:
        self._inner = inner

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        return await self._inner.reply(message, stream)

    async def observe(self, message: IncomingMessage) -> None:
        await self._inner.observe(message)

    async def manners(self, message: IncomingMessage, listening: bool) -> Verdict:
        return await self._inner.manners(message, listening)

    async def posted(self, message: IncomingMessage, post_ids: tuple[str, ...]) -> None:
        await self._inner.posted(message, post_ids)

    async def reacted(self, reaction: Reaction) -> None:
        await self._inner.reacted(reaction)

    async def command(self, name: str, argument: str, message: IncomingMessage) -> str:
        return await self._inner.command(name, argument, message)

    async def voice_ended(self, platform: str, guild_id: str, channel_id: str) -> None:
        await self._inner.voice_ended(platform, guild_id, channel_id)

    async def message_deleted(
        self, platform: str, channel_id: str, message_ids: tuple[str, ...]
    ) -> None:
        await self._inner.message_deleted(platform, channel_id, message_ids)

    async def message_edited(self, message: IncomingMessage) -> None:
        await self._inner.message_edited(message)

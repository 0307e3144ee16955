"""Discord channel (CHAN-1) on discord.py 2.7.

DMs always get an answer. In a server the bot answers when it is @mentioned or when a message replies to one
of its own; any other server message goes to ``Conversation.manners`` (ORCH-10: the place's mode and a decision
on the CPU; the configured ``channels``, and threads under them, start in chime-in) and is answered or passed to
``Conversation.observe``, sometimes with an emoji as a light acknowledgement. An answered message not spoken to
the bot may still get no answer: the model chose silence (``Reply.skipped``) and nothing is sent. The ids of a
reply's posts go to ``Conversation.posted``, and reactions (``on_raw_reaction_add``) to ``Conversation.reacted``.
Bots (itself included) are ignored. While a reply is built the channel shows "typing..."; replies are
split at 2000 characters and never ping anyone (``AllowedMentions.none()``: model output must not be able
to @everyone). Deletes and edits arrive as raw gateway events (so messages no longer cached count too) and
go to ``Conversation.message_deleted`` / ``message_edited``.

Slash commands /remember /forget /memories /link /share /export /privacy /about are synced globally at login and answered
ephemerally. Every message carries the recent speakers of its channel as ``participants``.

A failing event is logged (``on_error``) and, where someone is waiting, answered with a short
apology; the client keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import discord
from discord import app_commands

from bot.types import Attachment, Conversation, IncomingMessage, Places, Reaction

from .common import (
    COMMANDS,
    ERROR_APOLOGY,
    EXPORT_CAPTION,
    EXPORT_FILE,
    AdapterError,
    ChatLocks,
    LoginRejected,
    RecentSpeakers,
    attachment,
    deliver,
)
from .text import split_message

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
# Discord wants an interaction answered within 3 s; a command still running after this is deferred.
DEFER_AFTER_S = 2.0
MAX_COMMAND_PARTS = 3  # a command answer longer than this many messages is sent as a file
_CONVERSATIONAL = (discord.MessageType.default, discord.MessageType.reply)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg")


@dataclass(frozen=True, slots=True)
class Shards:
    """SCALE-1: the shards this process connects (empty: every one) of ``count`` over all the bot's processes.
    Discord sends a server's events to shard ``(guild_id >> 22) % count`` and DMs to shard 0 only."""

    count: int
    ids: tuple[int, ...] = ()


UNKNOWN_MEMBER = (
    10007  # Discord's error code: the user is not (or no longer) a member of the server
)


def default_intents() -> discord.Intents:
    """Guilds, messages and their content; no member list (a privileged intent we do not need)."""
    intents = discord.Intents.default()
    intents.message_content = True
    intents.members = False
    intents.reactions = (
        True  # ORCH-12: a reaction on a reply moves the memories it used (not privileged)
    )
    return intents


class DiscordAdapter:
    """Connects one bot token to a ``Conversation``; ``start()`` logs in and connects, ``stop()`` closes."""

    platform = "discord"

    def __init__(
        self,
        conversation: Conversation,
        token: str,
        *,
        channels: Iterable[str] = (),
        intents: discord.Intents | None = None,
        guild_ready_timeout: float = 2.0,
        ready_timeout: float = 30.0,
        defer_after: float = DEFER_AFTER_S,
        on_named: Callable[[str], None] | None = None,
        shards: Shards | None = None,
        places: Places | None = None,
    ) -> None:
        self._conversation = conversation
        self._places = (
            places  # SEC-7: told when the bot is removed from a server, or added (back) to one
        )
        self._on_named = on_named  # told the bot's own Discord name at login (the persona's name when its file sets none)
        self._token = token
        self._channels = frozenset(str(c) for c in channels)
        self._ready_timeout = ready_timeout
        self._defer_after = defer_after
        self._locks = ChatLocks()
        self._speakers = RecentSpeakers()
        self._task: asyncio.Task[None] | None = None
        intents = intents or default_intents()
        if not intents.message_content:
            logger.warning(
                "discord: the message_content intent is off; server messages will arrive empty"
            )
        self.client = _client(self, intents, guild_ready_timeout, shards)

    # ------------------------------------------------------------------ lifecycle --
    async def start(self) -> None:
        """Log in, sync the slash commands, connect and wait for READY (``ready_timeout``)."""
        try:
            await self.client.login(self._token)
        except discord.LoginFailure:
            await self.client.close()
            raise LoginRejected("discord refused the bot token") from None
        self._task = asyncio.create_task(
            self.client.connect(reconnect=True), name="discord-gateway"
        )
        ready = asyncio.create_task(self.client.wait_until_ready())
        await asyncio.wait(
            {ready, self._task}, timeout=self._ready_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not ready.done():
            ready.cancel()
            failure = (
                self._task.exception() if self._task.done() and not self._task.cancelled() else None
            )
            await self.stop()
            raise AdapterError(
                f"discord did not become ready: {failure or 'timed out'}"
            ) from failure
        logger.info(
            "discord: connected as %s (%d guilds)", self.client.user, len(self.client.guilds)
        )
        if self._on_named is not None and self.client.user is not None:
            self._on_named(self.client.user.display_name)

    async def stop(self) -> None:
        """Close the gateway and HTTP session; safe to call twice."""
        await self.client.close()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, 5)
            except Exception:
                logger.exception("discord: the gateway task ended with an error")

    async def send_direct(self, channel_id: str, text: str) -> None:
        """A message the bot starts (ORCH-8 check-ins), to a DM only: the channel is looked up and anything else refused."""
        channel = await self.client.fetch_channel(int(channel_id))
        if not isinstance(channel, discord.DMChannel):
            raise ValueError(
                f"discord: channel {channel_id} is not a DM; only a DM gets a message the bot starts"
            )
        for part in split_message(text, MESSAGE_LIMIT):
            await channel.send(part)

    async def send_to_channel(
        self, channel_id: str, text: str, mention_user_id: str | None = None
    ) -> None:
        """A reminder (ORCH-13) in the channel or DM it was asked in; in a server it pings the asker and no one else."""
        channel = self.client.get_channel(int(channel_id)) or await self.client.fetch_channel(
            int(channel_id)
        )
        if not isinstance(channel, discord.abc.Messageable):
            raise ValueError(f"discord: channel {channel_id} takes no messages")
        users = [discord.Object(int(mention_user_id))] if mention_user_id else False
        only = discord.AllowedMentions(everyone=False, roles=False, users=users)
        prefix = (
            f"<@{mention_user_id}> "
            if mention_user_id and not isinstance(channel, discord.DMChannel)
            else ""
        )
        for part in split_message(prefix + text, MESSAGE_LIMIT):
            await channel.send(part, allowed_mentions=only)

    async def send_to_user(self, user_id: str, text: str) -> None:
        """To a person's DM, opened if needed (a reminder that could not be delivered where it was asked)."""
        channel = await self.client.create_dm(discord.Object(int(user_id)))
        for part in split_message(text, MESSAGE_LIMIT):
            await channel.send(part)

    async def member_here(self, channel_id: str, user_id: str) -> bool | None:
        """Whether the user is still a member of the channel's server (a reminder's setter, asked
        when it fires): one REST lookup, so no member list (a privileged intent) is needed, and a
        leave or ban while the bot was down counts. False: Unknown Member; None: Discord would not
        say. A DM: yes."""
        try:
            channel = self.client.get_channel(int(channel_id)) or await self.client.fetch_channel(
                int(channel_id)
            )
            guild = getattr(channel, "guild", None)
            if guild is None:
                return True
            await guild.fetch_member(int(user_id))
        except discord.NotFound as exc:
            return False if exc.code == UNKNOWN_MEMBER else None
        except discord.HTTPException as exc:
            logger.warning("discord: membership of %s in %s unknown (%s)", user_id, channel_id, exc)
            return None
        return True

    # --------------------------------------------------------------------- places --
    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """Kicked, banned or the server deleted (not a mere outage: that is ``on_guild_unavailable``)."""
        if self._places is not None:
            await self._places.left(self.platform, str(guild.id))

    async def on_guild_join(self, guild: discord.Guild) -> None:
        """Added to a server, or seen in one at connect (added back while the bot was down)."""
        if self._places is not None:
            await self._places.joined(self.platform, str(guild.id))

    # ------------------------------------------------------------------- messages --
    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or message.author == self.client.user or message.webhook_id:
            return  # our own echo, other bots and webhooks: answering them could loop
        if message.type not in _CONVERSATIONAL:
            return  # joins, pins, boosts...
        listening, spoken_to, text = self._addressed(message)
        incoming = self._incoming(message, text, spoken_to)
        answer, react = (lambda: self._answer(message, incoming)), message.add_reaction
        await deliver(self._conversation, self._locks, incoming, listening, answer, react)

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        """ORCH-12: a person's reaction (the bot's own and other bots' are left out); raw, so a reply sent before a
        restart counts too. A custom emoji carries no meaning here and is passed by name."""
        me = self.client.user
        if (me is not None and payload.user_id == me.id) or (
            payload.member is not None and payload.member.bot
        ):
            return
        guild = str(payload.guild_id) if payload.guild_id else None
        emoji = payload.emoji.name or ""
        reaction = Reaction(
            "discord",
            str(payload.channel_id),
            str(payload.message_id),
            str(payload.user_id),
            emoji,
            guild,
            by_admin=_manages(payload.member),
        )
        async with self._locks.hold(reaction.channel_id):
            await self._conversation.reacted(reaction)

    async def _answer(self, message: discord.Message, incoming: IncomingMessage) -> None:
        async with _typing(message.channel):
            try:
                text = (await self._conversation.reply(incoming)).text
            except Exception:
                # The conversation apologises for LLM failures itself (ORCH-6); this covers anything
                # else, so the person is not left waiting in silence.
                logger.exception("discord: reply failed in channel %s", incoming.channel_id)
                text = ERROR_APOLOGY
        posts = []
        for i, part in enumerate(split_message(text, MESSAGE_LIMIT)):
            if i == 0 and message.guild is not None:
                # In a busy server the first part answers the message visibly; DMs need no threading.
                reference = message.to_reference(fail_if_not_exists=False)
                posts.append(
                    await message.channel.send(part, reference=reference, mention_author=False)
                )
            else:
                posts.append(await message.channel.send(part))
        await self._conversation.posted(incoming, tuple(str(p.id) for p in posts))

    # ---------------------------------------------------- edits and deletes at the source --
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        """Raw, so a message no longer in discord.py's cache (sent before a restart) counts too."""
        await self._deleted(payload.channel_id, [payload.message_id])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        await self._deleted(payload.channel_id, sorted(payload.message_ids))

    async def _deleted(self, channel_id: int, message_ids: list[int]) -> None:
        async with self._locks.hold(str(channel_id)):
            await self._conversation.message_deleted(
                "discord", str(channel_id), tuple(str(i) for i in message_ids)
            )

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        message = payload.message
        if message.author.bot or message.webhook_id or message.type not in _CONVERSATIONAL:
            return  # the bot's own edits (streaming) and other bots' are not people's words
        if "content" not in payload.data:
            return  # an embed unfurled or a flag changed: the words are the same
        _, spoken_to, text = self._addressed(message)
        incoming = self._incoming(message, text, spoken_to)
        async with self._locks.hold(incoming.channel_id):
            await self._conversation.message_edited(incoming)

    def _addressed(self, message: discord.Message) -> tuple[bool, bool, str]:
        """Is the message for the bot, was it spoken to (a DM, a mention, a reply to it), and its text with the
        bot's mention removed. A configured channel's messages are all for the bot, but one not spoken to may be
        answered with silence when others are talking there ([SKIP], VOICE-1)."""
        me = self.client.user
        if (
            me is None
        ):  # discord.py dispatches messages only after login, so this is a bug, not a state to handle
            raise RuntimeError("discord: a message arrived before the bot knew its own user")
        text = _readable(message, me.id)
        ref = message.reference
        replied = ref.resolved if ref is not None else None
        spoken_to = (
            message.guild is None
            or any(u.id == me.id for u in message.mentions)
            or (isinstance(replied, discord.Message) and replied.author.id == me.id)
        )
        channel = message.channel
        configured = bool(
            {str(channel.id), str(getattr(channel, "parent_id", None))} & self._channels
        )
        return spoken_to or configured, spoken_to, text

    def _incoming(
        self, message: discord.Message, text: str, spoken_to: bool = True
    ) -> IncomingMessage:
        channel_id, author_id = str(message.channel.id), str(message.author.id)
        name = message.author.display_name
        participants = self._speakers.others(channel_id, author_id)
        self._speakers.saw(channel_id, author_id, name)
        return IncomingMessage(
            platform="discord",
            channel_id=channel_id,
            author_id=author_id,
            author_name=name,
            text=text,
            guild_id=str(message.guild.id) if message.guild else None,
            message_id=str(message.id),
            participants=participants,
            created_at=message.created_at.timestamp(),
            addressed=spoken_to,
            mentions=_pointed(message),
            images=_images(message),
            **_rights(message.guild, message.author),
        )

    # -------------------------------------------------------------- slash commands --
    def _register_commands(self, tree: app_commands.CommandTree) -> None:
        """Add /remember /forget /memories /link /share /export /privacy /about to ``tree`` (synced in ``setup_hook``)."""

        @tree.command(name="remember", description=COMMANDS["remember"])
        @app_commands.describe(text="What I should remember")
        async def remember(interaction: discord.Interaction, text: str) -> None:
            await self._run_command(interaction, "remember", text)

        @tree.command(name="forget", description=COMMANDS["forget"])
        @app_commands.describe(text="What I should forget")
        async def forget(interaction: discord.Interaction, text: str) -> None:
            await self._run_command(interaction, "forget", text)

        @tree.command(name="memories", description=COMMANDS["memories"])
        async def memories(interaction: discord.Interaction) -> None:
            await self._run_command(interaction, "memories", "")

        @tree.command(name="link", description=COMMANDS["link"])
        @app_commands.describe(
            code="A code from /link on the other platform; leave empty to get one"
        )
        async def link(interaction: discord.Interaction, code: str | None = None) -> None:
            await self._run_command(interaction, "link", code or "")

        @tree.command(name="share", description=COMMANDS["share"])
        @app_commands.describe(
            choice="on: what you say here may come up in your other servers; off: it stays here"
        )
        async def share(
            interaction: discord.Interaction, choice: Literal["on", "off"] | None = None
        ) -> None:
            await self._run_command(interaction, "share", choice or "")

        @tree.command(name="checkins", description=COMMANDS["checkins"])
        @app_commands.describe(
            choice="on: I may message you first to follow up on your plans; off: never (the default)"
        )
        async def checkins(
            interaction: discord.Interaction, choice: Literal["on", "off"] | None = None
        ) -> None:
            await self._run_command(interaction, "checkins", choice or "")

        @tree.command(name="export", description=COMMANDS["export"])
        async def export(interaction: discord.Interaction) -> None:
            await self._run_command(interaction, "export", "")

        @tree.command(name="privacy", description=COMMANDS["privacy"])
        @app_commands.describe(
            choice="off: stop remembering you; on: remember again; server off|on: admins, for this server"
        )
        async def privacy(
            interaction: discord.Interaction,
            choice: Literal["off", "on", "server off", "server on"] | None = None,
        ) -> None:
            await self._run_command(interaction, "privacy", choice or "")

        @tree.command(name="about", description=COMMANDS["about"])
        @app_commands.describe(veto="An id from your /about list: I forget that memory")
        async def about(interaction: discord.Interaction, veto: str | None = None) -> None:
            await self._run_command(interaction, "about", f"veto {veto}" if veto else "me")

        @tree.command(name="persona", description=COMMANDS["persona"])
        @app_commands.describe(
            action="show, set or reset this server's persona", text="The persona text (with set)"
        )
        async def persona(
            interaction: discord.Interaction,
            action: Literal["show", "set", "reset"] = "show",
            text: str = "",
        ) -> None:
            await self._run_command(interaction, "persona", f"{action} {text}".strip())

        @tree.command(name="timezone", description=COMMANDS["timezone"])
        @app_commands.describe(
            zone="A time zone name like Europe/Lisbon; empty shows yours, reset goes back to the default"
        )
        async def timezone(interaction: discord.Interaction, zone: str | None = None) -> None:
            await self._run_command(interaction, "timezone", zone or "")

        @tree.command(name="remind", description=COMMANDS["remind"])
        @app_commands.describe(
            when="When, in your time zone: 'Friday at 9', 'in 2 hours', 'every Monday'",
            what="What to remind you of",
        )
        async def remind(interaction: discord.Interaction, when: str, what: str) -> None:
            await self._run_command(interaction, "remind", f"{when} {what}")

        @tree.command(name="manners", description=COMMANDS["manners"])
        @app_commands.describe(
            mode="addressed: only when spoken to; chime-in: also a question my way; all: every message"
        )
        async def manners(
            interaction: discord.Interaction,
            mode: Literal["addressed", "chime-in", "all"] | None = None,
        ) -> None:
            await self._run_command(interaction, "manners", mode or "")

        @tree.command(name="reminders", description=COMMANDS["reminders"])
        @app_commands.describe(cancel="The number of a reminder in your list, to cancel it")
        async def reminders(interaction: discord.Interaction, cancel: int | None = None) -> None:
            await self._run_command(
                interaction, "reminders", f"cancel {cancel}" if cancel is not None else ""
            )

        @tree.command(name="usage", description=COMMANDS["usage"])
        @app_commands.describe(
            view="me, server (its admins) or all (the owner)",
            days="How many days, ending today (1 to 31)",
        )
        async def usage(
            interaction: discord.Interaction,
            view: Literal["me", "server", "all"] | None = None,
            days: int | None = None,
        ) -> None:
            await self._run_command(interaction, "usage", f"{view or ''} {days or ''}".strip())

    async def _run_command(
        self, interaction: discord.Interaction, name: str, argument: str
    ) -> None:
        """Run a command and answer ephemerally, deferring first if it is slow."""
        incoming = self._interaction_incoming(interaction, f"/{name} {argument}".strip())
        work = asyncio.ensure_future(self._conversation.command(name, argument, incoming))
        done, _ = await asyncio.wait({work}, timeout=self._defer_after)
        if not done:
            await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            text = await work
        except Exception:
            logger.exception("discord: /%s failed for user %s", name, incoming.author_id)
            text = ERROR_APOLOGY
        document = attachment(name, text)
        if (
            document is not None
        ):  # whole, as a file: cut into messages it would not be a document any more
            await _respond(
                interaction,
                EXPORT_CAPTION,
                discord.File(io.BytesIO(document), filename=EXPORT_FILE),
            )
            return
        parts = split_message(text, MESSAGE_LIMIT) or ["(nothing)"]
        if len(parts) > MAX_COMMAND_PARTS:
            # A long answer is easier to keep as a file than as a wall of messages.
            long_answer = discord.File(io.BytesIO(text.encode()), filename=f"{name}.txt")
            await _respond(
                interaction, f"/{name}: the answer is long, so it is attached.", long_answer
            )
            return
        for part in parts:
            await _respond(interaction, part)

    def _interaction_incoming(self, interaction: discord.Interaction, text: str) -> IncomingMessage:
        channel_id, author_id = str(interaction.channel_id), str(interaction.user.id)
        return IncomingMessage(
            platform="discord",
            channel_id=channel_id,
            author_id=author_id,
            author_name=interaction.user.display_name,
            text=text,
            guild_id=str(interaction.guild_id) if interaction.guild_id else None,
            message_id=str(interaction.id),
            participants=self._speakers.others(channel_id, author_id),
            created_at=interaction.created_at.timestamp(),
            may_post=_may_post(interaction),
            **_rights(interaction.guild, interaction.user),
        )


def _client(
    adapter: DiscordAdapter,
    intents: discord.Intents,
    guild_ready_timeout: float,
    shards: Shards | None,
) -> discord.Client:
    """One gateway connection, or discord.py's sharded client for the given shards (each shard its own connection)."""
    options: dict[str, Any] = {"intents": intents, "guild_ready_timeout": guild_ready_timeout}
    if shards is None:
        return _Client(adapter, **options)
    return _ShardedClient(
        adapter, shard_count=shards.count, shard_ids=list(shards.ids) or None, **options
    )


class _Events:
    """What the discord.py client does with events: hand each to the adapter (shared by the plain and sharded client)."""

    adapter: DiscordAdapter
    tree: app_commands.CommandTree

    def _listen(self, adapter: DiscordAdapter) -> None:
        self.adapter = adapter
        self.tree = app_commands.CommandTree(self)  # type: ignore[arg-type]  # mixed into a discord.Client below
        self.tree.error(self._on_command_error)
        adapter._register_commands(self.tree)

    async def setup_hook(self) -> None:
        try:
            synced = await self.tree.sync()
        except discord.HTTPException:
            # Commands from an earlier sync keep working; messages do not depend on this.
            logger.exception("discord: could not sync slash commands")
        else:
            logger.info("discord: synced %d slash commands", len(synced))

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter.on_message(message)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        await self.adapter.on_raw_message_delete(payload)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await self.adapter.on_guild_remove(guild)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.adapter.on_guild_join(guild)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        await self.adapter.on_guild_join(guild)

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        await self.adapter.on_raw_bulk_message_delete(payload)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        await self.adapter.on_raw_message_edit(payload)

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        await self.adapter.on_raw_reaction_add(payload)

    async def on_error(self, event_method: str, /, *args: object, **kwargs: object) -> None:
        """discord.py calls this inside its ``except``: log the event's failure and carry on."""
        logger.exception("discord: %s failed", event_method)

    async def _on_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        logger.error(
            "discord: slash command %s failed",
            interaction.command and interaction.command.name,
            exc_info=error,
        )


class _Client(_Events, discord.Client):
    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(allowed_mentions=discord.AllowedMentions.none(), **options)
        self._listen(adapter)


class _ShardedClient(_Events, discord.AutoShardedClient):
    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(allowed_mentions=discord.AllowedMentions.none(), **options)
        self._listen(adapter)


def _rights(guild: discord.Guild | None, author: discord.abc.User) -> dict[str, Any]:
    """What the author may do in this server (SEC-1): change its lore (manage_guild), and which text
    channels they can read (the memory tools read only those). Unknown permissions mean no extra rights."""
    if guild is None or not isinstance(author, discord.Member):
        return {}
    try:
        readable = tuple(
            str(c.id) for c in guild.text_channels if c.permissions_for(author).read_messages
        )
        return {
            "author_is_admin": author.guild_permissions.manage_guild,
            "readable_channels": readable,
        }
    except (
        AttributeError,
        TypeError,
    ):  # a guild without its roles cached: permissions cannot be computed
        logger.warning(
            "discord: permissions of %s in guild %s unknown; treating as a plain member",
            author.id,
            guild.id,
        )
        return {}


def _may_post(interaction: discord.Interaction) -> bool:
    """Whether the member may write in the channel a slash command came from, read from the server's
    roles and overwrites as ``_rights`` reads what they may read (a /remind posts there for them).
    In a DM, yes; in a server whose permissions are unknown, no."""
    channel, author = interaction.channel, interaction.user
    if interaction.guild is None or not isinstance(author, discord.Member):
        return True
    try:
        allowed = channel.permissions_for(author)  # type: ignore[union-attr]
    except (AttributeError, TypeError):  # no channel, or its guild's roles not cached
        return False
    return (
        allowed.send_messages_in_threads
        if isinstance(channel, discord.Thread)
        else allowed.send_messages
    )


def _manages(member: discord.Member | None) -> bool:
    """Whether a reacting member may change the server's lore (ORCH-12: a reaction moves its
    lore only then); unknown permissions: no."""
    try:
        return member is not None and bool(member.guild_permissions.manage_guild)
    except (AttributeError, TypeError):  # a guild without its roles cached
        return False


async def _respond(
    interaction: discord.Interaction, content: str, file: discord.File | None = None
) -> None:
    """An ephemeral answer: the interaction response first, followups after (or after a defer)."""
    attachment = file if file is not None else discord.utils.MISSING  # discord.py's own "not given"
    if interaction.response.is_done():
        await interaction.followup.send(content, ephemeral=True, file=attachment)
    else:
        await interaction.response.send_message(content, ephemeral=True, file=attachment)


def _pointed(message: discord.Message) -> tuple[tuple[str, str], ...]:
    """The people this message @mentions or replies to (bots left out), by account: SEC-5 ties a fact about one of
    them to that account, never to whoever else shows the same name."""
    ref = message.reference
    replied = ref.resolved if ref is not None else None
    users = [*message.mentions, *([replied.author] if isinstance(replied, discord.Message) else [])]
    return tuple(
        dict.fromkeys(
            (str(u.id), u.display_name) for u in users if not u.bot and u.id != message.author.id
        )
    )


def _images(message: discord.Message) -> tuple[Attachment, ...]:
    """ORCH-11: the attachments Discord says are images (or named like one: older uploads carry no type). Fetched
    from the CDN only if the model can see; their bytes are checked again (``bot.images.intake``)."""
    return tuple(
        Attachment(a.filename, a.size, a.read) for a in message.attachments if _is_image(a)
    )


def _is_image(attachment: discord.Attachment) -> bool:
    kind = (attachment.content_type or "").lower()
    return kind.startswith("image/") or (
        not kind and attachment.filename.lower().endswith(IMAGE_SUFFIXES)
    )


def _readable(message: discord.Message, bot_id: int) -> str:
    """The content without the bot's mention, other user mentions shown as @name."""
    text = re.sub(rf"[ \t]*<@!?{bot_id}>[,:]?[ \t]*", " ", message.content)
    for user in message.mentions:
        if user.id != bot_id:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    return text.strip()


@contextlib.asynccontextmanager
async def _typing(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """``channel.typing()`` (refreshed by discord.py), except that failing to show it never costs the reply."""
    typing = channel.typing()
    try:
        await typing.__aenter__()
        entered = True
    except discord.HTTPException as exc:
        logger.warning("discord: could not show typing in %s: %s", getattr(channel, "id", "?"), exc)
        entered = False
    try:
        yield
    finally:
        if entered:
            await typing.__aexit__(None, None, None)

"""Telegram channel (CHAN-2) on python-telegram-bot 22, polling for updates.

Private chats always get an answer. In groups the bot answers when it is @mentioned or when someone
replies to one of its messages; everything else said in the group goes to ``Conversation.manners`` (ORCH-10:
the group's mode, a decision on the CPU) and is answered or passed to ``Conversation.observe`` so the bot still
remembers the conversation (sometimes with an emoji reaction as a light acknowledgement). Reactions people add
go to ``Conversation.reacted`` (ORCH-12). Commands (/start /remember
/forget /memories /link /export) go to ``Conversation.command`` with the rest of the text as the
argument. Replies are plain text (no parse mode: model output is not valid Telegram HTML/Markdown),
split at 4096 characters, preceded by a "typing..." action that is refreshed while the reply is built.
An edited message goes to ``Conversation.message_edited`` (the Bot API reports no deletes).

Updates are handled concurrently across chats but in order within a chat (``ChatLocks``). A failing
handler is logged and answered with a short apology; it never stops polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator

from telegram import (
    BotCommand,
    Chat,
    Document,
    Message,
    MessageEntity,
    PhotoSize,
    ReactionTypeEmoji,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatMemberStatus, ChatType
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    MessageReactionHandler,
    filters,
)

from bot.types import Attachment, Conversation, IncomingMessage, Places, Reaction

from .common import (
    COMMANDS,
    ERROR_APOLOGY,
    EXPORT_CAPTION,
    EXPORT_FILE,
    ChatLocks,
    LoginRejected,
    RecentSpeakers,
    attachment,
    deliver,
)
from .text import split_message

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096
ADMINS_TTL_S = 300.0
TYPING_INTERVAL_S = 4.0  # Telegram shows a chat action for about 5 seconds
_URL_LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot")
PHOTO_SIDE = 1600  # the largest size a photo is fetched at: models scale to ~1,500 px (OpenAI's high detail: 2048, then 768 short)
_COMMAND = re.compile(r"^/(?P<name>\w+)(?:@\w+)?(?:\s+(?P<arg>.*))?$", re.DOTALL)


class TelegramAdapter:
    """Connects one bot token to a ``Conversation``; ``start()`` begins polling, ``stop()`` ends it."""

    platform = "telegram"

    def __init__(
        self,
        conversation: Conversation,
        token: str,
        *,
        base_url: str | None = None,
        base_file_url: str | None = None,
        typing_interval: float = TYPING_INTERVAL_S,
        places: Places | None = None,
    ) -> None:
        self._conversation = conversation
        self._places = (
            places  # SEC-7: told when the bot is removed from a group, or added (back) to one
        )
        self._typing_interval = typing_interval
        self._locks = ChatLocks()
        self._speakers = RecentSpeakers()
        self._admins: dict[int, tuple[float, frozenset[int]]] = {}
        # Telegram URLs contain the token: PTB logs them at DEBUG, httpx at INFO. Filtered from here on.
        self._redact = _RedactToken(token)
        for name in _URL_LOGGERS:
            logging.getLogger(name).addFilter(self._redact)
        builder = ApplicationBuilder().token(token).concurrent_updates(True)
        if base_url:
            builder = builder.base_url(base_url)
        if base_file_url:
            builder = builder.base_file_url(base_file_url)
        self.app: Application = builder.build()
        # PTB hands edited messages to command and message handlers too: an edit must not run a command or
        # be answered as a new message; it replaces what was stored (``_on_edit``).
        fresh = filters.UpdateType.MESSAGE
        self.app.add_handlers(
            [CommandHandler(name, self._on_command, filters=fresh) for name in COMMANDS]
        )
        # ORCH-11: photos and image files, with a caption or not
        said = filters.TEXT | filters.PHOTO | filters.Document.IMAGE
        self.app.add_handler(MessageHandler(fresh & said & ~filters.COMMAND, self._on_text))
        self.app.add_handler(
            MessageHandler(filters.UpdateType.EDITED_MESSAGE & filters.TEXT, self._on_edit)
        )
        self.app.add_handler(
            ChatMemberHandler(self._on_membership, ChatMemberHandler.MY_CHAT_MEMBER)
        )
        self.app.add_handler(
            MessageReactionHandler(
                self._on_reaction,
                message_reaction_types=MessageReactionHandler.MESSAGE_REACTION_UPDATED,
            )
        )
        self.app.add_error_handler(self._on_error)

    # ------------------------------------------------------------------ lifecycle --
    async def start(self) -> None:
        """Log in (getMe), announce the commands and start polling; ``LoginRejected`` for a bad token."""
        try:
            await self._initialize()
            await self.app.bot.set_my_commands([BotCommand(n, d) for n, d in COMMANDS.items()])
            await self.app.start()
            assert self.app.updater is not None, (
                "the builder in __init__ keeps PTB's default updater"
            )
            # my_chat_member: the bot removed or added (SEC-7); message_reaction: a reaction on a reply (ORCH-12; Telegram
            # sends it in groups only where the bot is an admin)
            updates = ["message", "edited_message", "my_chat_member", "message_reaction"]
            await self.app.updater.start_polling(
                drop_pending_updates=False, allowed_updates=updates
            )
        except BaseException:
            await self.stop()
            raise
        logger.info("telegram: polling as @%s", self.app.bot.username)

    async def _initialize(self) -> None:
        try:
            await self.app.initialize()
        except InvalidToken:
            # PTB's message quotes the token; raise one without it, and without the chained original.
            raise LoginRejected("telegram refused the bot token") from None

    async def stop(self) -> None:
        """Stop polling, let running handlers finish, close the HTTP pools; safe to call twice."""
        try:
            if self.app.updater is not None and self.app.updater.running:
                await self.app.updater.stop()
            if self.app.running:
                await self.app.stop()
            await self.app.shutdown()
        finally:
            for name in _URL_LOGGERS:
                logging.getLogger(name).removeFilter(self._redact)

    async def send_direct(self, channel_id: str, text: str) -> None:
        """A message the bot starts (ORCH-8 check-ins), to a private chat only: Telegram gives groups negative ids."""
        chat_id = int(channel_id)
        if chat_id <= 0:
            raise ValueError(
                f"telegram: {chat_id} is a group; only a private chat gets a message the bot starts"
            )
        for part in split_message(text, MESSAGE_LIMIT):
            await self.app.bot.send_message(chat_id, part)

    async def send_to_channel(
        self, channel_id: str, text: str, mention_user_id: str | None = None
    ) -> None:
        """A reminder (ORCH-13) in the chat it was asked in, private or group (it was said there)."""
        for part in split_message(text, MESSAGE_LIMIT):
            await self.app.bot.send_message(int(channel_id), part)

    async def send_to_user(self, user_id: str, text: str) -> None:
        """To a person's private chat, whose id is their user id (a reminder that could not be delivered)."""
        await self.send_direct(user_id, text)

    async def member_here(self, channel_id: str, user_id: str) -> bool | None:
        """Whether the user is still in the group (a reminder's setter, asked when it fires): False
        once they left or were banned; None when Telegram would not say. A private chat: yes."""
        if int(channel_id) > 0:
            return True
        try:
            member = await self.app.bot.get_chat_member(int(channel_id), int(user_id))
        except TelegramError as exc:
            logger.warning(
                "telegram: membership of %s in %s unknown (%s)", user_id, channel_id, exc
            )
            return None
        if member.status in (ChatMemberStatus.LEFT, ChatMemberStatus.BANNED):
            return False
        return bool(getattr(member, "is_member", True))  # a restricted member may have left

    # ------------------------------------------------------------------- handlers --
    async def _on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not (message.text or _images(message)) or message.from_user is None:
            return
        addressed, text = self._addressed(message)
        incoming = self._incoming(
            message, message.from_user, text, await self._is_admin(message), addressed
        )
        answer = lambda: self._answer(message, incoming)  # noqa: E731  # one line, as deliver takes it
        await deliver(
            self._conversation,
            self._locks,
            incoming,
            False,
            answer,
            lambda emoji: self._react(message, emoji),
        )

    async def _react(self, message: Message, emoji: str) -> None:
        await message.set_reaction(ReactionTypeEmoji(emoji))

    async def _on_reaction(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """ORCH-12: emoji a person added to a message (anonymous admins' reactions carry no user, and are left out)."""
        change = update.message_reaction
        if change is None or change.user is None or change.user.is_bot:
            return
        before = {r.emoji for r in change.old_reaction if isinstance(r, ReactionTypeEmoji)}
        added = [
            r.emoji
            for r in change.new_reaction
            if isinstance(r, ReactionTypeEmoji) and r.emoji not in before
        ]
        chat = change.chat
        guild = None if chat.type == ChatType.PRIVATE else str(chat.id)
        admin = bool(added) and await self._is_admin_of(chat, change.user)
        async with self._locks.hold(str(chat.id)):
            for emoji in added:
                reaction = Reaction(
                    "telegram",
                    str(chat.id),
                    str(change.message_id),
                    str(change.user.id),
                    emoji,
                    guild,
                    by_admin=admin,
                )
                await self._conversation.reacted(reaction)

    async def _on_edit(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.edited_message
        if message is None or not message.text or message.from_user is None:
            return
        _, text = self._addressed(message)
        incoming = self._incoming(message, message.from_user, text, await self._is_admin(message))
        async with self._locks.hold(incoming.channel_id):
            await self._conversation.message_edited(incoming)

    async def _on_membership(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """SEC-7: the bot's own membership of a group changed: removed (left, kicked) or added (back). A private
        chat's (the person blocked the bot) is not a place: their DM is theirs to forget."""
        change = update.my_chat_member
        if change is None or self._places is None or change.chat.type == ChatType.PRIVATE:
            return
        status = change.new_chat_member.status
        if status in (ChatMemberStatus.LEFT, ChatMemberStatus.BANNED):
            await self._places.left(self.platform, str(change.chat.id))
        elif status in (
            ChatMemberStatus.MEMBER,
            ChatMemberStatus.ADMINISTRATOR,
            ChatMemberStatus.RESTRICTED,
        ):
            await self._places.joined(self.platform, str(change.chat.id))

    async def _on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text or message.from_user is None:
            return
        match = _COMMAND.match(message.text)
        if match is None:
            return
        incoming = self._incoming(
            message, message.from_user, message.text, await self._is_admin(message)
        )
        name = match["name"].lower()
        async with self._locks.hold(incoming.channel_id):
            try:
                text = await self._conversation.command(
                    name, (match["arg"] or "").strip(), incoming
                )
            except Exception:
                logger.exception(
                    "telegram: /%s failed in chat %s", match["name"], incoming.channel_id
                )
                text = ERROR_APOLOGY
            document = attachment(name, text)
            if document is None:
                await self._send(message, text)
            else:  # whole, as a file: cut into messages it would not be a document any more
                await message.reply_document(document, filename=EXPORT_FILE, caption=EXPORT_CAPTION)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Whatever escaped a handler (or polling) is logged; PTB keeps running."""
        logger.error("telegram: error while handling an update", exc_info=context.error)

    # -------------------------------------------------------------------- helpers --
    async def _answer(self, message: Message, incoming: IncomingMessage) -> None:
        async with self._typing(message):
            try:
                reply = await self._conversation.reply(incoming)
                text = reply.text
            except Exception:
                # The conversation is expected to apologise for LLM failures itself (ORCH-6); this is the
                # last line for anything else, so the person is not left waiting in silence.
                logger.exception("telegram: reply failed in chat %s", incoming.channel_id)
                text = ERROR_APOLOGY
        posts = await self._send(message, text)
        await self._conversation.posted(incoming, posts)

    async def _send(self, message: Message, text: str) -> tuple[str, ...]:
        # In groups the first part quotes the message it answers, so the thread stays readable.
        quote = message.chat.type != ChatType.PRIVATE
        posts = []
        for i, part in enumerate(split_message(text, MESSAGE_LIMIT)):
            posts.append(
                await message.reply_text(
                    part, do_quote=quote and i == 0, allow_sending_without_reply=True
                )
            )
        return tuple(str(p.message_id) for p in posts)

    @contextlib.asynccontextmanager
    async def _typing(self, message: Message) -> AsyncIterator[None]:
        """Show "typing..." now and every few seconds until the block ends."""
        await self._send_typing(message)
        keeper = asyncio.create_task(self._keep_typing(message))
        try:
            yield
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _keep_typing(self, message: Message) -> None:
        while True:
            await asyncio.sleep(self._typing_interval)
            await self._send_typing(message)

    async def _send_typing(self, message: Message) -> None:
        try:
            await message.reply_chat_action(ChatAction.TYPING)
        except TelegramError as exc:  # cosmetic: a missing typing indicator must not cost the reply
            logger.warning("telegram: could not send typing to chat %s: %s", message.chat_id, exc)

    def _addressed(self, message: Message) -> tuple[bool, str]:
        """Is the message for the bot, and its text without the bot's @mention."""
        text = message.text or message.caption or ""  # a photo's words are its caption
        if message.chat.type == ChatType.PRIVATE:
            return True, text
        bot = self.app.bot
        handle = f"@{bot.username}".lower()
        parse = message.parse_entities if message.text else message.parse_caption_entities
        mentions = parse([MessageEntity.MENTION]).values()
        if any(m.lower() == handle for m in mentions):
            pattern = re.compile(rf"\s*@{re.escape(bot.username)}\b[,:]?\s*", re.IGNORECASE)
            return True, pattern.sub(" ", text).strip()
        replied = message.reply_to_message
        to_bot = (
            replied is not None and replied.from_user is not None and replied.from_user.id == bot.id
        )
        return to_bot, text

    async def _is_admin(self, message: Message) -> bool:
        """Group admins may change the group's lore (SEC-1); asked of Telegram once per chat every few minutes."""
        return await self._is_admin_of(message.chat, message.from_user)

    async def _is_admin_of(self, chat: Chat, user: User | None) -> bool:
        """Whether ``user`` is one of the group's admins (a private chat has none)."""
        if chat.type == ChatType.PRIVATE or user is None:
            return False
        cached = self._admins.get(chat.id)
        now = time.monotonic()
        if cached is None or now - cached[0] > ADMINS_TTL_S:
            try:
                admins = await chat.get_administrators()
            except TelegramError as exc:
                logger.warning(
                    "telegram: could not read the admins of chat %s (%s); nobody is treated as admin",
                    chat.id,
                    exc,
                )
                return False
            cached = (now, frozenset(a.user.id for a in admins))
            self._admins[chat.id] = cached
        return user.id in cached[1]

    def _incoming(
        self, message: Message, user: User, text: str, admin: bool = False, addressed: bool = True
    ) -> IncomingMessage:
        chat = message.chat
        channel_id, author_id = str(chat.id), str(user.id)
        name = user.first_name or user.username or author_id
        participants = self._speakers.others(channel_id, author_id)
        self._speakers.saw(channel_id, author_id, name)
        return IncomingMessage(
            platform="telegram",
            channel_id=channel_id,
            author_id=author_id,
            author_name=name,
            text=text,
            guild_id=None if chat.type == ChatType.PRIVATE else str(chat.id),
            message_id=str(message.message_id),
            participants=participants,
            author_is_admin=admin,
            created_at=message.date.timestamp() if message.date else None,
            addressed=addressed,
            mentions=_pointed(message, user),
            images=_images(message),
        )


def _images(message: Message) -> tuple[Attachment, ...]:
    """ORCH-11: a photo (one size of it: ``_fitting``) or a document Telegram calls an image, fetched only if the
    model can see (getFile, then the file itself); the bytes are checked again (``bot.images.intake``)."""
    if message.photo:
        size = _fitting(message.photo)
        return (Attachment("photo.jpg", size.file_size, lambda: _download(size)),)
    document = message.document
    if document is not None and (document.mime_type or "").startswith("image/"):
        return (
            Attachment(
                document.file_name or "image", document.file_size, lambda: _download(document)
            ),
        )
    return ()


def _fitting(sizes: tuple[PhotoSize, ...]) -> PhotoSize:
    """The largest size whose long side is at most PHOTO_SIDE (Telegram sends 90, 320, 800, 1280 and 2560 px), else the smallest."""
    fits = [s for s in sizes if max(s.width, s.height) <= PHOTO_SIDE]
    return (
        max(fits, key=lambda s: s.width * s.height)
        if fits
        else min(sizes, key=lambda s: s.width * s.height)
    )


async def _download(media: PhotoSize | Document) -> bytes:
    file = await media.get_file()
    return bytes(await file.download_as_bytearray())


def _pointed(message: Message, author: User) -> tuple[tuple[str, str], ...]:
    """The people this message mentions by account (a "text mention": Telegram names the user) or replies to, bots
    left out (SEC-5). A plain @username carries no account, so it points at nobody."""
    users = [
        e.user
        for e in message.entities or ()
        if e.type == MessageEntity.TEXT_MENTION and e.user is not None
    ]
    replied = message.reply_to_message
    users += [replied.from_user] if replied is not None and replied.from_user is not None else []
    pairs = (
        (str(u.id), u.first_name or u.username or str(u.id))
        for u in users
        if not u.is_bot and u.id != author.id
    )
    return tuple(dict.fromkeys(pairs))


class _RedactToken(logging.Filter):
    """Replace the bot token in log records with a placeholder."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        if self._token:
            message = record.getMessage()
            if self._token in message:
                record.msg, record.args = message.replace(self._token, "<telegram-token>"), ()
        return True

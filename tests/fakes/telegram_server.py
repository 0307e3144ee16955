"""A local Telegram Bot API server for python-telegram-bot tests.

Build the application with
``ApplicationBuilder().token(t).base_url(f"{srv.url}/bot").base_file_url(f"{srv.url}/file/bot")``
and PTB's real request, polling and update-dispatch code runs against this
server: tests push user messages as updates and read back what the bot sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from typing import Any

from aiohttp import web

from ._base import WAIT_S, FakeFile, FakeServer, json_response, read_body

BOT_ID = 999
BOT_USERNAME = "companion_bot"
BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": "Companion", "username": BOT_USERNAME}
MAX_POLL_WAIT = 1.0
# Parameters PTB sends JSON-encoded inside form fields.
JSON_FIELDS = (
    "reaction",
    "reply_parameters",
    "reply_markup",
    "entities",
    "link_preview_options",
    "allowed_updates",
    "commands",
    "scope",
)
GROUP_TYPES = ("group", "supergroup")


def utf16_len(text: str) -> int:
    """Telegram measures entity offsets and lengths in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _coerce(params: dict[str, Any]) -> dict[str, Any]:
    """Turn the string values of a form body into the JSON types they encode."""
    out = dict(params)
    for key in JSON_FIELDS:
        if isinstance(out.get(key), str):
            with contextlib.suppress(ValueError):
                out[key] = json.loads(out[key])
    for key in ("chat_id", "message_id", "offset", "limit", "message_thread_id"):
        value = out.get(key)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            out[key] = int(value)
    return out


_MESSAGE_IDS = itertools.count(1)  # shared by every fake in the process, see __init__


class FakeTelegram(FakeServer):
    """Bot API endpoints under ``/bot{token}/{method}`` with recorded side effects.

    ``token``: when given, other tokens get 401 like the real API.
    """

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.calls: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.documents: list[
            dict[str, Any]
        ] = []  # sendDocument: chat_id, filename, caption, data (the bytes)
        self.actions: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.reactions: list[
            dict[str, Any]
        ] = []  # setMessageReaction: chat_id, message_id, reaction (a list)
        self.unknown_calls: list[dict[str, Any]] = []
        self.commands: dict[str, list[dict[str, Any]]] = {}
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        # Telegram's message ids only grow, also across the bot's restarts; a second fake in one test (a restart)
        # continues the numbering rather than re-using ids the store already holds (which read as re-deliveries)
        self._message_ids = _MESSAGE_IDS
        self._chats: dict[int, dict[str, Any]] = {}
        self._last_bot_message: dict[int, dict[str, Any]] = {}
        self.admins: dict[int, list[int]] = {}  # group chat id -> user ids that administer it
        # group chat id -> user id -> "left" or "kicked" (banned): getChatMember's answer
        self.departed: dict[int, dict[int, str]] = {}
        self.files: dict[
            str, FakeFile
        ] = {}  # file_id -> the file getFile and the file server hand out
        self.downloads: list[str] = []  # file ids whose bytes were downloaded, in order
        super().__init__()

    # ----------------------------------------------------------- helpers --
    def push_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        username: str | None = None,
        first_name: str = "Alice",
        reply_to_bot: bool = False,
        entities: list[dict[str, Any]] | None = None,
        mention: bool = False,
        chat_title: str = "Test group",
    ) -> dict[str, Any]:
        """Queue an Update carrying a user's text message; returns the update.

        Group chats need negative ids, as on Telegram. ``mention=True`` makes
        sure the text mentions @companion_bot and adds the matching entity;
        ``reply_to_bot=True`` makes it a reply to the bot's last message there.
        """
        _check_chat(chat_id, chat_type)
        chat = self._chat(chat_id, chat_type, user_id, username, first_name, chat_title)
        text, entities = _with_mention(text, list(entities or []), mention)
        user = {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"}
        if username:
            user["username"] = username
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if reply_to_bot:
            message["reply_to_message"] = self._bot_message_in(chat)
        return self.push_update({"message": message})

    def push_photo(
        self,
        chat_id: int,
        user_id: int,
        file: FakeFile,
        *,
        caption: str = "",
        as_document: bool = False,
        chat_type: str = "private",
        first_name: str = "Alice",
        mention: bool = False,
    ) -> dict[str, Any]:
        """Queue a photo (in three sizes, 320, 1280 and 2560 px, as Telegram sends one; each size is a file of its own)
        or, ``as_document``, an image file with its MIME type; ``caption`` with a mention entity when ``mention``."""
        update = self.push_message(
            chat_id, user_id, caption, chat_type=chat_type, first_name=first_name, mention=mention
        )
        message = update["message"]
        text, entities = message.pop("text"), message.pop("entities", None)
        if text:
            message["caption"] = text
        if entities:
            message["caption_entities"] = entities
        if as_document:
            fid = self._file(file)
            message["document"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "file_name": file.name,
                "file_size": file.declared,
            }
            message["document"] |= {"mime_type": file.content_type} if file.content_type else {}
        else:
            message["photo"] = [
                {
                    "file_id": self._file(file),
                    "file_unique_id": f"u{side}",
                    "width": side,
                    "height": side * 3 // 4,
                }
                | {"file_size": file.declared}
                for side in (320, 1280, 2560)
            ]
        return update

    def _file(self, file: FakeFile) -> str:
        file_id = f"file{len(self.files) + 1}"
        self.files[file_id] = file
        return file_id

    def push_edit(self, update: dict[str, Any], text: str) -> dict[str, Any]:
        """Queue an ``edited_message`` update for a message pushed earlier (its update), now reading ``text``."""
        message = {**update["message"], "text": text, "edit_date": int(time.time())}
        message.pop("entities", None)
        return self.push_update({"edited_message": message})

    def push_reaction(
        self,
        chat_id: int,
        message_id: int,
        user_id: int,
        emoji: str,
        *,
        first_name: str = "Alice",
        chat_type: str = "supergroup",
    ) -> dict[str, Any]:
        """Queue a ``message_reaction`` update: ``user_id`` added ``emoji`` to ``message_id`` (none before)."""
        chat = self._chats.get(chat_id) or self._chat(
            chat_id, chat_type, user_id, None, first_name, "Test group"
        )
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        change = {"chat": chat, "message_id": message_id, "user": user, "date": int(time.time())}
        return self.push_update(
            {
                "message_reaction": {
                    **change,
                    "old_reaction": [],
                    "new_reaction": [{"type": "emoji", "emoji": emoji}],
                }
            }
        )

    def push_update(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue any raw update body (``{"message": ...}``, ``{"callback_query": ...}``)."""
        update = {"update_id": next(self._update_ids), **payload}
        self._updates.append(update)
        self._notify()
        return update

    async def wait_for_sent(self, n: int, timeout: float = WAIT_S) -> list[dict[str, Any]]:
        """Wait until the bot has sent at least ``n`` messages; returns ``sent``."""
        await self.wait_until(lambda: len(self.sent) >= n, timeout)
        return self.sent

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by a getUpdates offset."""
        return len(self._updates)

    def _chat(
        self,
        chat_id: int,
        chat_type: str,
        user_id: int,
        username: str | None,
        first_name: str,
        title: str,
    ) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type in GROUP_TYPES:
            chat["title"] = title
        else:
            chat["first_name"] = first_name
            if username:
                chat["username"] = username
        self._chats[chat_id] = chat
        return chat

    def _bot_message_in(self, chat: dict[str, Any]) -> dict[str, Any]:
        """The bot's last message in that chat, or a plausible earlier one."""
        known = self._last_bot_message.get(chat["id"])
        if known is not None:
            return known
        return {
            "message_id": next(self._message_ids),
            "date": int(time.time()) - 60,
            "chat": chat,
            "from": BOT_USER,
            "text": "Hi! How can I help?",
        }

    # ------------------------------------------------------------ routing --
    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/bot{token}/{method}", self._dispatch)
        router.add_route("*", "/file/bot{token}/{path:.*}", self._download)

    async def _download(self, request: web.Request) -> web.Response:
        """The file server: ``files/<file_id>`` as getFile named it."""
        file_id = request.match_info["path"].removeprefix("files/")
        self.downloads.append(file_id)
        self._notify()
        if file_id not in self.files:
            return web.Response(body=b"", status=404)
        return web.Response(body=self.files[file_id].data, content_type="application/octet-stream")

    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = _coerce(await read_body(request))
        self.calls.append({"method": method, "params": params})
        if self.token is not None and request.match_info["token"] != self.token:
            return _fail(401, "Unauthorized")
        handler = getattr(self, f"_m_{method.lower()}", None)
        if handler is None:
            self.unknown_calls.append({"method": method, "params": params})
            self._notify()
            return _fail(404, f"Not Found: method {method} is not faked")
        result = handler(params)
        if asyncio.iscoroutine(result):
            result = await result
        self._notify()
        return json_response({"ok": True, "result": result})

    # ------------------------------------------------------------ methods --
    def _m_getme(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **BOT_USER,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _m_deletewebhook(self, params: dict[str, Any]) -> bool:
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self._updates.clear()
        return True

    def _m_getwebhookinfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    async def _m_getupdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Long-poll: confirm updates below ``offset``, wait (≤1s) for newer ones."""
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        wait = min(float(params.get("timeout") or 0), MAX_POLL_WAIT)
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]
        with contextlib.suppress(TimeoutError):
            await self.wait_until(lambda: bool(self._updates), wait)
        return self._updates[:limit]

    def _m_sendmessage(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(params)
        self.sent.append({**params, "message_id": message["message_id"]})
        self._last_bot_message[message["chat"]["id"]] = message
        return message

    def _m_senddocument(self, params: dict[str, Any]) -> dict[str, Any]:
        """A file the bot uploads (multipart): recorded with its bytes in ``documents``."""
        data = params.get("_uploads", {}).get("document", b"")
        filename = params.get("document", "")
        self.documents.append(
            {
                "chat_id": params.get("chat_id"),
                "filename": filename,
                "caption": params.get("caption", ""),
                "data": data,
            }
        )
        message = {**self._bot_message(params), "caption": params.get("caption", "")}
        message.pop("text", None)
        message["document"] = {
            "file_id": f"doc{len(self.documents)}",
            "file_unique_id": f"u{len(self.documents)}",
            "file_name": filename,
        }
        return message

    async def wait_for_documents(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until the bot has uploaded at least ``n`` documents; returns ``documents``."""
        await self.wait_until(lambda: len(self.documents) >= n, timeout)
        return self.documents

    def _m_editmessagetext(self, params: dict[str, Any]) -> dict[str, Any]:
        self.edits.append(params)
        return {
            **self._bot_message(params),
            "message_id": params.get("message_id", 0),
            "edit_date": int(time.time()),
        }

    def _m_setmessagereaction(self, params: dict[str, Any]) -> bool:
        self.reactions.append({k: params.get(k) for k in ("chat_id", "message_id", "reaction")})
        return True

    def _m_getfile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id"))
        file = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": file.declared,
            "file_path": f"files/{file_id}",
        }

    def _m_sendchataction(self, params: dict[str, Any]) -> bool:
        self.actions.append(params)
        return True

    def _m_setmycommands(self, params: dict[str, Any]) -> bool:
        self.commands[_scope_key(params)] = list(params.get("commands") or [])
        return True

    def _m_getmycommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.commands.get(_scope_key(params), [])

    def _m_deletemycommands(self, params: dict[str, Any]) -> bool:
        self.commands.pop(_scope_key(params), None)
        return True

    def _m_getchatmember(self, params: dict[str, Any]) -> dict[str, Any]:
        """A member's status in a group: 'left' or 'kicked' once ``departed`` says so, else
        a member (or an administrator)."""
        chat, uid = int(params["chat_id"]), int(params["user_id"])
        status = self.departed.get(chat, {}).get(uid)
        if status is None and uid in self.admins.get(chat, []):
            return _admin(uid)
        user = {"id": uid, "is_bot": False, "first_name": f"user{uid}"}
        if status == "kicked":
            return {"status": "kicked", "user": user, "until_date": 0}
        return {"status": status or "member", "user": user}

    def _m_getchatadministrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        users = self.admins.get(int(params.get("chat_id") or 0), [])
        return [_admin(uid) for uid in users]

    def _m_deletemessage(self, params: dict[str, Any]) -> bool:
        return True

    def _m_answercallbackquery(self, params: dict[str, Any]) -> bool:
        return True

    def _m_close(self, params: dict[str, Any]) -> bool:
        return True

    def _m_logout(self, params: dict[str, Any]) -> bool:
        return True

    def _bot_message(self, params: dict[str, Any]) -> dict[str, Any]:
        """A Message from the bot as the Bot API returns it for send/edit calls."""
        chat_id = params.get("chat_id")
        chat = self._chats.get(chat_id) if isinstance(chat_id, int) else None
        if chat is None:
            chat = {"id": chat_id, "type": "private" if _positive(chat_id) else "supergroup"}
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": BOT_USER,
            "text": params.get("text", ""),
        }
        if params.get("entities"):
            message["entities"] = params["entities"]
        return message


def _positive(chat_id: Any) -> bool:
    return isinstance(chat_id, int) and chat_id > 0


def _check_chat(chat_id: int, chat_type: str) -> None:
    """Catch test mistakes early: group ids are negative, private ones positive."""
    if chat_type in GROUP_TYPES and chat_id >= 0:
        raise ValueError(f"{chat_type} chats have negative ids, got {chat_id}")
    if chat_type == "private" and chat_id <= 0:
        raise ValueError(f"private chats have positive ids, got {chat_id}")


def _with_mention(text: str, entities: list[dict[str, Any]], mention: bool) -> tuple[str, list]:
    """Ensure ``@companion_bot`` is in the text with a "mention" entity."""
    if not mention:
        return text, entities
    handle = f"@{BOT_USERNAME}"
    if handle not in text:
        text = f"{handle} {text}"
        shift = utf16_len(handle) + 1
        entities = [{**e, "offset": e["offset"] + shift} for e in entities]
    offset = utf16_len(text[: text.index(handle)])
    entities.append({"type": "mention", "offset": offset, "length": utf16_len(handle)})
    return text, sorted(entities, key=lambda e: e["offset"])


def _scope_key(params: dict[str, Any]) -> str:
    scope = params.get("scope") or {"type": "default"}
    return json.dumps(scope, sort_keys=True) + "|" + str(params.get("language_code") or "")


def _fail(code: int, description: str) -> web.Response:
    return json_response({"ok": False, "error_code": code, "description": description}, status=code)


def _admin(uid: int) -> dict[str, Any]:
    """A group administrator as getChatMember and getChatAdministrators answer."""
    return {
        "status": "administrator",
        "user": {"id": uid, "is_bot": False, "first_name": f"admin{uid}"},
        "can_be_edited": False,
        "is_anonymous": False,
        "can_manage_chat": True,
        "can_delete_messages": True,
        "can_manage_video_chats": True,
        "can_restrict_members": True,
        "can_promote_members": False,
        "can_change_info": True,
        "can_invite_users": True,
        "can_post_stories": False,
        "can_edit_stories": False,
        "can_delete_stories": False,
    }

"""REST endpoints of the fake Discord, registered onto a ``FakeDiscord``.

Separate from the gateway code so each file stays small; every handler records
into the server's lists and answers with the exact JSON shape discord.py parses.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import discord_payloads as p
from ._base import json_response

if TYPE_CHECKING:
    from .discord_server import FakeDiscord

API = "/api/v10"
Handler = Callable[[web.Request, Any], Awaitable[web.StreamResponse]]
EPHEMERAL, LOADING = 64, 128
CHAT_INPUT_COMMAND_MESSAGE = 20


def add_rest_routes(srv: FakeDiscord, router: web.UrlDispatcher) -> None:
    """Register every faked endpoint, plus a recording 404 for anything else."""
    rest = _Rest(srv)
    for method, path, handler in rest.routes():
        router.add_route(method, API + path, rest.wrap(handler))
    router.add_route("*", "/{tail:.*}", rest.wrap(rest.unknown))


async def _payload(request: web.Request) -> Any:
    """JSON body, or the ``payload_json`` part of a multipart upload (+ file names)."""
    if not request.can_read_body:
        return {}
    if request.content_type == "multipart/form-data":
        form = await request.post()
        body = json.loads(form.get("payload_json") or "{}")
        body["_files"] = [v.filename for k, v in form.items() if k != "payload_json"]
        body["_file_data"] = {
            v.filename: v.file.read() for k, v in form.items() if k != "payload_json"
        }
        return body
    text = await request.text()
    return json.loads(text) if text else {}


def _no_content() -> web.Response:
    return web.Response(status=204)


def _not_found(message: str, code: int = 0) -> web.Response:
    return json_response({"message": message, "code": code}, status=404)


class _Rest:
    """Handlers bound to one ``FakeDiscord``; routes() lists them."""

    def __init__(self, srv: FakeDiscord) -> None:
        self.srv = srv

    def routes(self) -> list[tuple[str, str, Handler]]:
        hook = "/webhooks/{app}/{token}"
        return [
            ("GET", "/users/@me", self.me),
            ("GET", "/oauth2/applications/@me", self.application),
            ("GET", "/gateway", self.gateway),
            ("GET", "/gateway/bot", self.gateway),
            ("GET", "/channels/{cid}", self.channel),
            ("GET", "/guilds/{gid}/members/{uid}", self.guild_member),
            ("POST", "/channels/{cid}/messages", self.post_message),
            ("PATCH", "/channels/{cid}/messages/{mid}", self.edit_message),
            ("DELETE", "/channels/{cid}/messages/{mid}", self.delete),
            ("POST", "/channels/{cid}/typing", self.typing),
            ("PUT", "/channels/{cid}/messages/{mid}/reactions/{emoji}/@me", self.add_reaction),
            ("POST", "/users/@me/channels", self.create_dm),
            ("GET", "/applications/{app}/commands", self.get_commands),
            ("PUT", "/applications/{app}/commands", self.put_commands),
            ("GET", "/applications/{app}/guilds/{gid}/commands", self.get_commands),
            ("PUT", "/applications/{app}/guilds/{gid}/commands", self.put_commands),
            ("POST", "/interactions/{iid}/{token}/callback", self.callback),
            ("POST", hook, self.followup),
            ("GET", hook + "/messages/{mid}", self.get_webhook_message),
            ("PATCH", hook + "/messages/{mid}", self.edit_webhook_message),
            ("DELETE", hook + "/messages/{mid}", self.delete),
        ]

    def wrap(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """Parse and record the call, run the handler, wake waiting tests."""

        async def route(request: web.Request) -> web.StreamResponse:
            body = await _payload(request)
            self.srv.rest_calls.append(
                {"method": request.method, "path": request.path, "body": body}
            )
            response = await handler(request, body)
            self.srv._notify()
            return response

        return route

    # ----------------------------------------------------------- identity --
    async def me(self, request: web.Request, body: Any) -> web.Response:
        token = self.srv.token
        if token is not None and request.headers.get("Authorization") != f"Bot {token}":
            return json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        return json_response(p.bot_user())

    async def application(self, request: web.Request, body: Any) -> web.Response:
        return json_response(p.application())

    async def gateway(self, request: web.Request, body: Any) -> web.Response:
        return json_response(
            {
                "url": f"{self.srv.ws_url}/gateway",
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 1000,
                    "reset_after": 0,
                    "max_concurrency": 1,
                },
            }
        )

    async def unknown(self, request: web.Request, body: Any) -> web.Response:
        self.srv.unknown_calls.append(
            {"method": request.method, "path": request.path, "body": body}
        )
        return _not_found(f"404: Not Found ({request.method} {request.path} is not faked)")

    async def delete(self, request: web.Request, body: Any) -> web.Response:
        return _no_content()

    # ------------------------------------------------------------ channels --
    async def channel(self, request: web.Request, body: Any) -> web.Response:
        cid = int(request.match_info["cid"])
        for guild in self.srv._guilds.values():
            for channel in guild["channels"]:
                if channel["id"] == str(cid):
                    return json_response(channel)
        users = [uid for uid, ch in self.srv.dm_channels.items() if ch == cid]
        if users:
            return json_response(p.dm_channel(cid, self.srv._user(users[0])))
        return _not_found("Unknown Channel", 10003)

    async def guild_member(self, request: web.Request, body: Any) -> web.Response:
        """A member of a guild the bot is in; one who left or was banned
        (``FakeDiscord.member_leaves``) is answered as Discord does, 404 Unknown Member."""
        gid, uid = int(request.match_info["gid"]), int(request.match_info["uid"])
        if gid not in self.srv._guilds:
            return _not_found("Unknown Guild", 10004)
        if uid in self.srv.left_members.get(gid, set()):
            return _not_found("Unknown Member", 10007)
        return json_response(p.member(self.srv._user(uid)))

    async def post_message(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        """Record the bot's post; echo it over the gateway like Discord does."""
        cid = int(request.match_info["cid"])
        message = self._bot_message(cid, body)
        self.srv._messages[int(message["id"])] = message
        self.srv.sent.append({"channel_id": cid, "message_id": int(message["id"]), **body})
        if self.srv.echo_own_messages:
            await self.srv._broadcast("MESSAGE_CREATE", self._gateway_copy(cid, message))
        return json_response(message)

    async def edit_message(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        cid, mid = int(request.match_info["cid"]), int(request.match_info["mid"])
        self.srv.edits.append({"channel_id": cid, "message_id": mid, **body})
        message = {
            **self.srv._messages.get(mid, self._bot_message(cid, {})),
            **_visible(body),
            "id": str(mid),
            "edited_timestamp": p.now_iso(),
        }
        self.srv._messages[mid] = message
        return json_response(message)

    async def add_reaction(self, request: web.Request, body: Any) -> web.Response:
        """The bot reacted to a message (aiohttp hands the emoji over already unquoted)."""
        cid, mid = int(request.match_info["cid"]), int(request.match_info["mid"])
        self.srv.reactions.append(
            {"channel_id": cid, "message_id": mid, "emoji": request.match_info["emoji"]}
        )
        return _no_content()

    async def typing(self, request: web.Request, body: Any) -> web.Response:
        self.srv.typing.append(int(request.match_info["cid"]))
        return _no_content()

    async def create_dm(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        uid = int(body["recipient_id"])
        cid = self.srv.dm_channels.setdefault(uid, p.snowflake())
        return json_response(p.dm_channel(cid, self.srv._user(uid)))

    def _bot_message(self, cid: int, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        fields = {**_visible(body), **extra}
        content = fields.pop("content", None) or ""
        if body.get("message_reference"):
            fields["type"] = 19
        return p.message(p.snowflake(), cid, p.bot_user(), content, **fields)

    def _gateway_copy(self, cid: int, message: dict[str, Any]) -> dict[str, Any]:
        guild_id = self.srv._channel_guild.get(cid)
        if guild_id is None:
            return message
        return {**message, "guild_id": str(guild_id), "member": p.member()}

    # ------------------------------------------------------------ commands --
    async def get_commands(self, request: web.Request, body: Any) -> web.Response:
        return json_response(self.srv.commands.get(_scope(request), []))

    async def put_commands(self, request: web.Request, body: list[dict[str, Any]]) -> web.Response:
        """Bulk overwrite: echo the commands back with ids (kept stable by name)."""
        scope = _scope(request)
        old = {c["name"]: c["id"] for c in self.srv.commands.get(scope, [])}
        synced = [_command(cmd, old.get(cmd["name"]), scope) for cmd in body]
        self.srv.commands[scope] = synced
        return json_response(synced)

    # -------------------------------------------------------- interactions --
    async def callback(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        """Record the interaction response and answer as with ``with_response=1``."""
        iid, token = int(request.match_info["iid"]), request.match_info["token"]
        rtype, data = body.get("type"), body.get("data") or {}
        files = body.get("_file_data") or {}  # an attachment's bytes, by file name (multipart)
        self.srv.interaction_responses.append(
            {"interaction_id": iid, "token": token, "type": rtype, "data": data, "files": files}
        )
        interaction = {
            "id": str(iid),
            "type": 2,
            "response_message_loading": rtype == 5,
            "response_message_ephemeral": bool((data.get("flags") or 0) & EPHEMERAL),
        }
        resource: dict[str, Any] = {"type": rtype}
        if rtype in (4, 5):
            flags = (data.get("flags") or 0) | (LOADING if rtype == 5 else 0)
            message = self._interaction_message(token, {**data, "flags": flags})
            self.srv._originals[token] = message
            interaction["response_message_id"] = message["id"]
            resource["message"] = message
        return json_response({"interaction": interaction, "resource": resource})

    async def followup(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        token = request.match_info["token"]
        message = self._interaction_message(token, body)
        self.srv.followups.append(
            {"kind": "followup", "token": token, "message_id": int(message["id"]), **body}
        )
        return json_response(message)

    async def get_webhook_message(self, request: web.Request, body: Any) -> web.Response:
        message = self._webhook_target(request)
        return json_response(message) if message else _not_found("Unknown Message", 10008)

    async def edit_webhook_message(
        self, request: web.Request, body: dict[str, Any]
    ) -> web.Response:
        token, mid = request.match_info["token"], request.match_info["mid"]
        base = self._webhook_target(request) or self._interaction_message(token, {})
        message = {
            **base,
            **_visible(body),
            "edited_timestamp": p.now_iso(),
            "flags": (base.get("flags") or 0) & ~LOADING,
        }
        self._store_webhook_message(token, mid, message)
        self.srv.followups.append({"kind": "edit", "token": token, "message_id": mid, **body})
        return json_response(message)

    def _webhook_target(self, request: web.Request) -> dict[str, Any] | None:
        token, mid = request.match_info["token"], request.match_info["mid"]
        if mid == "@original":
            return self.srv._originals.get(token)
        return self.srv._messages.get(int(mid)) if mid.isdigit() else None

    def _store_webhook_message(self, token: str, mid: str, message: dict[str, Any]) -> None:
        if mid == "@original":
            self.srv._originals[token] = message
        else:
            self.srv._messages[int(message["id"])] = message

    def _interaction_message(self, token: str, data: dict[str, Any]) -> dict[str, Any]:
        info = self.srv._interactions.get(token, {"channel_id": 0})
        message = self._bot_message(
            info["channel_id"],
            data,
            type=CHAT_INPUT_COMMAND_MESSAGE,
            application_id=str(p.APPLICATION_ID),
            webhook_id=str(p.APPLICATION_ID),
        )
        self.srv._messages[int(message["id"])] = message
        return message


def _visible(body: dict[str, Any]) -> dict[str, Any]:
    """The parts of a send/edit payload that show up on the resulting message."""
    keys = ("content", "embeds", "flags", "message_reference", "tts", "nonce")
    return {k: body[k] for k in keys if body.get(k) is not None}


def _scope(request: web.Request) -> int | None:
    gid = request.match_info.get("gid")
    return int(gid) if gid else None


def _command(cmd: dict[str, Any], known_id: str | None, scope: int | None) -> dict[str, Any]:
    synced = {
        "type": 1,
        "description": "",
        "options": [],
        "default_member_permissions": None,
        "dm_permission": True,
        "nsfw": False,
        **cmd,
        "id": known_id or str(p.snowflake()),
        "application_id": str(p.APPLICATION_ID),
        "version": str(p.snowflake()),
    }
    if scope is not None:
        synced["guild_id"] = str(scope)
    return synced

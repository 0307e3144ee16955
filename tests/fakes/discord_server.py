"""A fake Discord (REST + gateway) that discord.py 2.7.1 can log into.

``srv.patch_discord()`` points ``discord.http.Route.BASE`` and the default
gateway at this server; a real ``discord.Client`` then logs in, receives READY
and GUILD_CREATE, and tests drive it by dispatching MESSAGE_CREATE and
INTERACTION_CREATE events and reading back what it posted.

The gateway always sends plain JSON text frames: discord.py still puts
``compress=zlib-stream`` (or zstd-stream) in the URL, but it only decompresses
*binary* frames, so text frames reach its parser untouched. The query is kept
in ``gateway_params`` for inspection.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from . import discord_payloads as p
from ._base import WAIT_S, FakeFile, FakeServer
from .discord_rest import add_rest_routes

BOT_ID = p.BOT_ID
APPLICATION_ID = p.APPLICATION_ID
API = "/api/v10"
HELLO, HEARTBEAT, IDENTIFY, RESUME, REQUEST_MEMBERS, HEARTBEAT_ACK = 10, 1, 2, 6, 8, 11


class _Session:
    """One gateway connection with its own sequence counter and send lock."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.seq = 0
        self.ready = False
        self.session_id = secrets.token_hex(16)
        self.shard = (0, 1)  # IDENTIFY's [shard_id, num_shards]
        self._lock = asyncio.Lock()

    def receives(self, guild_id: int | None) -> bool:
        """Discord's routing: a guild's events go to shard (guild_id >> 22) % num_shards, DMs to shard 0."""
        shard_id, count = self.shard
        return (guild_id is None and shard_id == 0) or (
            guild_id is not None and (guild_id >> 22) % count == shard_id
        )

    async def send(self, op: int, d: Any = None, t: str | None = None) -> None:
        async with self._lock:
            seq = None
            if op == 0:
                self.seq += 1
                seq = self.seq
            await self.ws.send_str(json.dumps({"op": op, "d": d, "s": seq, "t": t}))


class FakeDiscord(FakeServer):
    """REST under ``/api/v10`` and a websocket gateway at ``/gateway``.

    ``token``: when given, other tokens fail login (401 / close 4004).
    ``echo_own_messages``: like Discord, send the bot's own posts back as
    MESSAGE_CREATE, so a bot that does not ignore itself is caught.
    """

    def __init__(self, *, token: str | None = None, echo_own_messages: bool = True) -> None:
        self.token = token
        self.echo_own_messages = echo_own_messages
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.typing: list[int] = []
        self.reactions: list[dict[str, Any]] = []  # the bot's own: channel_id, message_id, emoji
        self.interaction_responses: list[dict[str, Any]] = []
        self.followups: list[dict[str, Any]] = []
        self.rest_calls: list[dict[str, Any]] = []
        self.unknown_calls: list[dict[str, Any]] = []
        self.identifies: list[dict[str, Any]] = []
        self.gateway_params: list[dict[str, str]] = []
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self.dm_channels: dict[int, int] = {}
        # guild id -> the user ids that left it or were banned from it (the REST member lookup: 404)
        self.left_members: dict[int, set[int]] = {}
        self._usernames: dict[int, str] = {}
        self._guilds: dict[int, dict[str, Any]] = {}
        self._channel_guild: dict[int, int] = {}
        self._messages: dict[int, dict[str, Any]] = {}
        self._interactions: dict[str, dict[str, Any]] = {}
        self._originals: dict[str, dict[str, Any]] = {}
        self._sessions: list[_Session] = []
        self.cdn: dict[str, bytes] = {}  # attachment path -> bytes, served under /cdn/
        self.cdn_fetches: list[str] = []  # the attachment paths downloaded, in order
        super().__init__()

    # ------------------------------------------------------- setup helpers --
    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:PORT``; the gateway lives at ``{ws_url}/gateway``."""
        return self.url.replace("http://", "ws://", 1)

    def patch_discord(self) -> Callable[[], None]:
        """Point discord.py's REST base and default gateway here; returns an undo."""
        import discord
        import yarl

        old = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        discord.http.Route.BASE = f"{self.url}{API}"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(f"{self.ws_url}/gateway")

        def restore() -> None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old

        return restore

    def add_guild(
        self,
        guild_id: int,
        name: str,
        channels: list[tuple[int, str]] = (),
        members: list[tuple[int, str]] = (),
        private: tuple[int, ...] = (),
        read_only: tuple[int, ...] = (),
    ) -> None:
        """Configure a guild sent as GUILD_CREATE after IDENTIFY (add before connecting); ``private``
        channels are hidden from @everyone (only the guild owner, ``OWNER_ID``, reads them);
        ``read_only`` ones @everyone reads but may not post in."""
        self._guilds[guild_id] = p.guild(
            guild_id, name, list(channels), list(members), frozenset(private), frozenset(read_only)
        )
        for channel_id, _ in channels:
            self._channel_guild[channel_id] = guild_id

    def member_leaves(self, guild_id: int, user_id: int) -> None:
        """The user left the guild or was banned from it: no longer a member when asked over REST
        (the gateway's member-remove event needs the privileged members intent, which the bot does
        not ask for)."""
        self.left_members.setdefault(guild_id, set()).add(user_id)

    # ------------------------------------------------------ event helpers --
    async def wait_for_gateway(self, timeout: float = WAIT_S, sessions: int = 1) -> None:
        """Wait until ``sessions`` clients (or shards) have identified and received READY + guilds."""
        await self.wait_until(lambda: sum(s.ready for s in self._sessions) >= sessions, timeout)

    async def dispatch(self, event: str, data: dict[str, Any], timeout: float = WAIT_S) -> None:
        """Send a raw dispatch event to every identified client (waits for one)."""
        await self.wait_for_gateway(timeout)
        await self._broadcast(event, data)

    async def dispatch_message(
        self,
        channel_id: int,
        author_id: int,
        content: str,
        *,
        guild_id: int | None = None,
        mentions_bot: bool = False,
        username: str = "alice",
        reply_to: int | None = None,
        mentions: tuple[tuple[int, str], ...] = (),
        files: tuple[FakeFile, ...] = (),
    ) -> dict[str, Any]:
        """Deliver a user's MESSAGE_CREATE; returns the payload sent.

        A DM (channel type 1) unless ``guild_id`` is given or ``channel_id`` is
        a configured guild channel. ``mentions_bot`` puts ``<@4242>`` in the
        content and the bot in ``mentions``; ``reply_to`` references an earlier
        message id (one the bot sent, or a user's dispatched here). ``mentions``: other users
        (id, name) the content mentions as ``<@id>``, listed in the payload's ``mentions`` as
        Discord does.
        """
        guild_id = guild_id or self._channel_guild.get(channel_id)
        self._usernames[author_id] = username
        if mentions_bot and f"<@{BOT_ID}>" not in content:
            content = f"<@{BOT_ID}> {content}"
        extra = self._message_extras(channel_id, author_id, guild_id, mentions_bot, reply_to)
        people = [
            {**p.user(uid, name), **({"member": p.member()} if guild_id else {})}
            for uid, name in mentions
        ]
        extra["mentions"] = extra.get("mentions", []) + people
        extra["attachments"] = [self._attachment(f) for f in files]
        data = p.message(p.snowflake(), channel_id, p.user(author_id, username), content, **extra)
        self._messages[int(data["id"])] = (
            data  # a later ``reply_to`` may reference it, as on Discord
        )
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    def _attachment(self, file: FakeFile) -> dict[str, Any]:
        """An attachment as MESSAGE_CREATE carries it, its bytes served at its CDN url (``cdn_fetches`` records reads)."""
        aid = p.snowflake()
        path = f"attachments/{aid}/{file.name}"
        if not file.gone:
            self.cdn[path] = file.data
        url = f"{self.url}/cdn/{path}"
        data = {
            "id": str(aid),
            "filename": file.name,
            "size": file.declared,
            "url": url,
            "proxy_url": url,
        }
        return data | ({"content_type": file.content_type} if file.content_type else {})

    async def _cdn(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        self.cdn_fetches.append(path)
        self._notify()
        if path not in self.cdn:
            return web.Response(status=404)
        return web.Response(body=self.cdn[path], content_type="application/octet-stream")

    def _message_extras(
        self,
        channel_id: int,
        author_id: int,
        guild_id: int | None,
        mentions_bot: bool,
        reply_to: int | None,
    ) -> dict[str, Any]:
        """The guild/DM, mention and reply fields of a user's MESSAGE_CREATE."""
        extra: dict[str, Any] = {"channel_type": 0 if guild_id else 1}
        if guild_id is not None:
            extra.update(guild_id=str(guild_id), member=p.member())
        else:
            self.dm_channels.setdefault(author_id, channel_id)
        if mentions_bot:
            mentioned = p.bot_user()
            extra["mentions"] = [{**mentioned, "member": p.member()} if guild_id else mentioned]
        if reply_to is not None:
            extra.update(self._reply_fields(reply_to, channel_id, guild_id))
        return extra

    async def dispatch_interaction(
        self,
        name: str,
        *,
        user_id: int,
        channel_id: int,
        guild_id: int | None = None,
        options: dict[str, Any] | list[dict[str, Any]] | None = None,
        username: str = "alice",
    ) -> dict[str, Any]:
        """Deliver a slash-command INTERACTION_CREATE; returns it (``token`` inside).

        ``options`` maps option names to values (types inferred) or is the raw
        option list. The command id and scope come from what the bot synced.
        """
        guild_id = guild_id or self._channel_guild.get(channel_id)
        self._usernames[user_id] = username
        user = p.user(user_id, username)
        command_id, command_guild = self._command_ref(name, guild_id)
        token = f"itoken-{secrets.token_hex(8)}"
        data = p.interaction(
            p.snowflake(),
            token,
            name,
            user_payload=user,
            channel=self._channel_payload(channel_id, guild_id, user),
            guild_id=guild_id,
            options=_options(options),
            command_id=command_id,
            command_guild_id=command_guild,
        )
        self._interactions[token] = {
            "id": int(data["id"]),
            "channel_id": channel_id,
            "guild_id": guild_id,
        }
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def dispatch_edit(self, message: dict[str, Any], content: str) -> dict[str, Any]:
        """Deliver MESSAGE_UPDATE for a message dispatched earlier (its payload), now reading ``content``."""
        data = {**message, "content": content, "edited_timestamp": p.now_iso()}
        await self.dispatch("MESSAGE_UPDATE", data)
        return data

    async def dispatch_delete(self, *messages: dict[str, Any]) -> None:
        """Deliver MESSAGE_DELETE for one message dispatched earlier, MESSAGE_DELETE_BULK for several (one channel)."""
        where = {k: messages[0][k] for k in ("channel_id", "guild_id") if k in messages[0]}
        if len(messages) == 1:
            await self.dispatch("MESSAGE_DELETE", {"id": messages[0]["id"], **where})
        else:
            await self.dispatch(
                "MESSAGE_DELETE_BULK", {"ids": [m["id"] for m in messages], **where}
            )

    async def dispatch_reaction(
        self, channel_id: int, message_id: int, user_id: int, emoji: str, *, username: str = "alice"
    ) -> None:
        """Deliver MESSAGE_REACTION_ADD: ``user_id`` reacted with a unicode ``emoji`` to ``message_id``."""
        guild_id = self._channel_guild.get(channel_id)
        self._usernames[user_id] = username
        data: dict[str, Any] = {
            "user_id": str(user_id),
            "channel_id": str(channel_id),
            "message_id": str(message_id),
            "emoji": {"id": None, "name": emoji},
            "burst": False,
            "type": 0,
        }
        if guild_id is not None:
            data.update(guild_id=str(guild_id), member=p.member(self._user(user_id)))
        await self.dispatch("MESSAGE_REACTION_ADD", data)

    async def wait_for_sent(self, n: int, timeout: float = WAIT_S) -> list[dict[str, Any]]:
        """Wait until the bot posted at least ``n`` channel messages; returns ``sent``."""
        await self.wait_until(lambda: len(self.sent) >= n, timeout)
        return self.sent

    async def wait_for_interaction_responses(
        self, n: int, timeout: float = WAIT_S
    ) -> list[dict[str, Any]]:
        """Wait until at least ``n`` interaction callbacks were posted."""
        await self.wait_until(lambda: len(self.interaction_responses) >= n, timeout)
        return self.interaction_responses

    def _user(self, user_id: int) -> dict[str, Any]:
        """User payload under the name it last used in a dispatched event."""
        return p.user(user_id, self._usernames.get(user_id, f"user{user_id}"))

    def _reply_fields(self, reply_to: int, channel_id: int, guild_id: int | None) -> dict[str, Any]:
        ref = {"message_id": str(reply_to), "channel_id": str(channel_id)}
        if guild_id is not None:
            ref["guild_id"] = str(guild_id)
        return {
            "type": 19,
            "message_reference": ref,
            "referenced_message": self._messages.get(reply_to),
        }

    def _channel_payload(
        self, channel_id: int, guild_id: int | None, user: dict[str, Any]
    ) -> dict[str, Any]:
        if guild_id is None:
            self.dm_channels.setdefault(int(user["id"]), channel_id)
            return p.dm_channel(channel_id, user)
        guild = self._guilds.get(guild_id, {"channels": []})
        known = [c for c in guild["channels"] if c["id"] == str(channel_id)]
        return known[0] if known else p.text_channel(channel_id, "unknown", guild_id, 0)

    def _command_ref(self, name: str, guild_id: int | None) -> tuple[int, int | None]:
        """Id and guild scope of the synced command ``name`` (guild scope first)."""
        for scope in ([guild_id] if guild_id else []) + [None]:
            for command in self.commands.get(scope, []):
                if command["name"] == name:
                    return int(command["id"]), scope
        return p.snowflake(), None

    async def _broadcast(self, event: str, data: dict[str, Any]) -> None:
        guild_id = int(data["guild_id"]) if data.get("guild_id") else None
        for session in [s for s in self._sessions if s.ready and s.receives(guild_id)]:
            await session.send(0, data, event)

    # ------------------------------------------------------------- gateway --
    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/gateway", self._gateway)
        router.add_get("/cdn/{path:.*}", self._cdn)
        add_rest_routes(self, router)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        """Speak the gateway protocol over uncompressed JSON text frames."""
        self.gateway_params.append(dict(request.query))
        ws = web.WebSocketResponse(compress=False, max_msg_size=0)
        await ws.prepare(request)
        session = _Session(ws)
        self._sessions.append(session)
        try:
            await session.send(HELLO, {"heartbeat_interval": 45000})
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._on_op(session, json.loads(msg.data))
        finally:
            self._sessions.remove(session)
            self._notify()
        return ws

    async def _on_op(self, session: _Session, frame: dict[str, Any]) -> None:
        op, d = frame.get("op"), frame.get("d")
        if op == HEARTBEAT:
            await session.send(HEARTBEAT_ACK)
        elif op == IDENTIFY:
            await self._identify(session, d)
        elif op == RESUME:
            session.ready = True
            await session.send(0, {}, "RESUMED")
            self._notify()
        elif op == REQUEST_MEMBERS:
            await self._members_chunk(session, d)

    async def _identify(self, session: _Session, d: dict[str, Any]) -> None:
        """READY with unavailable guilds, then one GUILD_CREATE per guild."""
        self.identifies.append(d)
        if self.token is not None and d.get("token") != self.token:
            await session.ws.close(code=4004, message=b"Authentication failed.")
            return
        shard_id, count = d.get("shard") or (0, 1)
        if not 0 <= shard_id < count:
            await session.ws.close(code=4010, message=b"Invalid shard.")
            return
        session.shard = (shard_id, count)
        guilds = [g for gid, g in self._guilds.items() if session.receives(gid)]
        await session.send(
            0,
            {
                "v": 10,
                "user": p.bot_user(),
                "session_id": session.session_id,
                "resume_gateway_url": f"{self.ws_url}/gateway",
                "shard": list(session.shard),
                "guilds": [{"id": g["id"], "unavailable": True} for g in guilds],
                "private_channels": [],
                "relationships": [],
                "application": {"id": str(APPLICATION_ID), "flags": 0},
            },
            "READY",
        )
        for guild in guilds:
            await session.send(0, guild, "GUILD_CREATE")
        session.ready = True
        self._notify()

    async def _members_chunk(self, session: _Session, d: dict[str, Any]) -> None:
        """Answer a member request with every configured member in one chunk."""
        guild_id = int(d["guild_id"])
        members = self._guilds.get(guild_id, {}).get("members", [])
        await session.send(
            0,
            {
                "guild_id": str(guild_id),
                "members": members,
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [],
                "nonce": d.get("nonce"),
            },
            "GUILD_MEMBERS_CHUNK",
        )

    async def _on_shutdown(self, app: web.Application) -> None:
        for session in list(self._sessions):
            await session.ws.close(code=1001, message=b"fake server shutting down")


def _options(options: dict[str, Any] | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if options is None:
        return []
    if isinstance(options, list):
        return options
    return [{"name": k, "type": p.option_type(v), "value": v} for k, v in options.items()]

"""A fake Discord voice server: the voice gateway over TLS (self-signed) and RTP over UDP, on 127.0.0.1.

``FakeDiscordVoice`` is the text fake (REST + main gateway) plus voice: it answers the bot's op 4 (join
a voice channel) with VOICE_STATE_UPDATE + VOICE_SERVER_UPDATE pointing at ``FakeVoiceServer``, which
speaks the voice gateway v8 the way discord.py 2.7.1 + voice-recv expect it::

    bot  op 0 IDENTIFY        -> op 8 HELLO, op 2 READY {ssrc, ip, port, modes}
    bot  UDP IP discovery      -> type 2 answer with the bot's address
    bot  op 1 SELECT_PROTOCOL -> op 4 SESSION_DESCRIPTION {mode, secret_key, dave_protocol_version: 0}
    bot  op 3 HEARTBEAT       -> op 6 HEARTBEAT_ACK

``speak()`` plays PCM as a user: op 5 SPEAKING (ssrc -> user), then Opus RTP encrypted with
aead_xchacha20_poly1305_rtpsize at real-time pace. Whatever the bot plays is decrypted and decoded
into ``bot_audio``. DAVE stays off (version 0): a real MLS group cannot be faked; ``speak(..., dave=True)``
wraps each Opus frame the way a DAVE frame ends (``DAVE_STAND_IN_TAIL``), for a stand-in session on the bot's side.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import ssl
import struct
import time
from pathlib import Path
from typing import Any

import discord
import nacl.secret
from aiohttp import WSMsgType, web

from . import discord_payloads as p
from ._base import FakeServer
from .discord_server import FakeDiscord

MODE = "aead_xchacha20_poly1305_rtpsize"
BOT_SSRC = 7000
OPUS_SILENCE = b"\xf8\xff\xfe"
DAVE_STAND_IN_TAIL = (
    b"\x00\xfa\xfa"  # supplemental size 0, then DAVE's marker: what a stand-in session strips
)
FRAME_S = 0.02


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, written as PEM files; returns (cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "voice-cert.pem", folder / "voice-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: FakeVoiceServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.server._datagram(data, addr)


class FakeVoiceServer(FakeServer):
    """Voice websocket (wss) + UDP media for one bot connection at a time."""

    def __init__(self, cert_dir: Path) -> None:
        self.cert, self._key = self_signed_cert(cert_dir)
        self.secret_key = os.urandom(32)
        self.identifies: list[dict[str, Any]] = []
        self.selected: list[dict[str, Any]] = []
        self.bot_speaking: list[int] = []
        self.bot_audio = bytearray()  # 48 kHz stereo PCM the bot played
        self.bot_packets = 0
        self._bot_addr: tuple[str, int] | None = None
        self._ws: web.WebSocketResponse | None = None
        self._udp: _Udp | None = None
        self._decoder = discord.opus.Decoder()
        self._box = nacl.secret.Aead(self.secret_key)
        self._nonce = 0
        self._sequence: dict[int, int] = {}
        self.last_bot_packet_at = 0.0
        self.bot_sound_at: list[
            float
        ] = []  # when each bot packet with sound (not Opus silence) came in
        self.voice_sent_at: dict[
            int, float
        ] = {}  # per ssrc: when the latest speak() sent its first frame with sound
        super().__init__()

    def client_ssl(self) -> ssl.SSLContext:
        """What the bot's HTTP session must trust to reach ``wss://127.0.0.1:PORT``."""
        return ssl.create_default_context(cafile=str(self.cert))

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def connected(self) -> bool:
        return (
            self._bot_addr is not None
            and bool(self.selected)
            and self._ws is not None
            and not self._ws.closed
        )

    # -- lifecycle ---------------------------------------------------------------------------------
    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/", self._gateway)

    async def start(self) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self._key)
        self._runner = web.AppRunner(
            self.app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context).start()
        self.port = self._runner.addresses[0][1]
        loop = asyncio.get_running_loop()
        _, self._udp = await loop.create_datagram_endpoint(
            lambda: _Udp(self), local_addr=("127.0.0.1", 0)
        )

    async def stop(self) -> None:
        if self._udp is not None and self._udp.transport is not None:
            self._udp.transport.close()
        await super().stop()

    async def _on_shutdown(self, app: web.Application) -> None:
        if self._ws is not None:
            await self._ws.close(code=1001)

    # -- playing a user's voice -----------------------------------------------------------------
    async def announce(self, user_id: int, ssrc: int) -> None:
        """op 5 SPEAKING: tells the bot that ``ssrc`` is ``user_id``."""
        await self._send(5, {"user_id": str(user_id), "ssrc": ssrc, "speaking": 1})

    async def disconnect_user(self, user_id: int) -> None:
        """op 13 CLIENT_DISCONNECT: the user left the voice channel."""
        await self._send(13, {"user_id": str(user_id)})

    async def speak(
        self,
        user_id: int,
        ssrc: int,
        pcm48_stereo: bytes,
        *,
        announce: bool = True,
        dave: bool = False,
        announce_after: int = 0,
    ) -> None:
        """Send PCM as Opus RTP from ``ssrc`` at real-time pace (then 5 silence frames, as clients do).

        ``dave``: frames end as DAVE frames do (for a stand-in session); ``announce_after``: SPEAKING comes only
        after that many frames were sent, as on live Discord."""
        if announce and not announce_after:
            await self.announce(user_id, ssrc)
        encoder = discord.opus.Encoder(application="voip")
        step = discord.opus.Encoder.FRAME_SIZE
        frames = [
            pcm48_stereo[i : i + step].ljust(step, b"\0") for i in range(0, len(pcm48_stereo), step)
        ]
        opus = [encoder.encode(f, encoder.SAMPLES_PER_FRAME) for f in frames] + [OPUS_SILENCE] * 5
        if dave:
            opus = [frame + DAVE_STAND_IN_TAIL for frame in opus]
        start, first = time.monotonic(), self._sequence.get(ssrc, 0)
        # a stream's numbering carries on, as a real client's does
        self._sequence[ssrc] = first + len(opus)
        loud = next(
            (i for i, f in enumerate(frames) if max(abs(v) for v in memoryview(f).cast("h")) > 300),
            None,
        )
        for i, frame in enumerate(opus):
            if announce and announce_after and i == announce_after:
                await self.announce(user_id, ssrc)
            if i == loud:
                self.voice_sent_at[ssrc] = time.monotonic()
            self._send_rtp(ssrc, first + i, frame)
            await asyncio.sleep(max(0.0, start + (i + 1) * FRAME_S - time.monotonic()))

    def _send_rtp(self, ssrc: int, index: int, opus: bytes) -> None:
        assert (
            self._udp is not None and self._udp.transport is not None and self._bot_addr is not None
        )
        header = struct.pack(">BBHII", 0x80, 0x78, index & 0xFFFF, (index * 960) & 0xFFFFFFFF, ssrc)
        nonce = struct.pack(">I", self._nonce)
        self._nonce += 1
        sealed = self._box.encrypt(opus, header, nonce.ljust(24, b"\0")).ciphertext
        self._udp.transport.sendto(header + sealed + nonce, self._bot_addr)

    # -- what the bot sent ----------------------------------------------------------------------------
    async def wait_for_bot_audio(self, seconds: float, timeout: float = 30.0) -> bytes:
        """Wait until the bot played at least ``seconds`` of audio and then went quiet for 0.5 s."""
        await self.wait_until(lambda: len(self.bot_audio) >= seconds * 48000 * 4, timeout)
        while time.monotonic() - self.last_bot_packet_at < 0.5:
            await asyncio.sleep(0.1)
        return bytes(self.bot_audio)

    def bot_talked_over(self, ssrc: int) -> float:
        """Seconds of the bot's audio (packets with sound, 20 ms each) that came in after the first sound of
        ``ssrc``'s latest speech: how long the bot talked over that person. Counted in packets rather than clock
        time, so a busy test process that handles datagrams late does not add its own delay."""
        started = self.voice_sent_at[ssrc]
        return sum(1 for t in self.bot_sound_at if t >= started) * FRAME_S

    def _datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) == 74 and data[:2] == b"\x00\x01":
            self._bot_addr = addr
            ip, port = addr[0].encode().ljust(64, b"\0"), struct.pack(">H", addr[1])
            answer = struct.pack(">HHI", 2, 70, BOT_SSRC) + ip + port
            assert self._udp is not None and self._udp.transport is not None
            self._udp.transport.sendto(answer, addr)
        elif len(data) > 16 and data[0] >> 6 == 2 and not 200 <= data[1] <= 204:
            self._bot_rtp(data)
        self._notify()

    def _bot_rtp(self, data: bytes) -> None:
        header, sealed, nonce = data[:12], data[12:-4], data[-4:]
        opus = self._box.decrypt(sealed, header, nonce.ljust(24, b"\0"))
        self.bot_packets += 1
        self.last_bot_packet_at = time.monotonic()
        if opus != OPUS_SILENCE:
            self.bot_sound_at.append(self.last_bot_packet_at)
            self.bot_audio += self._decoder.decode(opus, fec=False)

    # -- the voice gateway ------------------------------------------------------------------------------
    async def _send(self, op: int, d: Any) -> None:
        assert self._ws is not None, "the bot has not connected to voice"
        await self._ws.send_str(json.dumps({"op": op, "d": d}))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False)
        await ws.prepare(request)
        self._ws = ws
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await self._on_op(json.loads(msg.data))
        self._notify()
        return ws

    async def _on_op(self, frame: dict[str, Any]) -> None:
        op, d = frame["op"], frame.get("d")
        if op == 0:
            self.identifies.append(d)
            await self._send(8, {"heartbeat_interval": 41250})
            udp_port = self._udp.transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]
            await self._send(
                2, {"ssrc": BOT_SSRC, "ip": "127.0.0.1", "port": udp_port, "modes": [MODE]}
            )
        elif op == 1:
            self.selected.append(d)
            await self._send(
                4,
                {
                    "mode": d["data"]["mode"],
                    "secret_key": list(self.secret_key),
                    "dave_protocol_version": 0,
                },
            )
        elif op == 3:
            await self._send(6, {"t": (d or {}).get("t")})
        elif op == 5:
            self.bot_speaking.append(int(d.get("speaking", 0)))
        self._notify()


class FakeDiscordVoice(FakeDiscord):
    """The text fake plus voice channels, users' voice states and the bot's op 4 (join / leave voice)."""

    def __init__(self, voice: FakeVoiceServer, **kwargs: Any) -> None:
        self.voice = voice
        self.voice_joins: list[dict[str, Any]] = []
        super().__init__(**kwargs)

    def add_voice_channel(self, guild_id: int, channel_id: int, name: str) -> None:
        """A voice channel in a guild already added with ``add_guild`` (before the bot connects)."""
        guild = self._guilds[guild_id]
        guild["channels"].append(
            {
                **p.text_channel(channel_id, name, guild_id, len(guild["channels"])),
                "type": 2,
                "bitrate": 64000,
                "user_limit": 0,
                "rtc_region": None,
            }
        )
        self._channel_guild[channel_id] = guild_id

    async def set_voice_state(
        self, guild_id: int, user_id: int, channel_id: int | None, username: str = "alice"
    ) -> None:
        """A user joins (or, with ``None``, leaves) a voice channel."""
        state = _voice_state(guild_id, user_id, channel_id, p.user(user_id, username))
        await self.dispatch("VOICE_STATE_UPDATE", state)

    async def _on_op(self, session: Any, frame: dict[str, Any]) -> None:
        if frame.get("op") != 4:
            await super()._on_op(session, frame)
            return
        d = frame["d"]
        self.voice_joins.append(d)
        guild_id, channel_id = int(d["guild_id"]), d.get("channel_id")
        state = _voice_state(
            guild_id, p.BOT_ID, int(channel_id) if channel_id else None, p.bot_user()
        )
        await session.send(0, {**state, "session_id": session.session_id}, "VOICE_STATE_UPDATE")
        if channel_id:
            await session.send(
                0,
                {
                    "token": "voice-token",
                    "guild_id": str(guild_id),
                    "endpoint": self.voice.endpoint,
                },
                "VOICE_SERVER_UPDATE",
            )
        self._notify()


def _voice_state(
    guild_id: int, user_id: int, channel_id: int | None, user: dict[str, Any]
) -> dict[str, Any]:
    return {
        "guild_id": str(guild_id),
        "channel_id": str(channel_id) if channel_id else None,
        "user_id": str(user_id),
        "session_id": f"voice-session-{user_id}",
        "deaf": False,
        "mute": False,
        "self_deaf": False,
        "self_mute": False,
        "self_video": False,
        "suppress": False,
        "request_to_speak_timestamp": None,
        "member": p.member(user),
    }

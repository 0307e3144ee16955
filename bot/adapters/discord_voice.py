"""Discord voice channels (VOICE-1) on discord.py 2.7 + discord-ext-voice-recv + davey.

    UDP --voice-recv: transport decrypt, jitter buffer--> _Sink.write (opus, per SSRC)
        --> strip RTP padding --> DAVE decrypt (when the session is ready) --> Opus decode (48 kHz stereo)
        --> voice.ReceiveHub (VAD per SSRC, late attribution) --> voice.VoiceSession (STT, reply, TTS)
        --> _BufferSource --> VoiceClient.play --> UDP

One ``VoiceSession`` per guild. A monitor task ticks the hub (ends utterances of people who stopped
sending), ties new SSRCs to users, and leaves when the channel has no people left or nobody has said
anything for ``idle_timeout_s``. Every transcribed turn goes to ``Conversation.reply`` as an
``IncomingMessage`` with ``modality="voice"``; the conversation stores it and the reply (VOICE-5). Leaving
(asked, channel empty, idle, shutdown) ends the session: ``Conversation.voice_ended`` keeps its summary (CROSS-1).

Reaching into voice-recv: ``vc._get_id_from_ssrc`` is the only place the SSRC -> user map lives (it is
filled by the voice gateway's SPEAKING event), and ``vc._connection.dave_session`` is where discord.py
keeps the DAVE session; neither has a public accessor in 2.7.1.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import discord
from discord import app_commands
from discord.ext import voice_recv

from bot.types import Conversation, IncomingMessage
from voice.playback import PlaybackBuffer
from voice.providers import SpeechToText, TextToSpeech
from voice.receive import ReceiveHub
from voice.rtp import SenderWait, needs_sender, open_frame
from voice.session import TextSink, VoiceSession, VoiceSettings

from .common import ERROR_APOLOGY, AdapterError

logger = logging.getLogger(__name__)
TICK_S = 0.1  # how often utterances of people who went quiet are closed; also the leave check


class _Sink(voice_recv.AudioSink):
    """Opus per SSRC from voice-recv's router thread -> PCM into the hub. Runs off the event loop.

    A DAVE frame whose sender is not yet known is held (``SenderWait``), and so is everything after it from that
    SSRC, to keep the order; ``release`` (the monitor, once SPEAKING named the user) or the stream's next frame
    with a known user opens them. One lock keeps held frames, decoders and the hub's feed in order."""

    def __init__(self, hub: ReceiveHub, waiting: SenderWait | None = None) -> None:
        super().__init__()
        self._hub = hub
        self._decoders: dict[int, discord.opus.Decoder] = {}
        self._waiting = waiting or SenderWait()
        self._lock = threading.Lock()

    def wants_opus(self) -> bool:
        return True  # we decode ourselves: DAVE decryption has to happen between transport and Opus

    def write(self, user: discord.abc.User | None, data: voice_recv.VoiceData) -> None:
        packet, vc = data.packet, self.voice_client
        assert vc is not None, "voice-recv guarantees the client inside write()"
        if not packet:
            return
        user_id = user.id if user is not None else vc._get_id_from_ssrc(packet.ssrc)
        session, payload, padded = (
            vc._connection.dave_session,
            data.opus or b"",
            bool(getattr(packet, "padding", False)),
        )
        with self._lock:
            if user_id is None and (
                self._waiting.holding(packet.ssrc)
                or needs_sender(payload, padded=padded, dave_session=session)
            ):
                self._waiting.hold(packet.ssrc, payload, padded)
                return
            if user_id is not None and self._waiting.holding(packet.ssrc):
                self._open_held(packet.ssrc, user_id, session)
            self._feed(packet.ssrc, payload, padded, session, user_id)

    def waiting(self) -> list[int]:
        """SSRCs whose frames wait for SPEAKING to name their sender."""
        with self._lock:
            return self._waiting.waiting()

    def release(self, ssrc: int, user_id: int) -> None:
        """``ssrc`` is ``user_id``: open and use what it sent before we knew."""
        assert self.voice_client is not None
        with self._lock:
            self._open_held(ssrc, user_id, self.voice_client._connection.dave_session)

    def _open_held(self, ssrc: int, user_id: int, session: object) -> None:
        for held in self._waiting.release(ssrc):
            self._feed(ssrc, held.payload, held.padded, session, user_id)

    def _feed(
        self, ssrc: int, payload: bytes, padded: bool, session: object, user_id: int | None
    ) -> None:
        frame = open_frame(payload, padded=padded, dave_session=session, user_id=user_id)
        if frame is None:
            return  # undecryptable (e.g. a DAVE key ratchet not yet received): dropped, the decoder conceals it
        decoder = self._decoders.setdefault(ssrc, discord.opus.Decoder())
        # None: a lost packet, concealed by Opus
        self._hub.feed(ssrc, decoder.decode(frame or None, fec=False))

    @voice_recv.AudioSink.listener()
    def on_voice_member_disconnect(self, member: discord.Member | None, ssrc: int | None) -> None:
        if ssrc is not None:
            self._hub.leave(ssrc)
            with self._lock:
                self._decoders.pop(ssrc, None)
                self._waiting.forget(ssrc)

    def cleanup(self) -> None:
        self._decoders.clear()


class _BufferSource(discord.AudioSource):
    """discord.py's player thread pulls 20 ms frames of the reply from here."""

    def __init__(self, buffer: PlaybackBuffer) -> None:
        self._buffer = buffer

    def read(self) -> bytes:
        return self._buffer.read()

    def is_opus(self) -> bool:
        return False


class _Player:
    """``voice.speaking.Player`` on a discord voice client."""

    def __init__(self, vc: voice_recv.VoiceRecvClient) -> None:
        self._vc = vc

    def play(self, audio: PlaybackBuffer) -> None:
        self._vc.play(_BufferSource(audio), application="voip", after=_log_player_error)

    def stop(self) -> None:
        self._vc.stop_playing()  # not vc.stop(): on a VoiceRecvClient that also stops listening

    def is_playing(self) -> bool:
        return self._vc.is_playing()


class _Responder:
    """``voice.session.Responder``: a transcript becomes an ``IncomingMessage`` for the conversation."""

    def __init__(
        self,
        conversation: Conversation,
        channel: discord.VoiceChannel,
        client: discord.Client,
        wake_name: Callable[[], str] | None = None,
    ) -> None:
        self._conversation = conversation
        self._channel = channel
        self._client = client
        self._wake_name = wake_name
        self._names: dict[int, str] = {}

    @property
    def channel_id(self) -> int:
        return self._channel.id

    def remember_name(self, user_id: int) -> None:
        """Note a speaker's name while they are here: without the members intent discord.py forgets
        a member the moment they leave voice, and their last words are answered after that."""
        member = self._channel.guild.get_member(user_id) or self._client.get_user(user_id)
        if member is not None:
            self._names[user_id] = member.display_name

    async def respond(self, user_id: int, text: str, stream: TextSink) -> str:
        try:
            return (
                await self._conversation.reply(self._message(user_id, text), stream=stream)
            ).text
        except Exception:
            # The conversation apologises for LLM failures itself (ORCH-6); this covers anything else.
            logger.exception("discord voice: reply failed in channel %s", self._channel.id)
            return ERROR_APOLOGY

    def _message(self, user_id: int, text: str) -> IncomingMessage:
        channel = self._channel
        self.remember_name(user_id)
        others = tuple(
            (str(m.id), m.display_name) for m in channel.members if not m.bot and m.id != user_id
        )
        return IncomingMessage(
            platform="discord",
            channel_id=str(channel.id),
            author_id=str(user_id),
            author_name=self._names.get(user_id, str(user_id)),
            text=text,
            guild_id=str(channel.guild.id),
            participants=others,
            created_at=time.time(),
            modality="voice",
            addressed=self._names_me(text),
        )

    def _names_me(self, text: str) -> bool:
        """Speech has no mentions: the bot is spoken to when its name is heard: the persona's (ORCH-7) when one
        is given, else its Discord name (the conversation also knows its own name and who it answered last)."""
        me = self._client.user
        name = (
            self._wake_name()
            if self._wake_name is not None
            else (me.display_name if me is not None else "")
        )
        return (
            bool(name)
            and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None
        )


@dataclass(slots=True)
class _Connection:
    vc: voice_recv.VoiceRecvClient
    hub: ReceiveHub
    session: VoiceSession
    responder: _Responder
    sink: _Sink
    monitor: asyncio.Task[None] | None = None
    unconnected_since: float | None = None


class DiscordVoice:
    """Joins voice channels on a (logged-in) ``discord.Client``; one session per guild."""

    def __init__(
        self,
        client: discord.Client,
        conversation: Conversation,
        stt: SpeechToText,
        tts: TextToSpeech,
        settings: VoiceSettings = VoiceSettings(),
        *,
        connect_timeout: float = 30.0,
        tick_s: float = TICK_S,
        wake_name: Callable[[], str] | None = None,
    ) -> None:
        self.client = client
        self._wake_name = wake_name  # the name that wakes the bot in speech (the persona's), read at each utterance
        self._conversation = conversation
        self._stt, self._tts = stt, tts
        self.settings = settings
        self._connect_timeout = connect_timeout
        self._tick_s = tick_s
        self._connections: dict[int, _Connection] = {}
        # a monitor may be mid-leave: close() awaits it
        self._monitors: set[asyncio.Task[None]] = set()

    def session(self, guild_id: int) -> VoiceSession | None:
        connection = self._connections.get(guild_id)
        return connection.session if connection else None

    def channel(self, guild_id: int) -> discord.VoiceChannel | discord.StageChannel | None:
        connection = self._connections.get(guild_id)
        return connection.vc.channel if connection else None

    async def join(self, channel: discord.VoiceChannel) -> VoiceSession:
        """Connect to ``channel`` (moving there if already in another one of its guild) and listen."""
        try:
            discord.opus.Decoder.get_opus_version()  # loads libopus, or says it cannot
        except discord.opus.OpusNotLoaded:
            raise AdapterError(
                "voice needs the Opus library: install libopus0 (see README)"
            ) from None
        await self.leave(channel.guild.id, reason="moving")
        try:
            vc = await channel.connect(
                cls=voice_recv.VoiceRecvClient,
                timeout=self._connect_timeout,
                self_deaf=False,
                reconnect=True,
            )
        except (TimeoutError, discord.ClientException) as exc:
            raise AdapterError(f"could not join voice channel {channel.id}: {exc}") from exc
        responder = _Responder(self._conversation, channel, self.client, self._wake_name)
        session = VoiceSession(self._stt, self._tts, responder, _Player(vc), self.settings)
        hub = ReceiveHub(
            session.speech_started,
            session.utterance_ready,
            vad=self.settings.vad,
            turn=self.settings.turn,
        )
        connection = _Connection(vc, hub, session, responder, _Sink(hub))
        self._connections[channel.guild.id] = connection
        session.start()
        vc.listen(connection.sink)
        connection.monitor = asyncio.create_task(
            self._watch(channel.guild.id, connection), name="voice-monitor"
        )
        self._monitors.add(connection.monitor)
        connection.monitor.add_done_callback(self._monitors.discard)
        logger.info("discord voice: joined %s in guild %s", channel.id, channel.guild.id)
        return session

    async def leave(self, guild_id: int, reason: str = "asked") -> bool:
        """Disconnect from the guild's voice channel; False when not in one."""
        connection = self._connections.pop(guild_id, None)
        if connection is None:
            return False
        monitor = connection.monitor
        if monitor is not None and monitor is not asyncio.current_task():
            monitor.cancel()
        await connection.session.close()
        channel_id = connection.responder.channel_id
        if connection.vc.is_connected():
            connection.vc.stop()
            await connection.vc.disconnect(force=True)
        logger.info("discord voice: left guild %s (%s)", guild_id, reason)
        await self._session_ended(guild_id, channel_id)
        return True

    async def _session_ended(self, guild_id: int, channel_id: int) -> None:
        """The conversation keeps the session's summary (CROSS-1); after leaving, so nobody hears the bot wait for it."""
        try:
            await self._conversation.voice_ended("discord", str(guild_id), str(channel_id))
        except (
            Exception
        ):  # an adapter edge: a failing summary must not keep the bot in (or out of) voice
            logger.exception("discord voice: could not close the session of channel %s", channel_id)

    async def close(self) -> None:
        """Leave every channel, waiting for leaves already under way (the client must not close mid-leave)."""
        for guild_id in list(self._connections):
            await self.leave(guild_id, reason="shutting down")
        await asyncio.gather(*self._monitors, return_exceptions=True)

    async def _watch(self, guild_id: int, connection: _Connection) -> None:
        """Every tick: close finished utterances, attribute SSRCs, and leave an empty or idle channel."""
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                self._attribute(connection)
                connection.hub.tick()
                reason = self._reason_to_leave(connection)
            except Exception:  # one bad tick is logged; the next one tries again
                logger.exception("discord voice: monitoring guild %s failed", guild_id)
                continue
            if reason:
                await self.leave(guild_id, reason)
                return

    @staticmethod
    def _attribute(connection: _Connection) -> None:
        """Tie streams heard so far to users, once the voice gateway's SPEAKING event has named them."""
        for ssrc in (
            connection.sink.waiting()
        ):  # frames held still encrypted: open them first, then attribute
            user_id = connection.vc._get_id_from_ssrc(ssrc)
            if user_id is not None:
                connection.sink.release(ssrc, user_id)
        for ssrc in connection.hub.unattributed():
            user_id = connection.vc._get_id_from_ssrc(ssrc)
            if user_id is not None:
                connection.responder.remember_name(user_id)
                connection.hub.attribute(ssrc, user_id)

    def _reason_to_leave(self, connection: _Connection) -> str | None:
        if not connection.vc.is_connected():
            # discord.py reconnects by itself after a network blip; give up only when that took too long.
            since = connection.unconnected_since = connection.unconnected_since or time.monotonic()
            return "disconnected" if time.monotonic() - since > self._connect_timeout else None
        connection.unconnected_since = None
        if not any(not m.bot for m in connection.vc.channel.members):
            return "the channel is empty"
        if connection.session.idle_for() > self.settings.idle_timeout_s:
            return f"nobody spoke for {self.settings.idle_timeout_s:.0f} s"
        return None


def register_voice_commands(tree: app_commands.CommandTree, voice: DiscordVoice) -> None:
    """``/voice join`` (the caller's current voice channel) and ``/voice leave``, answered ephemerally."""
    group = app_commands.Group(
        name="voice", description="Talk with me in a voice channel", guild_only=True
    )

    @group.command(name="join", description="Join the voice channel you are in")
    async def join(interaction: discord.Interaction) -> None:
        state = getattr(interaction.user, "voice", None)
        if state is None or state.channel is None:
            await interaction.response.send_message(
                "Join a voice channel first, then ask again.", ephemeral=True
            )
            return
        # connecting can take seconds
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            await voice.join(state.channel)
        except AdapterError as exc:
            logger.warning("discord voice: /voice join failed: %s", exc)
            await interaction.followup.send("I could not join that channel, sorry.", ephemeral=True)
            return
        await interaction.followup.send(f"Joined {state.channel.name}. Talk to me!", ephemeral=True)

    @group.command(name="leave", description="Leave the voice channel")
    async def leave(interaction: discord.Interaction) -> None:
        left = await voice.leave(interaction.guild_id or 0)
        await interaction.response.send_message(
            "Bye!" if left else "I am not in a voice channel.", ephemeral=True
        )

    tree.add_command(group)


def _log_player_error(error: Exception | None) -> None:
    if error is not None:
        logger.error("discord voice: playback failed", exc_info=error)

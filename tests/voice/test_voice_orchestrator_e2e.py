"""Voice end to end with the real orchestrator: the real bot joins a voice channel on the local fake Discord,
hears espeak-ng speech as encrypted Opus RTP, transcribes it with the bundled Whisper, answers through the
Orchestrator (real store, the openai SDK against the scripted FakeOpenAI) and speaks back; the fake
decrypts the bot's audio and Whisper transcribes it again.
"""

from __future__ import annotations

import aiohttp
import pytest
from conftest import remember

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.discord_voice import DiscordVoice, register_voice_commands
from memory.clock import FakeClock
from memory.models import Scope
from tests.fakes.discord_voice_server import FakeVoiceServer
from tests.pg_support import ON_BOTH_ENGINES
from tests.pipeline_support import build_runtime
from tests.voice_support import (
    ALICE,
    BOB,
    GUILD,
    LOUNGE,
    eventually,
    routed_model,
    silence,
    spoken,
    whisper,
)
from voice.audio import discord_to_listen
from voice.session import VoiceSettings
from voice.tts import EspeakTTS
from voice.vad import VadSettings

ALICE_SSRC = 111
SETTINGS = VoiceSettings(vad=VadSettings(end_pause_ms=500), idle_timeout_s=60)


@pytest.fixture
async def rt(tmp_path, srv, runtime_store):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), **runtime_store)
    await runtime.start(background_loop=False)
    yield runtime
    await runtime.stop()


@pytest.fixture
async def voice(dsc, voice_server, rt):
    """The Discord adapter and voice on the runtime's orchestrator; Alice is in the Lounge, and the bot joined it."""
    adapter = DiscordAdapter(
        rt.orchestrator, "bot-token", guild_ready_timeout=0.05, ready_timeout=30
    )
    adapter.client.http.connector = aiohttp.TCPConnector(ssl=voice_server.client_ssl())
    voice = DiscordVoice(
        adapter.client, rt.orchestrator, whisper(), EspeakTTS(), SETTINGS, tick_s=0.05
    )
    register_voice_commands(adapter.client.tree, voice)
    await adapter.start()
    await dsc.set_voice_state(GUILD, ALICE, LOUNGE, "alice")
    await eventually(lambda: adapter.client.get_channel(LOUNGE).members)
    try:
        yield voice
    finally:
        await voice.close()
        await adapter.stop()


async def join(voice: DiscordVoice, voice_server: FakeVoiceServer) -> None:
    await voice.join(voice.client.get_channel(LOUNGE))
    await voice_server.wait_until(lambda: voice_server.connected, timeout=60)


def voice_rows(rt) -> list[dict]:
    return rt.engine.db.rows(
        "SELECT role, content, modality, channel_id FROM messages ORDER BY created_at, role DESC"
    )


@ON_BOTH_ENGINES
async def test_a_voice_question_is_answered_by_the_orchestrator_with_memory_and_stored_as_voice(
    rt, srv, voice, voice_server
):
    remember(
        rt.engine,
        "Alice's tent is bright orange",
        scope=Scope.USER,
        scope_id=f"discord:{ALICE}",
        guild_id=f"discord:{GUILD}",
    )
    srv.default = routed_model(
        ["Hello Alice. Your tent is orange."], summary="Alice asked about her orange tent."
    )
    await join(voice, voice_server)

    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("Tell me about my camping trip.") + silence(0.3)
    )
    heard = (
        whisper()
        .transcribe(discord_to_listen(await voice_server.wait_for_bot_audio(seconds=1.0)), 16000)
        .lower()
    )
    assert "orange" in heard or "alice" in heard, heard

    reply_request = next(b for b in srv.chat_requests if b.get("tools"))
    system = reply_request["messages"][0]["content"]
    assert "live voice conversation" in system and "one to three short spoken sentences" in system
    # the memory stored beforehand reached the voice prompt
    assert "Alice's tent is bright orange" in system
    assert "[SKIP]" not in system  # alone with the bot: every turn is for it
    await eventually(lambda: len(voice_rows(rt)) == 2)
    user, bot = voice_rows(rt)
    assert (user["role"], user["modality"], user["channel_id"]) == (
        "user",
        "voice",
        str(LOUNGE),
    ) and "camping" in user["content"].lower()
    assert (bot["role"], bot["modality"], bot["content"]) == (
        "assistant",
        "voice",
        "Hello Alice. Your tent is orange.",
    )

    await voice.leave(GUILD)  # the session ends: its summary is kept for the guild (CROSS-1)
    (summary,) = rt.engine.db.rows("SELECT * FROM session_summaries")
    assert (summary["modality"], summary["guild_id"], summary["channel_id"]) == (
        "voice",
        f"discord:{GUILD}",
        str(LOUNGE),
    )
    assert (
        summary["text"] == "Alice asked about her orange tent."
        and f"discord:{ALICE}" in summary["participants"]
    )


async def test_voice_skip_with_two_people_present_stores_the_turn_and_plays_nothing(
    rt, srv, voice, voice_server, dsc
):
    await dsc.set_voice_state(GUILD, BOB, LOUNGE, "bob")
    await eventually(lambda: len(voice.client.get_channel(LOUNGE).members) == 2)
    srv.default = routed_model(["[SKIP]"])
    await join(voice, voice_server)

    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("Bob, shall we order pizza tonight?") + silence(0.3)
    )
    await eventually(
        lambda: voice.session(GUILD) is not None and voice.session(GUILD).turns, timeout=60
    )
    (turn,) = voice.session(GUILD).turns
    assert turn.spoken == () and voice_server.bot_packets == 0
    system = next(b for b in srv.chat_requests if b.get("tools"))["messages"][0]["content"]
    assert "answer exactly [SKIP]" in system
    (row,) = voice_rows(rt)  # the turn is kept; no reply was stored
    assert (row["role"], row["modality"]) == ("user", "voice") and "pizza" in row["content"].lower()

"""Voice end to end, offline: the real discord.py + voice-recv bot joins a voice channel on the local fake
Discord, hears a user's (espeak-ng) speech as encrypted Opus RTP, transcribes it with the bundled
Whisper, hands it to the conversation, and speaks the reply, which the fake decrypts and transcribes.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.discord_voice import DiscordVoice, register_voice_commands
from tests.adapter_support import ScriptedConversation
from tests.fakes.discord_voice_server import FakeVoiceServer
from tests.voice_support import (
    ALICE,
    BOB,
    GUILD,
    LOUNGE,
    TEXT_CHANNEL,
    DaveStandIn,
    eventually,
    silence,
    spoken,
    whisper,
)
from voice.audio import discord_to_listen
from voice.session import VoiceSettings
from voice.tts import EspeakTTS
from voice.vad import VadSettings

ALICE_SSRC, BOB_SSRC = 111, 222
SETTINGS = VoiceSettings(vad=VadSettings(end_pause_ms=500), idle_timeout_s=60)


@pytest.fixture
def conv() -> ScriptedConversation:
    return ScriptedConversation()


@pytest.fixture
async def voice(dsc, voice_server, conv):
    """A started text adapter with voice on its client; Alice is already in the Lounge."""
    adapter = DiscordAdapter(conv, "bot-token", guild_ready_timeout=0.05, ready_timeout=30)
    # Discord's voice URL is always wss://: the bot's HTTP session must trust the fake's certificate.
    adapter.client.http.connector = aiohttp.TCPConnector(ssl=voice_server.client_ssl())
    voice = DiscordVoice(adapter.client, conv, whisper(), EspeakTTS(), SETTINGS, tick_s=0.05)
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


async def test_a_spoken_question_is_transcribed_answered_and_spoken_back(
    voice, voice_server, dsc, conv
):
    conv.script.append("Hello Alice. It is sunny today.")
    await join(voice, voice_server)
    assert (
        voice_server.identifies[0]["server_id"] == str(GUILD)
        and voice_server.selected[0]["data"]["mode"]
    )

    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("What is the weather like today?") + silence(0.3)
    )
    await conv.wait_until(lambda: conv.replies, timeout=60)
    (message,) = conv.replies
    assert (message.modality, message.author_id, message.author_name) == (
        "voice",
        str(ALICE),
        "alice",
    )
    assert (message.channel_id, message.guild_id) == (str(LOUNGE), str(GUILD))
    assert "weather" in message.text.lower()

    bot_audio = await voice_server.wait_for_bot_audio(seconds=1.0)
    heard = whisper().transcribe(discord_to_listen(bot_audio), 16000).lower()
    assert "alice" in heard or "sunny" in heard, heard
    assert 1 in voice_server.bot_speaking  # the bot said it was speaking before it sent audio
    (turn,) = voice.session(GUILD).turns
    assert turn.spoken == ("Hello Alice.", "It is sunny today.") and not turn.interrupted
    # the real adapter's hub starts Whisper at the pause
    assert voice.session(GUILD).speculation.started >= 1


async def test_voice_heard_before_the_speaking_event_is_attributed_once_it_arrives(
    voice, voice_server, conv
):
    await join(voice, voice_server)
    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("Good morning to you.") + silence(0.6), announce=False
    )
    assert conv.replies == []  # heard, but nobody knows whose voice it is yet: held, not dropped
    await voice_server.announce(ALICE, ALICE_SSRC)
    await conv.wait_until(lambda: conv.replies, timeout=60)
    assert conv.replies[0].author_id == str(ALICE) and "morning" in conv.replies[0].text.lower()


async def test_end_to_end_encrypted_speech_sent_before_the_speaker_is_named_is_held_then_heard_whole(
    voice, voice_server, conv
):
    await join(voice, voice_server)
    dave = voice.client.voice_clients[0]._connection.dave_session = DaveStandIn()
    # The first 1.2 s ("Hello, please remind me": who is addressed, and what for) arrive before SPEAKING names the sender.
    said = spoken("Hello, please remind me to call my mother.") + silence(0.3)
    await voice_server.speak(ALICE, ALICE_SSRC, said, dave=True, announce_after=60)
    await conv.wait_until(lambda: conv.replies, timeout=60)
    (message,) = conv.replies
    assert message.author_id == str(ALICE) and message.text.lower().startswith(
        "hello, please remind me"
    ), message.text
    assert dave.decrypted[ALICE] >= 60  # the held frames were opened with Alice's key, not dropped


async def test_held_encrypted_speech_is_used_when_speaking_comes_only_after_it_ended(
    voice, voice_server, conv
):
    await join(voice, voice_server)
    voice.client.voice_clients[0]._connection.dave_session = DaveStandIn()
    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("Good morning to you.") + silence(0.3), dave=True, announce=False
    )
    assert conv.replies == [] and voice.session(GUILD).turns == []
    await voice_server.announce(ALICE, ALICE_SSRC)
    await conv.wait_until(lambda: conv.replies, timeout=60)
    assert conv.replies[0].author_id == str(ALICE) and "morning" in conv.replies[0].text.lower()


async def test_the_bot_leaves_voice_when_the_last_person_leaves(voice, voice_server, dsc):
    await join(voice, voice_server)
    await dsc.set_voice_state(GUILD, ALICE, None, "alice")
    await eventually(
        lambda: voice.session(GUILD) is None and not voice.client.voice_clients, timeout=60
    )
    assert [j["channel_id"] and int(j["channel_id"]) for j in dsc.voice_joins] == [LOUNGE, None]


async def test_two_people_speaking_at_once_are_each_answered(voice, voice_server, dsc, conv):
    await dsc.set_voice_state(GUILD, BOB, LOUNGE, "bob")
    await join(voice, voice_server)
    await asyncio.gather(
        voice_server.speak(ALICE, ALICE_SSRC, spoken("I like green apples.") + silence(0.3)),
        voice_server.speak(
            BOB, BOB_SSRC, silence(0.2) + spoken("My dog is called Rex.") + silence(0.3)
        ),
    )
    await conv.wait_until(lambda: len(conv.replies) == 2, timeout=30)
    by_author = {m.author_id: m.text.lower() for m in conv.replies}
    assert "apple" in by_author[str(ALICE)] and "rex" in by_author[str(BOB)]
    alice_turn = next(m for m in conv.replies if m.author_id == str(ALICE))
    assert alice_turn.participants == ((str(BOB), "bob"),)


async def test_two_people_talking_over_each_other_before_either_is_named_are_each_heard_as_themselves(
    voice, voice_server, dsc, conv
):
    await dsc.set_voice_state(GUILD, BOB, LOUNGE, "bob")
    await join(voice, voice_server)
    voice.client.voice_clients[0]._connection.dave_session = DaveStandIn()
    await asyncio.gather(
        voice_server.speak(
            ALICE,
            ALICE_SSRC,
            spoken("I like green apples.") + silence(0.3),
            dave=True,
            announce_after=30,
        ),
        voice_server.speak(
            BOB,
            BOB_SSRC,
            spoken("My dog is called Rex.") + silence(0.3),
            dave=True,
            announce_after=40,
        ),
    )
    await conv.wait_until(lambda: len(conv.replies) == 2, timeout=30)
    by_author = {m.author_id: m.text.lower() for m in conv.replies}
    assert "apple" in by_author[str(ALICE)] and "rex" in by_author[str(BOB)]


async def test_someone_who_leaves_mid_sentence_is_still_heard(voice, voice_server, dsc, conv):
    await dsc.set_voice_state(GUILD, BOB, LOUNGE, "bob")
    await join(voice, voice_server)
    # no pause after it
    await voice_server.speak(BOB, BOB_SSRC, spoken("Tell Alice I said goodbye."))
    # the receive thread's jitter buffer drains (it is dropped when a user leaves)
    await asyncio.sleep(0.1)
    await voice_server.disconnect_user(BOB)
    await dsc.set_voice_state(GUILD, BOB, None, "bob")
    await conv.wait_until(lambda: conv.replies, timeout=60)
    (message,) = conv.replies
    assert (message.author_id, message.author_name) == (
        str(BOB),
        "bob",
    ) and "goodbye" in message.text.lower()


async def test_speaking_over_the_bot_stops_its_reply(voice, voice_server, dsc, conv):
    long_reply = " ".join(
        f"This is sentence number {n} of a very long answer." for n in range(1, 7)
    )
    conv.script.extend([long_reply, "Sure, I will stop."])
    await join(voice, voice_server)
    await voice_server.speak(ALICE, ALICE_SSRC, spoken("Tell me a long story.") + silence(0.3))
    # a second of the story
    await voice_server.wait_until(lambda: voice_server.bot_packets > 50, timeout=60)
    await voice_server.speak(
        ALICE, ALICE_SSRC, spoken("Stop please.") + silence(0.3), announce=False
    )
    await conv.wait_until(lambda: len(conv.replies) == 2, timeout=60)
    first = voice.session(GUILD).turns[0]
    assert first.interrupted
    played_s = len(await voice_server.wait_for_bot_audio(seconds=0.5)) / (48000 * 4)
    assert played_s < 12  # the story alone is ~20 s of speech
    # Measured at the fake: the bot's audio after Alice's first sound. The aim is 300 ms (VAD onset 200 ms, then the
    # cancel and the frame in flight; companion bench voice reports it exactly). Alone this test measures 0.2-0.4 s;
    # with other engineers' suites on the same two cores it measured up to 1.9 s, so the bound here only says the
    # bot stopped long before its ~20 s story would have.
    assert voice_server.bot_talked_over(ALICE_SSRC) < 5.0


async def test_voice_join_and_leave_commands_follow_the_caller(voice, voice_server, dsc):
    await dsc.wait_until(lambda: dsc.commands.get(None) is not None)
    await dsc.dispatch_interaction(
        "voice",
        user_id=ALICE,
        channel_id=TEXT_CHANNEL,
        guild_id=GUILD,
        options=[{"name": "join", "type": 1, "options": []}],
    )
    await dsc.wait_until(lambda: dsc.followups, timeout=60)
    assert voice.channel(GUILD).id == LOUNGE and "Joined Lounge" in dsc.followups[0]["content"]
    await dsc.dispatch_interaction(
        "voice",
        user_id=ALICE,
        channel_id=TEXT_CHANNEL,
        guild_id=GUILD,
        options=[{"name": "leave", "type": 1, "options": []}],
    )
    await dsc.wait_until(lambda: len(dsc.interaction_responses) == 2)
    assert voice.session(GUILD) is None


async def test_voice_join_asks_the_caller_to_join_a_channel_first(voice, dsc):
    await dsc.wait_until(lambda: dsc.commands.get(None) is not None)
    await dsc.dispatch_interaction(
        "voice",
        user_id=BOB,
        channel_id=TEXT_CHANNEL,
        guild_id=GUILD,
        options=[{"name": "join", "type": 1, "options": []}],
    )
    (answer,) = await dsc.wait_for_interaction_responses(1)
    assert "Join a voice channel first" in str(answer) and voice.session(GUILD) is None

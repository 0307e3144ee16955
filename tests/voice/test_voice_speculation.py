"""Speculative transcription: speech-to-text starts when a speaker pauses, and the turn takes that transcript
only if the pause turned out to be the end of the utterance.

The hub and the session are the real ones, wired as ``DiscordVoice`` wires them (the hub finds the session's
``speech_paused`` itself); speech is espeak-ng's, the clock a ``FakeClock``, and speech-to-text is scripted at
its Protocol edge so the test knows which audio each call got.
"""

from __future__ import annotations

import pytest

from memory.clock import FakeClock
from tests.voice_support import ScriptedSTT, ThreadPlayer, ToneTTS, eventually, silence, spoken
from voice.audio import DISCORD_FRAME_BYTES
from voice.providers import TranscriptionFailed
from voice.receive import ReceiveHub, Utterance
from voice.session import VoiceSession, VoiceSettings, same_speech
from voice.vad import VadSettings

ALICE, SSRC = 3003, 11


class Responder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def respond(self, user_id: int, text: str, stream) -> str:
        self.asked.append(text)
        await stream("Okay.")
        return "Okay."


class Pauses:
    """What the hub reports, for the hub-only tests."""

    def __init__(self) -> None:
        self.utterances: list[Utterance] = []
        self.paused: list[Utterance] = []

    def utterance_ready(self, utterance: Utterance) -> None:
        self.utterances.append(utterance)

    def speech_paused(self, so_far: Utterance) -> None:
        self.paused.append(so_far)


def feed(hub: ReceiveHub, clock: FakeClock, pcm: bytes) -> None:
    for i in range(0, len(pcm), DISCORD_FRAME_BYTES):
        hub.feed(SSRC, pcm[i : i + DISCORD_FRAME_BYTES])
        clock.advance(0.02)


def wired(
    stt: ScriptedSTT, responder: Responder, vad: VadSettings = VadSettings()
) -> tuple[VoiceSession, ReceiveHub, FakeClock]:
    clock = FakeClock()
    session = VoiceSession(
        stt, ToneTTS(0.05), responder, ThreadPlayer(speed=16), VoiceSettings(vad=vad)
    )
    hub = ReceiveHub(session.speech_started, session.utterance_ready, vad=vad, clock=clock)
    hub.attribute(SSRC, ALICE)
    session.start()
    return session, hub, clock


# -- the hub ---------------------------------------------------------------------------------------------------
def test_voice_hub_reports_a_pause_once_with_exactly_the_audio_the_utterance_then_ends_with():
    seen, clock = Pauses(), FakeClock()
    hub = ReceiveHub(lambda *_: None, seen.utterance_ready, clock=clock)
    hub.attribute(SSRC, ALICE)
    feed(hub, clock, spoken("Good evening everybody.") + silence(1.0))
    (guess,) = seen.paused
    (utterance,) = seen.utterances
    assert guess.ssrc == utterance.ssrc and same_speech(guess.pcm16, utterance.pcm16)
    # + <= 200 ms of pause
    assert (
        utterance.pcm16.startswith(guess.pcm16) and len(utterance.pcm16) - len(guess.pcm16) <= 6400
    )


def test_voice_hub_guesses_again_after_speech_resumes():
    seen, clock = Pauses(), FakeClock()
    hub = ReceiveHub(lambda *_: None, seen.utterance_ready, clock=clock)
    hub.attribute(SSRC, ALICE)
    feed(
        hub, clock, spoken("I like green apples.") + silence(0.1) + spoken("My dog is called Rex.")
    )
    # one guess per pause; espeak's own tail is a pause
    assert len(seen.paused) == 2 and seen.utterances == []
    first, second = seen.paused
    assert len(first.pcm16) < len(second.pcm16) and second.pcm16.startswith(first.pcm16[:32000])
    clock.advance(0.8)
    hub.tick()
    (utterance,) = seen.utterances
    assert same_speech(second.pcm16, utterance.pcm16) and not same_speech(
        first.pcm16, utterance.pcm16
    )


def test_voice_hub_without_a_pause_listener_or_with_speculation_off_guesses_nothing():
    clock, ended = FakeClock(), []
    # a plain function: nobody to tell
    plain = ReceiveHub(lambda *_: None, ended.append, clock=clock)
    feed(plain, clock, spoken("Good evening everybody.") + silence(1.0))
    seen = Pauses()
    off = ReceiveHub(
        lambda *_: None, seen.utterance_ready, vad=VadSettings(speculate_after_ms=0), clock=clock
    )
    plain.attribute(SSRC, ALICE)
    off.attribute(SSRC, ALICE)
    feed(off, clock, spoken("Good evening everybody.") + silence(1.0))
    assert len(ended) == 1 and seen.paused == [] and len(seen.utterances) == 1
    with pytest.raises(ValueError):
        VadSettings(speculate_after_ms=-1)


# -- the session -------------------------------------------------------------------------------------------------
async def test_voice_a_real_end_uses_the_speculative_transcript_and_runs_stt_once():
    stt, responder = ScriptedSTT("Good evening everybody."), Responder()
    session, hub, clock = wired(stt, responder)
    feed(hub, clock, spoken("Good evening everybody.") + silence(1.0))
    await eventually(lambda: session.turns)
    # a second call would have failed
    assert responder.asked == ["Good evening everybody."] and len(stt.audio) == 1
    assert (session.speculation.started, session.speculation.used, session.speculation.failed) == (
        1,
        1,
        0,
    )
    await session.close()


async def test_voice_a_pause_that_was_not_the_end_never_makes_a_turn_from_the_partial_audio():
    stt, responder = (
        ScriptedSTT("PARTIAL", "I like green apples. My dog is called Rex."),
        Responder(),
    )
    session, hub, clock = wired(stt, responder)
    feed(
        hub,
        clock,
        spoken("I like green apples.")
        + silence(0.1)
        + spoken("My dog is called Rex.")
        + silence(1.0),
    )
    await eventually(lambda: session.turns)
    await eventually(lambda: len(stt.audio) == 2)
    assert (
        responder.asked == ["I like green apples. My dog is called Rex."]
        and len(session.turns) == 1
    )
    assert "PARTIAL" not in {t.heard for t in session.turns}
    # the partial guess was on less speech, then thrown away
    assert not same_speech(stt.audio[0], stt.audio[1])
    assert (session.speculation.started, session.speculation.used) == (2, 1)
    await session.close()


async def test_voice_a_failed_speculative_transcription_falls_back_to_transcribing_the_utterance():
    stt, responder = (
        ScriptedSTT(TranscriptionFailed("whisper is busy"), "Good evening everybody."),
        Responder(),
    )
    session, hub, clock = wired(stt, responder)
    feed(hub, clock, spoken("Good evening everybody.") + silence(1.0))
    await eventually(lambda: session.turns)
    assert (
        responder.asked == ["Good evening everybody."]
        and len(stt.audio) == 2
        and same_speech(*stt.audio)
    )
    assert (session.speculation.used, session.speculation.failed) == (0, 1)
    await session.close()


async def test_voice_speculation_off_transcribes_each_utterance_at_its_end():
    stt, responder = ScriptedSTT("Good evening everybody."), Responder()
    session, hub, clock = wired(stt, responder, VadSettings(speculate_after_ms=0))
    feed(hub, clock, spoken("Good evening everybody.") + silence(1.0))
    await eventually(lambda: session.turns)
    assert responder.asked == ["Good evening everybody."] and session.speculation.started == 0
    await session.close()

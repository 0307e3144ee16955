"""No phantom turns: what Whisper writes on noise, breath, silence and music is never a turn; short real speech
(even "thank you") is. The noises are made here with numpy, the way sox's ``synth`` makes them (white, pink and
brown noise, band-passed breath with a swell and fade, a plucked-note melody, a throbbing chord): sox is not
installed on this machine, and numpy makes the same signals with a fixed seed.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from bot.spoken.providers import OpenAISpeechToText
from tests.voice.test_voice_providers import FakeAudioAPI
from tests.voice_support import ThreadPlayer, ToneTTS, eventually, spoken, tone, whisper
from voice.audio import discord_to_listen
from voice.phantoms import Segment, kept_text, phantom_reason
from voice.receive import Utterance
from voice.session import VoiceSession

RATE = 16000
ALICE = 3003
_rng = np.random.default_rng(7)


def pcm(x: np.ndarray) -> bytes:
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def white(seconds: float, amplitude: float) -> np.ndarray:
    return _rng.normal(0, amplitude, int(seconds * RATE))


def coloured(seconds: float, amplitude: float, power: float) -> np.ndarray:
    """Pink (power 0.5) or brown (power 1) noise: white noise with its spectrum tilted by 1/f**power."""
    spectrum = np.fft.rfft(_rng.normal(0, 1, int(seconds * RATE)))
    x = np.fft.irfft(spectrum / np.arange(1, spectrum.size + 1) ** power, int(seconds * RATE))
    return x / np.abs(x).max() * amplitude


def swell(x: np.ndarray, rise_s: float, fall_s: float) -> np.ndarray:
    t = np.arange(x.size) / RATE
    return x * np.clip(np.minimum(t / rise_s, (x.size / RATE - t) / fall_s), 0, 1)


def band(x: np.ndarray, low: float, high: float) -> np.ndarray:
    spectrum, freqs = np.fft.rfft(x), np.fft.rfftfreq(x.size, 1 / RATE)
    spectrum[(freqs < low) | (freqs > high)] = 0
    return np.fft.irfft(spectrum, x.size)


def pluck(hz: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (
        0.4 * np.exp(-3 * t) * (np.sin(2 * math.pi * hz * t) + 0.5 * np.sin(4 * math.pi * hz * t))
    )


def chord(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (
        sum(np.sin(2 * math.pi * hz * t) for hz in (261.6, 329.6, 392.0))
        * 0.1
        * (1 + 0.6 * np.sin(2 * math.pi * 4 * t))
    )


def speech(text: str) -> np.ndarray:
    return np.frombuffer(discord_to_listen(spoken(text)), "<i2").astype(np.float32) / 32768


NON_SPEECH = {
    "silence with a faint hiss": white(2.0, 0.0005),
    "white noise": white(2.0, 0.05),
    "pink noise": coloured(2.0, 0.3, 0.5),
    "brown noise (a fan)": coloured(3.0, 0.5, 1.0),
    "a breath": swell(band(white(1.2, 0.3), 200, 1400), 0.4, 0.6),
    "three breaths": np.concatenate(
        [swell(band(white(1.0, 0.3), 200, 1400), 0.3, 0.6), np.zeros(RATE // 2)] * 3
    ),
    "a cough": swell(coloured(0.35, 0.8, 0.5), 0.02, 0.25),
    "a plucked melody": np.concatenate(
        [pluck(hz, 0.3) for hz in (261.6, 329.6, 392.0, 523.3, 659.3, 523.3, 392.0, 329.6)] * 2
    ),
    "a throbbing chord": chord(3.0),
    "mains hum": 0.1 * np.sin(2 * math.pi * 50 * np.arange(3 * RATE) / RATE) + white(3.0, 0.01),
}


@pytest.mark.parametrize("name", sorted(NON_SPEECH))
def test_noise_breath_silence_and_music_are_heard_as_no_words(name):
    assert whisper().transcribe(pcm(NON_SPEECH[name]), RATE) == ""


@pytest.mark.parametrize("said", ["Thank you.", "Bye.", "Yes.", "Thanks for watching!"])
def test_real_short_speech_is_kept_even_when_it_says_a_phrase_whisper_invents(said):
    assert whisper().transcribe(pcm(speech(said)), RATE).lower().strip(".!") == said.lower().strip(
        ".!"
    )


def test_a_sentence_whisper_invents_on_babble_is_dropped():
    # speech sounds, no words
    babble = speech("The weather today is sunny and warm in the mountains.")[::-1]
    assert whisper().transcribe(pcm(babble), RATE) == ""


def test_thank_you_far_quieter_than_anyone_speaking_into_a_microphone_is_dropped():
    # about -55 dBFS at its loudest
    assert whisper().transcribe(pcm(speech("Thank you.") * 0.02), RATE) == ""


def test_a_known_phrase_is_dropped_when_whisper_doubts_there_was_speech():
    loud = tone(1.5)
    assert (
        kept_text([Segment(" Thanks for watching!", no_speech_prob=0.7, avg_logprob=-0.4)], loud)
        == ""
    )
    assert (
        kept_text([Segment(" Like and subscribe.", no_speech_prob=0.1, avg_logprob=-0.9)], loud)
        == ""
    )
    assert (
        kept_text([Segment(" Thanks for watching!", no_speech_prob=0.08, avg_logprob=-0.39)], loud)
        == "Thanks for watching!"
    )


def test_a_segment_whisper_could_not_decode_is_left_out_and_the_rest_kept():
    segments = [
        Segment(" I need a new tent.", 0.1, -0.3),
        Segment(" This is the end of the show.", 0.38, -1.17),
    ]
    assert kept_text(segments, tone(3.0)) == "I need a new tent."


def test_more_words_than_the_audio_could_hold_are_dropped():
    ten_words = "one two three four five six seven eight nine ten"
    assert phantom_reason(ten_words, [], tone(0.5)) == "too short for its text"
    assert phantom_reason(ten_words, [], tone(3.0)) is None


async def test_a_phantom_is_never_answered_and_the_real_turn_after_it_is():
    asked: list[str] = []

    class Recorder:
        async def respond(self, user_id: int, text: str, stream) -> str:
            asked.append(text)
            return "Okay."

    session = VoiceSession(whisper(), ToneTTS(), Recorder(), ThreadPlayer(speed=8))
    session.start()
    try:
        for audio in (NON_SPEECH["a breath"], NON_SPEECH["a cough"], speech("Thank you.")):
            session.utterance_ready(Utterance(ssrc=1, user_id=ALICE, pcm16=pcm(audio)))
        await eventually(lambda: len(session.turns) == 1, timeout=60)
        await asyncio.sleep(0.1)
    finally:
        await session.close()
    assert asked == ["Thank you."] and [t.heard for t in session.turns] == ["Thank you."]


async def test_an_openai_compatible_transcript_of_near_silence_is_dropped():
    async with FakeAudioAPI() as api:
        api.transcripts.extend(["Thank you.", "Thank you."])
        stt = OpenAISpeechToText(api.base_url, "key")
        assert await asyncio.to_thread(stt.transcribe, pcm(white(1.0, 0.0005)), RATE) == ""
        assert (
            await asyncio.to_thread(stt.transcribe, pcm(speech("Thank you.")), RATE) == "Thank you."
        )

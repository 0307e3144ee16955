"""Cutting a speaker's audio into utterances (webrtcvad on real espeak-ng speech)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.voice_support import silence, spoken
from voice.audio import discord_to_listen
from voice.vad import FRAME_BYTES, SpeechEnd, SpeechStart, UtteranceCutter, VadSettings


def listen(pcm48_stereo: bytes) -> bytes:
    return discord_to_listen(pcm48_stereo)


def run(cutter: UtteranceCutter, pcm16: bytes) -> list:
    return [
        e
        for i in range(0, len(pcm16), FRAME_BYTES)
        for e in cutter.push(pcm16[i : i + FRAME_BYTES])
    ]


def ends(events: list) -> list[SpeechEnd]:
    return [e for e in events if isinstance(e, SpeechEnd)]


def test_one_sentence_followed_by_a_pause_is_one_utterance():
    speech = listen(spoken("The quick brown fox jumps over the lazy dog."))
    events = run(UtteranceCutter(), listen(silence(0.5)) + speech + listen(silence(1.0)))
    assert [type(e) for e in events] == [SpeechStart, SpeechEnd]
    (end,) = ends(events)
    # about the speech, not the silence around it
    assert abs(len(end.pcm16) - len(speech)) / 32000 < 0.6


def test_two_sentences_800_ms_apart_are_two_utterances():
    one, two = listen(spoken("I like green apples.")), listen(spoken("My dog is called Rex."))
    audio = one + listen(silence(0.8)) + two + listen(silence(1.0))
    events = run(UtteranceCutter(VadSettings(end_pause_ms=500)), audio)
    assert len(ends(events)) == 2


def test_silence_and_a_short_click_are_not_speech():
    click = (
        np.random.default_rng(1).normal(0, 8000, 960).astype("<i2")
    ).tobytes()  # 60 ms of noise
    events = run(
        UtteranceCutter(VadSettings(aggressiveness=0)),
        listen(silence(0.5)) + click + listen(silence(1.0)),
    )
    assert events == []


def test_speech_start_is_reported_before_the_utterance_ends():
    cutter = UtteranceCutter()
    events = run(cutter, listen(spoken("Hello there, how are you doing?")))
    assert events == [SpeechStart()] and cutter.speaking


def test_a_speaker_who_stops_sending_is_ended_by_flush():
    cutter = UtteranceCutter()
    run(cutter, listen(spoken("Hello there, how are you doing?")))
    (end,) = cutter.flush()
    assert isinstance(end, SpeechEnd) and not cutter.speaking and cutter.flush() == []


def test_a_monologue_is_cut_at_the_maximum_length():
    long_speech = listen(spoken("One two three four five six seven eight nine ten eleven twelve."))
    events = run(UtteranceCutter(VadSettings(max_utterance_s=1.0)), long_speech)
    assert len(ends(events)) >= 2 and all(len(e.pcm16) <= 32000 for e in ends(events))


def test_a_minimum_segment_below_100_ms_is_refused():
    with pytest.raises(ValueError, match="at least 100"):
        VadSettings(min_speech_ms=60)

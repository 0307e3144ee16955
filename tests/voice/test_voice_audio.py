"""Audio conversions between Discord (48 kHz stereo), listening (16 kHz mono) and TTS output, and WAVs."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.voice_support import tone
from voice.audio import (
    DISCORD_FRAME_BYTES,
    AudioFormatError,
    discord_frames,
    discord_to_listen,
    duration_s,
    mono_to_discord,
    read_wav,
    resample,
    rms,
    samples,
    to_wav,
)


def test_discord_audio_becomes_a_third_as_many_mono_samples_for_listening():
    stereo = np.array(
        [[100, 300]] * 960, dtype="<i2"
    ).tobytes()  # one 20 ms frame, channels 100 and 300
    listen = samples(discord_to_listen(stereo))
    assert len(listen) == 320 and set(listen.tolist()) == {200}


def test_tts_audio_at_any_rate_becomes_discord_stereo_of_the_same_length():
    out = mono_to_discord(tone(1.0, rate=22050), 22050)
    assert duration_s(out, 48000, channels=2) == pytest.approx(1.0, abs=0.001)
    left, right = samples(out)[0::2], samples(out)[1::2]
    assert np.array_equal(left, right) and rms(out) > 1000


def test_resampling_keeps_a_tone_at_its_pitch():
    out = samples(resample(tone(1.0, rate=16000, hz=440), 16000, 48000)).astype(float)
    crossings = np.count_nonzero(np.diff(np.signbit(out)))
    assert crossings == pytest.approx(880, abs=4)


def test_discord_frames_are_20_ms_and_the_last_is_padded_with_silence():
    frames = discord_frames(b"\x01" * (DISCORD_FRAME_BYTES * 2 + 10))
    assert [len(f) for f in frames] == [DISCORD_FRAME_BYTES] * 3
    assert frames[-1][:10] == b"\x01" * 10 and set(frames[-1][10:]) == {0}


def test_a_wav_round_trips():
    pcm = tone(0.1)
    assert read_wav(to_wav(pcm, 16000)) == (pcm, 16000)


def test_a_streamed_wav_with_an_unknown_length_is_read_to_its_end():
    wav = bytearray(to_wav(tone(0.1), 22050))
    data_at = wav.index(b"data")
    struct.pack_into("<I", wav, data_at + 4, 0xFFFFFFFF)  # what espeak-ng --stdout writes
    assert read_wav(bytes(wav)) == (tone(0.1), 22050)


def test_a_stereo_wav_is_mixed_down_to_mono():
    stereo = np.array([[1000, 3000]] * 10, dtype="<i2").tobytes()
    pcm, rate = read_wav(to_wav(stereo, 8000, channels=2))
    assert rate == 8000 and samples(pcm).tolist() == [2000] * 10


def test_bytes_that_are_not_a_wav_are_refused():
    with pytest.raises(AudioFormatError):
        read_wav(b"ID3 this is an mp3")

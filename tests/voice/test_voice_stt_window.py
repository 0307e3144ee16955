"""Whisper on a window as long as the speech (``voice.stt``): the bundled tiny.en on espeak-ng.

The short window makes a turn ~0.5 s faster; these pin what it must not lose: the words, speech that
starts with the clip, the end of a long utterance, a loop it falls into (heard on the 30 s window).
"""

from __future__ import annotations

import functools
import logging
import re

import numpy as np
import pytest

from tests.voice_support import spoken, whisper
from voice.audio import LISTEN_RATE, discord_to_listen, samples
from voice.stt import WINDOW_S, FasterWhisperSTT, bundled_model_path

HEARD_SHORT = "whisper heard a"
HEARD_AGAIN = "hearing the 30 s one"


@functools.cache
def whisper_30s() -> FasterWhisperSTT:
    """The same model on Whisper's own 30 s window: what the short window is compared with."""
    stt = FasterWhisperSTT(window_s=None)
    stt.load()
    return stt


@pytest.fixture
def heard(caplog):
    caplog.set_level(logging.DEBUG, logger="voice.stt")
    return lambda: [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("voice: whisper")
    ]


def said(text: str, words_per_minute: int = 150) -> bytes:
    """``text`` as the hub hands it to Whisper: espeak-ng via Discord's 48 kHz, at 16 kHz."""
    return discord_to_listen(spoken(text, words_per_minute))


def test_a_short_turn_is_heard_on_the_short_window_with_the_words_of_the_30_s_one(heard):
    audio = said("Please remember that my sister lives in Paris.")
    short = whisper().transcribe(audio, LISTEN_RATE).lower()
    assert "sister" in short and "paris" in short
    assert heard() == [f"voice: whisper heard a {WINDOW_S:.1f} s window"]
    full = whisper_30s().transcribe(audio, LISTEN_RATE).lower()
    assert "sister" in full and "paris" in full


def test_speech_that_starts_with_the_clip_is_heard(heard):
    # Without silence before it in the window this was "M-M-M-M-M-M-M-M-" ("Mab" or "Bob" by chance)
    audio = said("Bob, shall we order pizza tonight?")
    values = samples(audio)
    onset = int(np.nonzero(np.abs(values.astype(np.int32)) > 300)[0][0])
    text = whisper().transcribe(values[onset:].tobytes(), LISTEN_RATE).lower()
    assert "pizza" in text and "shall we order" in text
    assert any(HEARD_SHORT in line for line in heard())


def test_a_long_turn_widens_the_window_and_keeps_its_last_words(heard):
    audio = said(
        "On Saturday we drove to the lake, we put the tent up by the water, we cooked dinner "
        "over a small fire, and before we went to sleep we watched the stars come out over the "
        "mountains."
    )
    assert len(audio) / 2 / LISTEN_RATE > 10  # longer than the window's least, so it must grow
    text = whisper().transcribe(audio, LISTEN_RATE).lower()
    assert "stars" in text and "mountains" in text
    (line,) = heard()
    window_s = float(re.fullmatch(r"voice: whisper heard a ([\d.]+) s window", line)[1])
    assert window_s > WINDOW_S and window_s >= len(audio) / 2 / LISTEN_RATE + 2.5


def test_a_loop_on_the_short_window_is_heard_again_on_the_30_s_one(heard):
    # espeak-ng at 400 words a minute sends the short window round in circles ("you, you, you, ...")
    audio = said(
        "I remember you said your sister is learning the violin, and that she practises every "
        "single evening after dinner.",
        400,
    )
    text = whisper().transcribe(audio, LISTEN_RATE)
    (again,) = [line for line in heard() if HEARD_AGAIN in line]
    looped = re.search(r"\('(.*)'\)", again)[1]
    assert "you, you, you" in looped
    # the short window's loop is never what is heard; what the 30 s window makes of it is not
    # pinned: on a busy machine Whisper falls back to sampling and its reading differs run to run (a
    # CI run got "Remember, you have the order." twice where a second reading got nothing)
    assert looped not in text and "you, you, you" not in text


def test_a_model_folder_of_your_own_keeps_the_30_s_window(heard):
    own = FasterWhisperSTT(bundled_model_path())
    text = own.transcribe(said("Good morning, how did you sleep?"), LISTEN_RATE).lower()
    assert "morning" in text and not any(HEARD_SHORT in line for line in heard())

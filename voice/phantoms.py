"""Transcripts nobody said: Whisper's hallucinations, told apart from speech before they become a turn.

Whisper writes words on audio that holds none ("Thank you.", "Thanks for watching", a whole invented
sentence on babble). A turn made of them would be stored and answered, so a transcript is dropped when:

    a segment Whisper itself doubts    avg_logprob < -1.0 with no_speech_prob > 0.3 (Whisper's own no-speech
                                       rule, with 0.3 for its 0.6: reversed speech came back as "This is the
                                       end of the show..." at 0.38 / -1.17; real espeak speech decoded as
                                       badly, "Tell the lice I said goodbye" at -1.02, scored 0.07)
    the audio is too quiet             its loud frames are below -46 dBFS: nobody spoke into a microphone
    too short for its text             more than 6 words a second of sound (people say 2-4)
    a known phrase on weak evidence    "thank you", "thanks for watching", "like and subscribe", "you", ...
                                       with no_speech_prob > 0.4 or avg_logprob < -0.6; the same words said
                                       clearly (measured: "Thank you." at 0.18 / -0.20) are kept

Thresholds are from ``docs/voice.md``'s measurements with Whisper tiny.en; a provider without segment
signals (an OpenAI-compatible server) is checked on its audio and text alone.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from .audio import LISTEN_RATE

# Phrases Whisper is known to write on silence, breath and noise (the video subtitles it was trained on).
KNOWN_PHRASES = frozenset(
    {
        "you",
        "thank you",
        "thanks",
        "thank you very much",
        "thanks for watching",
        "thank you for watching",
        "thanks for listening",
        "thank you for listening",
        "like and subscribe",
        "please subscribe",
        "subscribe",
        "dont forget to like and subscribe",
        "see you next time",
        "bye",
    }
)
_FRAME = LISTEN_RATE // 50  # 20 ms


@dataclass(frozen=True, slots=True)
class Segment:
    """What Whisper said about one stretch of audio: its words and how sure it was."""

    text: str
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0


LOOP_RATIO = 2.4  # Whisper's compression-ratio limit
LOOP_LETTERS = 8  # this many letters, of one or two kinds only, are no word


@dataclass(frozen=True, slots=True)
class PhantomRules:
    logprob_below: float = -1.0
    no_speech_above: float = 0.3
    min_level: float = 0.005  # RMS (of full scale) of the loudest tenth of 20 ms frames: -46 dBFS
    max_words_per_s: float = 6.0
    phrase_no_speech_above: float = 0.4
    phrase_logprob_below: float = -0.6


def kept_text(segments: list[Segment], pcm16: bytes, rules: PhantomRules = PhantomRules()) -> str:
    """The transcript of 16 kHz mono ``pcm16`` with Whisper's doubted segments left out; "" when it is a phantom."""
    sure = [s for s in segments if not _doubted(s, rules)]
    text = " ".join(s.text.strip() for s in sure).strip()
    return "" if phantom_reason(text, sure, pcm16, rules) else text


def phantom_reason(
    text: str, segments: list[Segment], pcm16: bytes, rules: PhantomRules = PhantomRules()
) -> str | None:
    """Why ``text`` is not taken as said over ``pcm16`` (None: it is taken)."""
    words = _words(text)
    if not words:
        return "no words"
    if _looped(text):
        return "a loop"
    level, sounding_s = _loudness(pcm16)
    if level < rules.min_level:
        return "too quiet for speech"
    if len(words.split()) > rules.max_words_per_s * max(sounding_s, 0.2):
        return "too short for its text"
    if words in KNOWN_PHRASES and _weak(segments, rules):
        return "a phrase Whisper writes on non-speech"
    return None


def _doubted(segment: Segment, rules: PhantomRules) -> bool:
    return (
        segment.avg_logprob < rules.logprob_below and segment.no_speech_prob > rules.no_speech_above
    )


def _weak(segments: list[Segment], rules: PhantomRules) -> bool:
    """Whisper was unsure it heard speech. A provider that gives no signals (no segments) is taken at its word."""
    return any(
        s.no_speech_prob > rules.phrase_no_speech_above
        or s.avg_logprob < rules.phrase_logprob_below
        for s in segments
    )


def _looped(text: str) -> bool:
    """A loop: a text that compresses more than Whisper's own 2.4 limit, or one or two letters said
    over and over ("A-a-a-a-a-a-a-a-a-a-a-a-" on three breaths, "Mmmmmmmm"). Seen once another
    library's OpenMP runtime was loaded in the process (the multilingual embedding model), which
    moves Whisper's sums by a rounding."""
    data = text.encode()
    letters = [c for c in text.lower() if c.isalpha()]
    if len(letters) >= LOOP_LETTERS and len(set(letters)) <= 2:
        return True
    return len(data) > 24 and len(data) / len(zlib.compress(data)) > LOOP_RATIO


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())


def _loudness(pcm16: bytes) -> tuple[float, float]:
    """(RMS of the loudest tenth of 20 ms frames, seconds of frames within 30 dB of that)."""
    samples = np.frombuffer(pcm16[: len(pcm16) // 2 * 2], "<i2").astype(np.float32) / 32768
    frames = samples[: samples.size // _FRAME * _FRAME].reshape(-1, _FRAME)
    if not frames.size:
        return 0.0, 0.0
    rms = np.sqrt((frames**2).mean(axis=1))
    level = float(np.percentile(rms, 90))
    return level, float((rms > level * 0.03).sum()) * _FRAME / LISTEN_RATE

"""Cutting one speaker's audio into utterances with webrtcvad (20 ms frames at 16 kHz mono).

    idle --voiced frame--> candidate --(voiced >= min_speech)--> speaking --(pause >= end_pause)--> SpeechEnd
      ^                       |                                     |
      +---pause >= end_pause--+  (a click or a cough: dropped)      +--(length >= max_utterance)--> SpeechEnd

``SpeechStart`` is reported as soon as a candidate has ``min_speech_ms`` of voiced frames: that is the
moment barge-in may stop the bot. A few hundred ms from before the first voiced frame are kept
(``pre_roll_ms``) because the VAD fires late and Whisper mishears clipped onsets. No clock: time is
counted in frames, so a test can feed a minute of audio in a millisecond.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import webrtcvad

from .audio import FRAME_MS, LISTEN_RATE

FRAME_BYTES = LISTEN_RATE * FRAME_MS // 1000 * 2  # 640: one 20 ms frame of 16 kHz mono
MIN_SEGMENT_MS = (
    100  # webrtcvad flags single frames of noise as speech; below this it is never speech
)


@dataclass(frozen=True, slots=True)
class VadSettings:
    aggressiveness: int = 2  # webrtcvad 0 (keeps most) .. 3 (drops most non-speech)
    min_speech_ms: int = 200  # voiced audio needed before something counts as speech
    end_pause_ms: int = 700  # the silence that ends an utterance
    pre_roll_ms: int = 200  # kept from before the onset
    max_utterance_s: float = 20.0  # a monologue is cut here, so it is answered in pieces, not never
    # Silence after which speech-to-text starts on the audio so far, in the background, while the end-of-speech
    # pause runs on: if the pause ends the utterance, the transcript is (nearly) ready; if speech resumes, it is
    # thrown away. 0 turns it off. Pauses between phrases are usually shorter than this (Whisper is then not
    # started at every breath), and it leaves the 500 ms before the end for Whisper (~0.6 s on 2 cores).
    speculate_after_ms: int = 200
    # With a turn model (voice.turn): at this pause the model is asked, and a turn it hears as finished ends here;
    # one it hears as unfinished ends at turn_cap_ms of pause (end_pause_ms is then the pause without a model).
    turn_complete_ms: int = 200
    turn_cap_ms: int = 2000

    def __post_init__(self) -> None:
        if not 0 <= self.aggressiveness <= 3:
            raise ValueError("aggressiveness must be 0..3")
        if self.min_speech_ms < MIN_SEGMENT_MS:
            raise ValueError(
                f"min_speech_ms must be at least {MIN_SEGMENT_MS} (shorter bursts are noise)"
            )
        if self.end_pause_ms < FRAME_MS or self.max_utterance_s <= 0:
            raise ValueError("end_pause_ms and max_utterance_s must be positive")
        if not FRAME_MS <= self.turn_complete_ms <= self.turn_cap_ms:
            raise ValueError("turn_complete_ms must be positive and at most turn_cap_ms")
        if self.speculate_after_ms < 0:
            raise ValueError("speculate_after_ms must be 0 (off) or positive")


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """Someone has been speaking for ``min_speech_ms``: an utterance is under way."""


@dataclass(frozen=True, slots=True)
class SpeechEnd:
    """A finished utterance: 16 kHz mono PCM, pre-roll included, trailing silence mostly trimmed."""

    pcm16: bytes


VadEvent = SpeechStart | SpeechEnd
_TRAILING_KEEP_FRAMES = (
    10  # 200 ms of the closing pause stays: Whisper ends words better with a tail
)


class UtteranceCutter:
    """One speaker's state machine; ``push`` a 20 ms frame, get the events it caused."""

    def __init__(self, settings: VadSettings = VadSettings()) -> None:
        self.settings = settings
        self._vad = webrtcvad.Vad(settings.aggressiveness)
        self._pre_roll: deque[bytes] = deque(maxlen=max(1, settings.pre_roll_ms // FRAME_MS))
        self._frames: list[bytes] = []
        self._voiced = self._pause = 0
        self._started = False

    @property
    def speaking(self) -> bool:
        """An utterance has started and not yet ended."""
        return self._started

    @property
    def pause_ms(self) -> int:
        """Silence heard since the last voiced frame of the utterance under way (0 when none is)."""
        return self._pause * FRAME_MS if self._started else 0

    @property
    def voiced_frames(self) -> int:
        """Voiced frames in the utterance so far (a pause that follows more of them is a new pause)."""
        return self._voiced

    def pending(self) -> bytes | None:
        """The utterance as ``flush`` would end it now, without ending it (None when none is under way).

        If the pause goes on with no voiced frame, the ``SpeechEnd`` to come is this audio followed by at most
        more of that pause (it keeps the first ``_TRAILING_KEEP_FRAMES`` of it).
        """
        return self._end().pcm16 if self._started else None

    def push(self, frame: bytes) -> list[VadEvent]:
        """Feed one 20 ms frame (shorter frames are padded with silence)."""
        frame = frame[:FRAME_BYTES].ljust(FRAME_BYTES, b"\0")
        voiced = self._vad.is_speech(frame, LISTEN_RATE)
        if not self._frames:
            if not voiced:
                self._pre_roll.append(frame)
                return []
            self._frames = list(self._pre_roll)
            self._pre_roll.clear()
        return self._grow(frame, voiced)

    def flush(self) -> list[VadEvent]:
        """The speaker went quiet without trailing silence (stopped sending, left): end what was said."""
        events: list[VadEvent] = [self._end()] if self._started else []
        self._reset()
        return events

    def _grow(self, frame: bytes, voiced: bool) -> list[VadEvent]:
        self._frames.append(frame)
        self._voiced, self._pause = (
            (self._voiced + 1, 0) if voiced else (self._voiced, self._pause + 1)
        )
        events: list[VadEvent] = []
        if not self._started and self._voiced * FRAME_MS >= self.settings.min_speech_ms:
            self._started = True
            events.append(SpeechStart())
        too_long = len(self._frames) * FRAME_MS >= self.settings.max_utterance_s * 1000
        if self._pause * FRAME_MS >= self.settings.end_pause_ms or too_long:
            events += self.flush()  # a candidate that never started was noise: dropped
        return events

    def _end(self) -> SpeechEnd:
        drop = max(0, self._pause - _TRAILING_KEEP_FRAMES)
        kept = self._frames[: len(self._frames) - drop]
        return SpeechEnd(b"".join(kept))

    def _reset(self) -> None:
        self._frames, self._voiced, self._pause, self._started = [], 0, 0, False

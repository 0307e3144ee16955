"""Two voice measurements beside the timed session: how well the bot's voice is understood, and how fast it stops.

Round-trip intelligibility (``tts_wer``): each sentence of ``data/voice_sentences.txt`` (52 reply-like sentences,
words only) is spoken by a TTS provider and transcribed by the bot's own Whisper; the word error rate is
(substitutions + deletions + insertions) / reference words over the whole set, after lower-casing and removing
punctuation. A sentence Whisper hears nothing in counts as all deleted.

Barge-in (``barge_in_ms``): the bot speaks a long reply to a player that pulls a 20 ms frame every 20 ms, as
discord.py's does; then a person's speech is fed to the receive hub at real-time pace. The figure is from the
first frame of that speech to the end of the last reply frame the player pulled: VAD onset (``min_speech_ms``),
the hop onto the event loop, the cancel, and the frame already playing.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from voice.audio import mono_to_discord
from voice.playback import PlaybackBuffer
from voice.providers import SpeechToText, TextToSpeech
from voice.receive import ReceiveHub, Utterance
from voice.session import VoiceSession

SENTENCES = Path(__file__).parent / "data" / "voice_sentences.txt"
FRAME_BYTES = 3840  # 20 ms of 48 kHz stereo
LONG_REPLY = " ".join(
    f"This is sentence number {n} of a long answer about the camping trip." for n in range(1, 9)
)


def sentences() -> list[str]:
    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def spoken_words(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower().replace("-", " ")).split()


def edit_distance(reference: list[str], heard: list[str]) -> int:
    """Levenshtein distance over words."""
    row = list(range(len(heard) + 1))
    for i, ref in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, word in enumerate(heard, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ref != word))
    return row[-1]


def round_trip_wer(
    tts: TextToSpeech,
    stt: SpeechToText,
    texts: list[str],
    progress: Callable[..., None] = lambda *_: None,
) -> float:
    """Word error rate of ``stt`` on ``tts`` speaking ``texts``, over the whole set."""
    errors = total = 0
    for i, text in enumerate(texts, 1):
        pcm, rate = tts.synthesize(text)
        reference = spoken_words(text)
        errors += edit_distance(reference, spoken_words(stt.transcribe(pcm, rate)))
        total += len(reference)
        progress(i, len(texts))
    return round(errors / total, 3) if total else 0.0


def barge_in_ms(tts: TextToSpeech, runs: int = 5) -> list[float]:
    """Milliseconds from someone speaking over the bot to its last frame, ``runs`` times."""
    interruption = _onset_trimmed(*tts.synthesize("Wait, stop please, I have a question."))
    return [asyncio.run(_one_barge_in(tts, interruption)) for _ in range(runs)]


async def _one_barge_in(tts: TextToSpeech, interruption: bytes) -> float:
    player = RealTimePlayer()
    session = VoiceSession(_Heard(), tts, _LongReply(), player)
    hub = ReceiveHub(session.speech_started, lambda _: None)  # only its onset matters here
    hub.attribute(1, 1)
    session.start()
    try:
        session.utterance_ready(Utterance(ssrc=2, user_id=2, pcm16=b"\0\1" * 16000))
        while player.frames < 25:  # half a second of the reply has been heard
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        for k, i in enumerate(range(0, len(interruption), FRAME_BYTES)):
            hub.feed(1, interruption[i : i + FRAME_BYTES].ljust(FRAME_BYTES, b"\0"))
            if player.stopped.is_set():
                break
            await asyncio.sleep(max(0.0, started + (k + 1) * 0.02 - time.perf_counter()))
        await asyncio.to_thread(player.stopped.wait, 5.0)
        return (player.last_frame_at + 0.02 - started) * 1000
    finally:
        await session.close()


def _onset_trimmed(pcm16: bytes, rate: int) -> bytes:
    """48 kHz stereo speech from its first loud sample: the clock starts when the voice does."""
    samples = np.frombuffer(pcm16, "<i2")
    loud = np.nonzero(np.abs(samples) > 300)[0]
    return mono_to_discord(samples[int(loud[0]) if loud.size else 0 :].tobytes(), rate)


class RealTimePlayer:
    """Pulls a 20 ms frame every 20 ms on its own thread (discord.py's pace); notes the last frame with sound."""

    def __init__(self) -> None:
        self.frames = 0
        self.last_frame_at = 0.0
        self.stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def play(self, audio: PlaybackBuffer) -> None:
        self._thread = threading.Thread(target=self._pace, args=(audio,), daemon=True)
        self._thread.start()

    def _pace(self, audio: PlaybackBuffer) -> None:
        start, reads = time.perf_counter(), 0
        while not self.stopped.is_set() and (frame := audio.read()):
            reads += 1
            if any(frame):
                self.frames += 1
                self.last_frame_at = time.perf_counter()
            time.sleep(max(0.0, start + reads * 0.02 - time.perf_counter()))
        self.stopped.set()

    def stop(self) -> None:
        self.stopped.set()

    def is_playing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class _Heard:
    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        return "tell me about the trip"


class _LongReply:
    async def respond(self, user_id: int, text: str, stream) -> str:
        await stream(LONG_REPLY)
        return LONG_REPLY

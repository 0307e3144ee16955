"""Shared pieces for the voice tests: real speech (espeak-ng), the real Whisper model loaded once, and
small scripted providers for the session tests.

The scripted providers stand in for third-party engines at the Protocol edge (as ``ScriptedCompleter``
does for the LLM): they record what they were asked and answer from a script. Our own code is never
replaced.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time

import numpy as np

from tests.fakes._base import WAIT_S
from voice.audio import DISCORD_RATE, mono_to_discord
from voice.playback import PlaybackBuffer
from voice.providers import SynthesisFailed, TranscriptionFailed
from voice.stt import FasterWhisperSTT
from voice.tts import EspeakTTS


@functools.cache
def whisper() -> FasterWhisperSTT:
    """The bundled Whisper tiny.en, loaded once per test run (1-2 s) and shared by every voice test."""
    stt = FasterWhisperSTT()
    stt.load()
    return stt


@functools.cache
def spoken(text: str, words_per_minute: int = 150) -> bytes:
    """``text`` spoken by espeak-ng, as Discord carries it (48 kHz stereo)."""
    pcm, rate = EspeakTTS(words_per_minute=words_per_minute).synthesize(text)
    return mono_to_discord(pcm, rate)


def silence(seconds: float) -> bytes:
    return b"\0" * (int(seconds * DISCORD_RATE) * 4)


def tone(seconds: float, rate: int = 16000, hz: float = 220.0) -> bytes:
    """A mono sine, the simplest audio a fake TTS can hand back."""
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * math.pi * hz * t) * 8000).astype("<i2").tobytes()


class ScriptedSTT:
    """Answers each transcription from ``script`` (a str, or an exception to raise); records the audio."""

    def __init__(self, *script: str | Exception) -> None:
        self.script = list(script)
        self.heard: list[float] = []  # seconds of audio per call
        self.audio: list[bytes] = []  # the audio of each call

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        self.heard.append(len(pcm16) / 2 / sample_rate)
        self.audio.append(pcm16)
        answer = self.script.pop(0) if self.script else TranscriptionFailed("script exhausted")
        if isinstance(answer, Exception):
            raise answer
        return answer


class ToneTTS:
    """Says every sentence as ``seconds`` of tone; sentences listed in ``fail_on`` raise instead."""

    def __init__(self, seconds: float = 0.2, fail_on: tuple[str, ...] = ()) -> None:
        self.seconds = seconds
        self.fail_on = fail_on
        self.said: list[str] = []

    def synthesize(self, text: str) -> tuple[bytes, int]:
        if any(word in text for word in self.fail_on):
            raise SynthesisFailed(f"cannot say {text!r}")
        self.said.append(text)
        return tone(self.seconds), 16000


class ThreadPlayer:
    """A ``Player`` that drains the buffer on its own thread, like discord.py's, ``speed`` x real time."""

    def __init__(self, speed: float = 4.0) -> None:
        self.speed = speed
        self.frames: list[bytes] = []
        self.stops = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def play(self, audio: PlaybackBuffer) -> None:
        assert not self.is_playing(), "play() while already playing"
        self._stop.clear()
        self._thread = threading.Thread(target=self._drain, args=(audio,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stops += 1
        self._stop.set()

    def is_playing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _drain(self, audio: PlaybackBuffer) -> None:
        while not self._stop.is_set() and (frame := audio.read()):
            self.frames.append(frame)
            time.sleep(0.02 / self.speed)


async def eventually(predicate, timeout: float = WAIT_S) -> None:
    """Poll ``predicate`` every 10 ms until true (for state changed by other threads)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.01)


def routed_model(
    replies: list[str], *, summary: str = "A short voice chat.", extracted: str = "[]"
):
    """A ``FakeOpenAI.default`` for a whole voice session: extraction passes get ``extracted``, voice summaries
    get ``summary``, and replies come from ``replies`` in order (then "ok")."""
    queue = list(replies)

    def respond(body: dict) -> str:
        first = body["messages"][0]
        system = first["content"] if first["role"] == "system" else ""
        if system.startswith("You extract memories"):
            return extracted
        if system.startswith("You keep the rolling summary"):
            return summary
        return queue.pop(0) if queue else "ok"

    return respond


# The fake voice Discord the end-to-end voice tests share: one guild with a text channel and the Lounge.
GUILD, TEXT_CHANNEL, LOUNGE = 1001, 2002, 2100
ALICE, BOB = 3003, 3004


class DaveStandIn:
    """Takes the place of the third-party ``davey.DaveSession`` on the bot's voice connection (a real MLS group
    cannot be had offline): ready, and "decrypts" a frame for a named sender by removing the fake's DAVE tail.
    ``decrypted`` counts frames opened per sender; a frame for an unknown sender cannot be opened, as in DAVE."""

    ready = True

    def __init__(self) -> None:
        self.decrypted: dict[int, int] = {}

    def decrypt(self, user_id: int, media_type: object, frame: bytes) -> bytes:
        from tests.fakes.discord_voice_server import DAVE_STAND_IN_TAIL

        assert user_id is not None and frame.endswith(DAVE_STAND_IN_TAIL)
        self.decrypted[user_id] = self.decrypted.get(user_id, 0) + 1
        return frame[: -len(DAVE_STAND_IN_TAIL)]

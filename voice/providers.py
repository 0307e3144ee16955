"""The two speech providers a voice session needs, as narrow Protocols over plain bytes.

    SpeechToText.transcribe(pcm16, sample_rate) -> str          mono 16-bit PCM in, text out
    TextToSpeech.synthesize(text) -> (pcm16, sample_rate)       text in, mono 16-bit PCM out

Both are synchronous and may take a second: sessions call them in a worker thread. Offline defaults
live beside this file (``stt.FasterWhisperSTT``, ``tts.EspeakTTS``); OpenAI-compatible ones live in
``bot/spoken/providers.py``, because only ``bot/`` may know the LLM SDK.

Errors a provider raises::

    SpeechError                  a provider could not do its job; the session logs it and goes on
     +-- TranscriptionFailed     speech-to-text failed (model missing, server down, bad audio)
     +-- SynthesisFailed         text-to-speech failed (engine missing, server down)
"""

from __future__ import annotations

from typing import Protocol


class SpeechError(RuntimeError):
    """A speech provider failed."""


class TranscriptionFailed(SpeechError):
    """Speech-to-text failed."""


class SynthesisFailed(SpeechError):
    """Text-to-speech failed."""


class SpeechToText(Protocol):
    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        """The words in mono 16-bit PCM; an empty string when there are none."""
        ...


class TextToSpeech(Protocol):
    def synthesize(self, text: str) -> tuple[bytes, int]:
        """Mono 16-bit PCM speaking ``text``, and its sample rate."""
        ...

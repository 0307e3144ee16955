"""Speech providers on any OpenAI-compatible server (``/audio/transcriptions``, ``/audio/speech``).

They satisfy ``voice.providers.SpeechToText`` / ``TextToSpeech`` and live here, not in ``voice/``,
because only ``bot/`` may know the LLM SDK. Both are synchronous (voice sessions call providers in a
worker thread). Audio goes out as a WAV upload and comes back as WAV: every compatible server we
know (OpenAI, LocalAI, speaches, openedai-speech) speaks WAV, not all speak raw PCM.
"""
from __future__ import annotations

import openai

from voice.audio import AudioFormatError, read_wav, to_wav
from voice.providers import SynthesisFailed, TranscriptionFailed


class OpenAISpeechToText:
    """``SpeechToText`` via ``POST {base_url}/audio/transcriptions`` (e.g. ``whisper-1``)."""

    def __init__(self, base_url: str, api_key: str = "", model: str = "whisper-1", *, language: str | None = "en",
                 timeout: float = 30.0) -> None:
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=1)
        self.model = model
        self.language = language

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        extra = {"language": self.language} if self.language else {}
        try:
            result = self._client.audio.transcriptions.create(
                model=self.model, file=("speech.wav", to_wav(pcm16, sample_rate), "audio/wav"), **extra)
        except openai.OpenAIError as exc:
            raise TranscriptionFailed(f"{self.model} transcription failed: {exc}") from exc
        return (getattr(result, "text", None) or "").strip()


class OpenAITextToSpeech:
    """``TextToSpeech`` via ``POST {base_url}/audio/speech`` (e.g. ``tts-1`` with voice ``alloy``)."""

    def __init__(self, base_url: str, api_key: str = "", model: str = "tts-1", voice: str = "alloy", *,
                 timeout: float = 30.0) -> None:
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=1)
        self.model = model
        self.voice = voice

    def synthesize(self, text: str) -> tuple[bytes, int]:
        try:
            response = self._client.audio.speech.create(model=self.model, voice=self.voice, input=text,
                                                        response_format="wav")
            return read_wav(response.content)
        except openai.OpenAIError as exc:
            raise SynthesisFailed(f"{self.model} speech failed: {exc}") from exc
        except AudioFormatError as exc:
            raise SynthesisFailed(f"{self.model} answered with no usable WAV: {exc}") from exc

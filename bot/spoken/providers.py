"""Speech providers on any OpenAI-compatible server (``/audio/transcriptions``, ``/audio/speech``).

They satisfy ``voice.providers.SpeechToText`` / ``TextToSpeech`` and live here, not in ``voice/``,
because only ``bot/`` may know the LLM SDK. Both are synchronous (voice sessions call providers in a
worker thread). Audio goes out as a WAV upload and comes back as WAV: every compatible server we
know (OpenAI, LocalAI, speaches, openedai-speech) speaks WAV, not all speak raw PCM.

``speech_providers``, ``voice_settings`` and ``voice_options`` turn Settings into the voice objects; only the
composition root calls them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import openai

from voice.audio import LISTEN_RATE, AudioFormatError, read_wav, resample, to_wav
from voice.phantoms import Segment, kept_text
from voice.providers import SpeechToText, SynthesisFailed, TextToSpeech, TranscriptionFailed
from voice.session import VoiceSettings
from voice.stt import FasterWhisperSTT
from voice.tts import EspeakTTS, FallbackTTS, PiperTTS
from voice.turn import load_end_of_turn
from voice.vad import VadSettings
from voice.warm import WarmSettings

from ..clients import openai_client, secret
from ..installs import pip_install
from .sessions import VoiceOptions

if TYPE_CHECKING:
    from ..config import Settings


class OpenAISpeechToText:
    """``SpeechToText`` via ``POST {base_url}/audio/transcriptions`` (e.g. ``whisper-1``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        model: str = "whisper-1",
        *,
        language: str | None = "en",
        timeout: float = 30.0,
    ) -> None:
        self._client = openai_client(base_url, api_key, timeout=timeout, max_retries=1)
        self.model = model
        self.language = language

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        try:
            # omit: no language field, the server detects it
            result = self._client.audio.transcriptions.create(
                model=self.model,
                file=("speech.wav", to_wav(pcm16, sample_rate), "audio/wav"),
                language=self.language or openai.omit,
            )
        except openai.OpenAIError as exc:
            raise TranscriptionFailed(f"{self.model} transcription failed: {exc}") from exc
        # No segment signals come back: the audio's loudness and length still tell a phantom (voice.phantoms).
        return kept_text(
            [Segment(getattr(result, "text", None) or "")],
            resample(pcm16, sample_rate, LISTEN_RATE),
        )


class OpenAITextToSpeech:
    """``TextToSpeech`` via ``POST {base_url}/audio/speech`` (e.g. ``tts-1`` with voice ``alloy``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        model: str = "tts-1",
        voice: str = "alloy",
        *,
        timeout: float = 30.0,
    ) -> None:
        self._client = openai_client(base_url, api_key, timeout=timeout, max_retries=1)
        self.model = model
        self.voice = voice

    def synthesize(self, text: str) -> tuple[bytes, int]:
        try:
            response = self._client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="wav"
            )
            return read_wav(response.content)
        except openai.OpenAIError as exc:
            raise SynthesisFailed(f"{self.model} speech failed: {exc}") from exc
        except AudioFormatError as exc:
            raise SynthesisFailed(f"{self.model} answered with no usable WAV: {exc}") from exc


# -- from Settings (the composition root only) ---------------------------------------------------------
def speech_providers(settings: Settings) -> tuple[SpeechToText, TextToSpeech]:
    """Offline by default (the bundled Whisper tiny.en, espeak-ng); "piper" for a natural offline voice (an
    optional install); "openai" for any compatible server."""
    base_url = settings.voice_base_url or settings.llm_base_url
    api_key = secret(settings.voice_api_key) or secret(settings.llm_api_key)
    if settings.voice_stt == "openai":
        stt: SpeechToText = OpenAISpeechToText(base_url, api_key, settings.voice_stt_model)
    else:
        stt = FasterWhisperSTT(settings.voice_stt_model_dir)
    if settings.voice_tts == "openai":
        tts: TextToSpeech = OpenAITextToSpeech(
            base_url, api_key, settings.voice_tts_model, settings.voice_tts_voice
        )
    elif (
        settings.voice_tts == "piper"
    ):  # espeak-ng stays there for when piper is not installed or its voice fails
        tts = FallbackTTS(
            PiperTTS(settings.voice_piper_voice, install=pip_install("piper")),
            EspeakTTS(settings.voice_espeak_voice),
        )
    else:
        tts = EspeakTTS(settings.voice_espeak_voice)
    return stt, tts


def voice_settings(settings: Settings) -> VoiceSettings:
    vad = VadSettings(
        aggressiveness=settings.voice_vad_aggressiveness,
        min_speech_ms=settings.voice_min_speech_ms,
        end_pause_ms=settings.voice_end_pause_ms,
        turn_complete_ms=settings.voice_turn_complete_ms,
        turn_cap_ms=settings.voice_turn_cap_ms,
    )
    turn = (
        load_end_of_turn(settings.voice_turn_model_dir, settings.voice_turn_threshold)
        if settings.voice_turn_model
        else None
    )
    return VoiceSettings(
        vad=vad,
        idle_timeout_s=settings.voice_idle_timeout_s,
        barge_in=settings.voice_barge_in,
        turn=turn,
    )


def voice_options(settings: Settings) -> VoiceOptions:
    return VoiceOptions(
        warm=WarmSettings(
            reuse_at=settings.voice_warm_reuse_at,
            full_below=settings.voice_warm_full_below,
            ttl_s=settings.voice_warm_ttl_s,
        )
    )

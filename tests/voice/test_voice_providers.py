"""Speech providers: the offline defaults for real (bundled Whisper, espeak-ng), and the OpenAI-compatible
ones through the real ``openai`` SDK against a local server with ``/v1/audio/*``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from aiohttp import web

from bot.spoken.providers import OpenAISpeechToText, OpenAITextToSpeech
from tests.fakes import FakeOpenAI
from tests.fakes._base import json_response
from tests.voice_support import spoken, tone, whisper
from voice.audio import discord_to_listen, duration_s, read_wav, to_wav
from voice.providers import SynthesisFailed, TranscriptionFailed
from voice.stt import FasterWhisperSTT
from voice.tts import EspeakTTS, FallbackTTS, PiperTTS

needs_piper = pytest.mark.skipif(
    not PiperTTS().available(),
    reason='piper is an optional install (pip install -e ".[piper]", GPL-3.0 engine): not in this environment',
)


class FakeAudioAPI(FakeOpenAI):
    """The fake OpenAI server plus ``/v1/audio/transcriptions`` and ``/v1/audio/speech``."""

    def __init__(self) -> None:
        self.transcripts: list[str] = []
        self.uploads: list[dict] = []
        self.speech_requests: list[dict] = []
        self.fail_with: int | None = None
        super().__init__()

    def _setup_routes(self, router: web.UrlDispatcher) -> None:
        super()._setup_routes(router)
        router.add_post("/v1/audio/transcriptions", self._transcribe)
        router.add_post("/v1/audio/speech", self._speech)

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form["file"]
        pcm, rate = read_wav(upload.file.read())
        self.uploads.append(
            {
                "model": form["model"],
                "language": form.get("language"),
                "filename": upload.filename,
                "seconds": duration_s(pcm, rate),
            }
        )
        if self.fail_with:
            return json_response({"error": {"message": "nope"}}, status=self.fail_with)
        return json_response({"text": self.transcripts.pop(0)})

    async def _speech(self, request: web.Request) -> web.Response:
        self.speech_requests.append(await request.json())
        if self.fail_with:
            return json_response({"error": {"message": "nope"}}, status=self.fail_with)
        return web.Response(body=to_wav(tone(0.5, rate=24000), 24000), content_type="audio/wav")


@pytest.fixture
async def api():
    async with FakeAudioAPI() as server:
        yield server


def test_the_bundled_whisper_transcribes_espeak_speech():
    text = whisper().transcribe(
        discord_to_listen(spoken("Please remember that my sister lives in Paris.")), 16000
    )
    assert "sister" in text.lower() and "paris" in text.lower()


def test_the_bundled_whisper_hears_nothing_in_silence():
    assert whisper().transcribe(b"\0" * 32000 * 2, 16000) == ""


def test_whisper_resamples_audio_given_at_another_rate():
    pcm, rate = EspeakTTS().synthesize("Good morning, how did you sleep?")
    assert "morning" in whisper().transcribe(pcm, rate).lower()


def test_a_missing_whisper_model_is_a_transcription_failure(tmp_path):
    with pytest.raises(TranscriptionFailed, match="could not load"):
        FasterWhisperSTT(tmp_path / "no-model").transcribe(b"\1\0" * 16000, 16000)


def test_espeak_speaks_a_sentence_as_mono_pcm():
    # a leading dash is text, not an option
    pcm, rate = EspeakTTS().synthesize("-Dashes first, then words.")
    assert rate == 22050 and 1.0 < duration_s(pcm, rate) < 4.0


def test_a_missing_espeak_is_a_synthesis_failure():
    with pytest.raises(SynthesisFailed, match="not installed"):
        EspeakTTS(executable="espeak-ng-that-is-not-there").synthesize("hello")


@needs_piper
def test_piper_speaks_a_sentence_the_bundled_whisper_hears_word_for_word():
    pcm, rate = PiperTTS().synthesize("My sister plays the violin every evening.")
    assert rate == 22050 and 1.0 < duration_s(pcm, rate) < 5.0
    assert (
        whisper().transcribe(pcm, rate).lower().strip(" .")
        == "my sister plays the violin every evening"
    )


def test_a_piper_voice_that_is_not_installed_is_a_synthesis_failure_that_says_what_to_install():
    with pytest.raises(SynthesisFailed, match=r"not installed \(\.venv/bin/pip install"):
        PiperTTS("no_such_piper_voice").synthesize("hello")


def test_the_bots_piper_names_its_environments_pip_and_the_checkout_when_it_is_missing(caplog):
    """Issue 45: the advice ran the first pip on the PATH, and only from inside the checkout."""
    from bot.config import load_settings
    from bot.installs import pip_install
    from bot.spoken.providers import speech_providers

    settings = load_settings(voice_tts="piper", voice_piper_voice="no_such_piper_voice")
    _, tts = speech_providers(settings)
    pcm, rate = tts.synthesize("Still heard.")  # espeak-ng speaks instead
    assert duration_s(pcm, rate) > 0.5
    (said,) = [r.getMessage() for r in caplog.records if "fallback voice" in r.getMessage()]
    assert f"({pip_install('piper')}" in said and str(Path(sys.prefix) / "bin" / "pip") in said


def test_a_piper_voice_that_cannot_speak_falls_back_to_espeak_and_says_why_once(caplog):
    tts = FallbackTTS(PiperTTS("/no/such/voice.onnx"), EspeakTTS())
    for _ in range(2):
        pcm, rate = tts.synthesize("Still heard.")
        assert rate == 22050 and duration_s(pcm, rate) > 0.5
    assert len([r for r in caplog.records if "fallback voice" in r.getMessage()]) == 1


@needs_piper
def test_a_module_that_is_not_a_piper_voice_is_refused_by_name():
    with pytest.raises(
        SynthesisFailed, match="'json' is not a piper voice package .it ships 0 .onnx models"
    ):
        PiperTTS("json").synthesize("hello")


async def test_openai_compatible_transcription_uploads_a_wav_and_returns_the_text(api):
    api.transcripts.append(" Hello from the server. ")
    stt = OpenAISpeechToText(api.base_url, "key", model="whisper-1")
    text = await asyncio.to_thread(stt.transcribe, tone(1.0), 16000)
    assert text == "Hello from the server."
    assert api.uploads == [
        {"model": "whisper-1", "language": "en", "filename": "speech.wav", "seconds": 1.0}
    ]


async def test_openai_compatible_speech_returns_pcm_at_the_servers_rate(api):
    tts = OpenAITextToSpeech(api.base_url, "key", model="tts-1", voice="nova")
    pcm, rate = await asyncio.to_thread(tts.synthesize, "Hi there.")
    assert rate == 24000 and duration_s(pcm, rate) == pytest.approx(0.5)
    assert api.speech_requests == [
        {"model": "tts-1", "voice": "nova", "input": "Hi there.", "response_format": "wav"}
    ]


async def test_openai_compatible_failures_are_speech_errors(api):
    api.fail_with = 400
    with pytest.raises(TranscriptionFailed):
        await asyncio.to_thread(OpenAISpeechToText(api.base_url).transcribe, b"\1\0" * 16000, 16000)
    with pytest.raises(SynthesisFailed):
        await asyncio.to_thread(OpenAITextToSpeech(api.base_url).synthesize, "Hi.")

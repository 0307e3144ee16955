"""Voice context compaction (VOICE-4) with the pre-compaction flush (WRITE-4).

A voice session's transcript is a rolling summary followed by the most recent turns verbatim:

    [ summary (<= 1,200 chars) ] [ t1 ... t10 | t11 ... t60 ]
                                   oldest batch   50 kept verbatim
    when 60 turns are verbatim:   flush(t1..t10) -> completer(summary + t1..t10) -> new summary, t1..t10 dropped

Turns are folded in batches of 10 only once a whole batch sits beyond the 50 kept (Clanky's numbers, seed 002):
one model call per ten turns, never one per turn. Before a batch is summarised, ``flush`` gets exactly those
turns so the caller can run extraction on them (WRITE-4); it is called once per batch, even when the
summary has to be retried. A failing flush or completer leaves the turns verbatim and the next turn tries
again: a turn leaves the context only after its facts were handed to extraction and its gist is in the summary.

Threads: everything here runs on the event loop (``compact`` awaits the model and the flush), except ``clear``,
which a forget calls on the memory thread. No worker thread waits on the loop.

Failure handling: ``compact`` is a background step, one of the four edges where a broad
``except`` is allowed (a tool call, an adapter event, a background job, shutdown). A model failure
is logged, counted in ``failures`` and kept in ``last_error``; nothing is dropped, so it is not
silent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import prompts
from memory import AsyncCompleter

log = logging.getLogger(__name__)
SYSTEM = (
    "You keep the rolling summary of a live voice conversation. Answer with the summary text only."
)


@dataclass(frozen=True, slots=True)
class VoiceTurn:
    speaker_id: str
    speaker_name: str
    text: str
    at: float  # seconds since the epoch (UTC)
    role: str = "user"  # "user" | "assistant"


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    keep_recent: int = 50
    batch_size: int = 10
    max_summary_chars: int = 1200
    prompt: str = "voice_compaction"


FlushCallback = Callable[[tuple[VoiceTurn, ...]], Awaitable[None]]


def render_turns(turns: tuple[VoiceTurn, ...] | list[VoiceTurn]) -> str:
    """One line per turn, the words JSON-quoted so a transcript can never read as instructions (SEC-2)."""
    return "\n".join(_line(t) for t in turns)


def _line(turn: VoiceTurn) -> str:
    when = datetime.fromtimestamp(turn.at, UTC).strftime("%H:%M:%S")
    who = f"{turn.speaker_name or turn.speaker_id}{' (assistant)' if turn.role == 'assistant' else ''}"
    return f"{when} {who}: {json.dumps(turn.text, ensure_ascii=False)}"


def cap(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary near the end when there is one."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    # Back up to a word boundary unless that would throw away more than a fifth of the room.
    return (cut[:space] if space > limit * 0.8 else cut).rstrip() + "…"


class VoiceTranscript:
    """The rolling summary and the verbatim turns of one voice session."""

    def __init__(
        self,
        completer: AsyncCompleter,
        flush: FlushCallback,
        settings: CompactionSettings = CompactionSettings(),
    ) -> None:
        self.completer, self.flush, self.settings = completer, flush, settings
        self.summary = ""
        self._turns: list[VoiceTurn] = []
        self.folded = 0  # turns summarised and dropped so far
        self._flushed = (
            0  # turns handed to ``flush`` so far (counted from the session start, like ``folded``)
        )
        self.failures = 0
        self.last_error: str | None = None
        # one compaction at a time: a fold awaits the model, and turns keep coming
        self._busy = asyncio.Lock()
        self._generation = 0  # bumped by clear(): a fold that raced a forget is thrown away

    @property
    def turns(self) -> tuple[VoiceTurn, ...]:
        return tuple(self._turns)

    @property
    def due(self) -> bool:
        return len(self._turns) >= self.settings.keep_recent + self.settings.batch_size

    async def add(self, turn: VoiceTurn) -> int:
        """Append a turn, then fold what is due; returns how many turns were folded."""
        self.append(turn)
        return await self.compact()

    def append(self, turn: VoiceTurn) -> None:
        """Append without any model call (for a caller that compacts off the reply path)."""
        self._turns.append(turn)

    async def compact(self) -> int:
        """Fold every due batch, oldest first; stops at the first failure (that batch is retried next time).

        On the event loop, like the reply: the model is awaited, never waited for from a worker thread."""
        if self._busy.locked():
            return 0  # a compaction under way is folding these very turns
        async with self._busy:
            folded = 0
            while self.due and await self._fold(tuple(self._turns[: self.settings.batch_size])):
                folded += self.settings.batch_size
            return folded

    async def _fold(self, batch: tuple[VoiceTurn, ...]) -> bool:
        generation = self._generation
        if not await self._flush_once(batch):
            return False
        summary = await self._summarise(batch)
        if summary is None or generation != self._generation:
            return False
        self.summary = summary
        del self._turns[: len(batch)]
        self.folded += len(batch)
        return True

    async def _flush_once(self, batch: tuple[VoiceTurn, ...]) -> bool:
        if self._flushed >= self.folded + len(
            batch
        ):  # flushed already; only the summary failed last time
            return True
        try:
            await self.flush(batch)
        except (
            Exception
        ) as exc:  # extraction could not be handed the turns: keep them rather than lose facts
            return self._failed("pre-compaction flush", exc)
        self._flushed = self.folded + len(batch)
        return True

    async def _summarise(self, batch: tuple[VoiceTurn, ...]) -> str | None:
        prompt = prompts.render(
            self.settings.prompt,
            previous=self.summary or "(none yet)",
            turns=render_turns(batch),
            max_chars=self.settings.max_summary_chars,
        )
        try:
            answer = await self.completer(SYSTEM, prompt, temperature=0.0)
            if not (answer or "").strip():
                raise ValueError("the model returned an empty summary")
        except (
            Exception
        ) as exc:  # a provider's own errors (network, HTTP, quota): retry on the next turn
            self._failed("summary", exc)
            return None
        self.last_error = None
        return cap(answer, self.settings.max_summary_chars)

    def _failed(self, step: str, exc: Exception) -> bool:
        self.failures += 1
        self.last_error = f"{step}: {exc}"
        log.exception("voice compaction postponed, %s failed; the turns stay verbatim", step)
        return False

    async def final_summary(self) -> str:
        """The whole session in one summary, for when it ends (CROSS-1): the turns still verbatim are flushed
        (WRITE-4) and folded in. When the model fails, the rolling summary plus the last turns as said (capped)
        stand in: an ended session keeps a trace even while the model is down."""
        async with (
            self._busy
        ):  # waits for a compaction under way: its batch must not be summarised twice
            rest = tuple(self._turns)
            if not rest:
                return self.summary
            # a failure is logged; the caller's buffer still holds the speech turns
            await self._flush_once(rest)
            summary = await self._summarise(rest)
            if summary is None:
                summary = cap(
                    f"{self.summary}\n{render_turns(rest[-8:])}", self.settings.max_summary_chars
                )
            return summary

    def clear(self) -> None:
        """Drop the summary and every verbatim turn (after a forget: nothing forgotten may stay quoted here).

        Called on the memory thread (``invalidate_all``), so no lock on purpose: a compaction under way on the event
        loop may be awaiting the model; the generation makes it throw its result away instead."""
        self._generation += 1
        self.summary, self._turns = "", []
        self._flushed = self.folded

    def messages(self) -> list[dict[str, str]]:
        """The verbatim turns as chat messages (users prefixed with their name, as the text path does)."""
        return [
            {
                "role": t.role,
                "content": t.text if t.role == "assistant" else f"{t.speaker_name}: {t.text}",
            }
            for t in self._turns
        ]

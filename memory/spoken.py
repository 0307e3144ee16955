"""A voice session's books in the store (VOICE-4, VOICE-5, CROSS-1, WRITE-4). The session itself
(its caches, its transcript, its rolling summary) lives in the bot's process; what the store keeps
of it is its speech turns, already buffered for extraction by write-ahead like any message, and its
final summary.

    flushed   turns about to be folded into the rolling summary are due for extraction now (WRITE-4)
    ended     the turns are due now (VOICE-5), the channel counts as reflected (the summary is the
              session's: the text path's reflection would only write a second one), and a non-blank
              summary is kept for later replies in the same place, modality "voice" (CROSS-1)

Each method is one call on the memory thread.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from .engine import MemoryEngine
from .storage.db import AsyncRunner


@dataclass(frozen=True, slots=True)
class EndedSession:
    """A voice session that ended: where, who spoke in it, and the summary the model wrote of it."""

    channel_key: str  # the voice channel's state key ("discord:<voice channel id>")
    platform: str
    guild_id: str | None
    channel_id: str
    participants: tuple[str, ...]  # person ids
    summary: str  # nothing visible in it (spaces, zero-width characters): nothing to keep
    started_at: float


class SpokenSessions:
    """For the bot's event loop: every method awaits the memory thread."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner

    async def flushed(self, channel_key: str) -> int:
        """The channel's released turns are due now, not after the debounce (held ones wait for
        their reply); how many were made due."""
        return await self.runner.run(self.engine.buffer.expedite, channel_key)

    async def ended(self, session: EndedSession) -> int | None:
        """The session's books closed in one call; the kept summary's id, None when it was blank."""
        return await self.runner.run(self._ended, session)

    def _ended(self, session: EndedSession) -> int | None:
        self.engine.buffer.expedite(session.channel_key)
        self.engine.channels.mark_reflected(session.channel_key)
        if _blank(session.summary):
            return None
        return self.engine.summaries.add(
            platform=session.platform,
            guild_id=session.guild_id,
            channel_id=session.channel_id,
            participants=sorted(session.participants),
            text=session.summary,
            modality="voice",
            started_at=session.started_at,
        )


def _blank(text: str) -> bool:
    """Nothing a reader would see: spaces and format characters (a zero-width space, U+200B, is one;
    ``str.strip`` keeps it) alone are no summary to show later replies."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)

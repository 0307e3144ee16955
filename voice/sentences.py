"""Streaming reply text -> whole sentences, so the bot starts talking while the model still writes.

``SentenceSplitter.feed(delta)`` returns the sentences a delta completed; ``flush()`` the rest when the
reply ends. A sentence ends at . ! ? or an ellipsis followed by whitespace, or at a line break; "e.g.",
"Dr." and "3.5" do not end one. ``speakable`` strips what a TTS engine would read out literally
(markdown marks, links, the ``[SKIP]`` token a model uses to stay silent).
"""

from __future__ import annotations

import re

SKIP_TOKEN = "[SKIP]"
_END = re.compile(r"""([.!?…]+["')\]]*)\s+|\n+""")
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "vs", "etc", "e.g", "i.e", "approx", "jr", "sr"}
)
_MARKS = re.compile(r"[*_#`~>|]+")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|https?://\S+")


class SentenceSplitter:
    """Accumulates text deltas and hands back each finished sentence once."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, delta: str) -> list[str]:
        self._pending += delta
        sentences: list[str] = []
        start = 0
        for match in _END.finditer(self._pending):
            candidate = self._pending[start : match.end()]
            if match.group(1) and _ends_with_abbreviation(self._pending[start : match.start(1)]):
                continue  # "Dr. Smith": the period belongs to the word, the sentence goes on
            sentences.append(candidate)
            start = match.end()
        self._pending = self._pending[start:]
        return [s for s in (speakable(x) for x in sentences) if s]

    def flush(self) -> list[str]:
        rest, self._pending = self._pending, ""
        text = speakable(rest)
        return [text] if text else []


def speakable(text: str) -> str:
    """The words of ``text`` as a voice should say them (link text kept, URLs and markup dropped)."""
    text = _LINK.sub(lambda m: m.group(1) or "", text.replace(SKIP_TOKEN, " "))
    return " ".join(_MARKS.sub("", text).split())


def says_nothing(reply_text: str) -> bool:
    """The model chose to say nothing (VOICE-1): the turn is stored, nothing is spoken."""
    return reply_text.strip() == SKIP_TOKEN or not speakable(reply_text)


def _ends_with_abbreviation(text: str) -> bool:
    words = text.split()
    return bool(words) and words[-1].lower().rstrip(".") in _ABBREVIATIONS

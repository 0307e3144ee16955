"""Pure text helpers shared by the channel adapters (no platform imports).

``split_message`` cuts a long reply into messages a platform accepts (2000 characters on Discord,
4096 on Telegram). It prefers the most natural boundary that still leaves a reasonably full chunk:
a paragraph break, then a line break, then the end of a sentence, then a space, and only as a last
resort a hard cut. The whitespace at a cut is dropped; every other character is kept. A cut inside a
fenced code block closes the fence at the end of the chunk and reopens it (with its language) at the
start of the next, so each message renders on its own.
"""

from __future__ import annotations

import re

FENCE = "```"
MIN_LIMIT = (
    32  # below this a reopened fence ("```python" + the closing "```") leaves no room for text
)
_CLOSE = "\n" + FENCE
# Each boundary's whitespace is the group "sep"; the cut happens at its start.
_PARAGRAPH = re.compile(r"(?P<sep>\n[ \t]*\n)")
_LINE = re.compile(r"(?P<sep>\n)")
_SENTENCE = re.compile(r"[.!?…][\"')\]»”’]*(?P<sep>[ \t]+)")
_WORD = re.compile(r"(?P<sep>[ \t]+)")
# A line or paragraph break this early would leave a stub of a message; look for a finer boundary.
_MIN_FILL = 0.5
# The language of an opening fence ("```python"), reopened after a cut; anything else reopens bare.
_LANGUAGE = re.compile(r"```[\w+#.-]{1,30}")


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters; whitespace-only text gives []."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT} characters, got {limit}")
    chunks: list[str] = []
    rest = text.strip()
    while rest:
        if len(rest) <= limit:
            chunks.append(rest)
            break
        chunk, tail = _take_chunk(rest, limit)
        if len(tail) >= len(rest):
            # Reopening a fence would undo the progress (a pathological fence line): cut hard.
            chunk, tail = rest[:limit], rest[limit:]
        chunks.append(chunk)
        rest = tail
    return chunks


def _take_chunk(text: str, limit: int) -> tuple[str, str]:
    """The first chunk of ``text`` (fence closed if needed) and the rest (fence reopened)."""
    head, tail = _cut(text, limit)
    header = _open_fence(head)
    if header is not None:
        # The cut fell inside a code block: cut again leaving room to close it.
        head, tail = _cut(text, limit - len(_CLOSE))
        header = _open_fence(head)
    if header is None:
        return head, tail
    reopen = header if _LANGUAGE.fullmatch(header) else FENCE
    return head + _CLOSE, f"{reopen}\n{tail}"


def _cut(text: str, limit: int) -> tuple[str, str]:
    """Cut at the best boundary within ``limit``; returns (head without trailing space, tail)."""
    window = text[: limit + 1]  # a separator may start exactly at ``limit``
    floor = int(limit * _MIN_FILL)
    for pattern in (_PARAGRAPH, _LINE, _SENTENCE, _WORD):
        cut = _last_cut(pattern, window, floor if pattern is not _WORD else 1)
        if cut is not None:
            head = text[:cut].rstrip()
            if head:
                return head, _drop_separator(text[cut:])
    return text[:limit], text[limit:]


def _last_cut(pattern: re.Pattern[str], window: str, floor: int) -> int | None:
    """Where the last separator of ``pattern`` at or after ``floor`` starts, if any."""
    cuts = [m.start("sep") for m in pattern.finditer(window, floor)]
    return cuts[-1] if cuts else None


def _drop_separator(tail: str) -> str:
    """Drop the whitespace of the cut but keep the next line's indentation (code, nested lists)."""
    body = tail.lstrip()
    leading = tail[: len(tail) - len(body)]
    newline = leading.rfind("\n")
    return tail[newline + 1 :] if newline >= 0 else body


def _open_fence(text: str) -> str | None:
    """The header line (e.g. "```python") of a code block still open at the end of ``text``."""
    header = None
    for line in text.split("\n"):
        marker = line.lstrip()
        if marker.startswith(FENCE):
            header = marker.rstrip() if header is None else None
    return header

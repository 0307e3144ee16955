"""A reply never promises a reminder that was not stored (ORCH-13).

The model may answer "Sure, I'll remind you on Friday" without calling ``reminder_set``, or after the tool
refused the time. Peers' bots do exactly that, and nothing fires. So after the tool loop, a reply that claims a
reminder while no ``reminder_set`` call stored a row in this turn loses the sentences that claim it and gains a
plain note saying nothing was set and how to set one. A streamed reply has already shown its words: the note
follows them. Kept here, small and on its own, so a generic "claim without a tool result" check elsewhere can
take it over.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from memory import MemoryTools, Reminding

NOT_SET = "(I haven't set a reminder: nothing is scheduled. Tell me when again, or use /remind <when> <what>.)"
NOT_NEW = "(I didn't set a new reminder just now: /reminders shows the ones I keep for you.)"
_CLAIM = re.compile(
    r"\b(?:i'?ll|i\s+will|i'?m\s+going\s+to|i\s+am\s+going\s+to|i'?ve|i\s+have|will)\s+(?:\w+\s+){0,3}remind(?:ed)?\s+you\b"
    r"|\breminder\s+(?:is\s+|has\s+been\s+|was\s+)?(?:set|scheduled|created|added|saved)\b"
    r"|\b(?:set|scheduled|created|added)\s+(?:a|the|your|that|this|you\s+a)\s+reminder\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")


def claims_reminder(text: str) -> bool:
    """A sentence saying a reminder is or will be set; a question ("shall I set a reminder?") offers, not claims."""
    said = text.replace("\u2019", "'")
    return any(_CLAIM.search(s) and not s.rstrip().endswith("?") for s in _SENTENCE.findall(said))


def honest_about_reminders(
    text: str | None, reminders_set: list[int], has_others: bool = False
) -> str | None:
    """``text`` as it may be sent: unchanged when it claims no reminder or one was stored this turn."""
    if text is None or reminders_set or not claims_reminder(text):
        return text
    if has_others:
        return f"{text}\n\n{NOT_NEW}"
    kept = "".join(s for s in _SENTENCE.findall(text) if not claims_reminder(s)).strip()
    return f"{kept}\n\n{NOT_SET}" if kept else NOT_SET


async def held_to_its_word(
    text: str | None,
    tools: MemoryTools,
    reminding: Reminding,
    streamed: Callable[[str], Awaitable[None]] | None,
) -> str | None:
    """``honest_about_reminders`` for this turn's reply (which may have been streamed: then only
    the note can still be added)."""
    if text is None or tools.reminders_set or not claims_reminder(text):
        return text
    has_others = bool(await reminding.kept_for(tools.ctx.speaker_id))
    fixed = honest_about_reminders(text, tools.reminders_set, has_others)
    if streamed is None or fixed is None:
        return fixed
    note = NOT_NEW if has_others else NOT_SET
    await streamed(f"\n\n{note}")
    return f"{text}\n\n{note}"

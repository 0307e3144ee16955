"""Asks to forget, read in a transcript: what a person asked the bot to forget before its facts are filed.

Forgetting a stored memory is ``memory.upkeep.forgetting`` (the /forget command, the memory_delete tool,
the dashboard, a veto). An ask in the same conversation as the fact it names comes before there is any
memory to forget: extraction runs after the turns go quiet, so "I'm running a half marathon ... actually,
forget the half marathon" reaches the model in one transcript, and the model may well file the half
marathon anyway. ``memory.write.ownership`` drops such a fact: the asker's, from lines said before the ask,
matching what was asked.

An ask is a sentence that opens with the request (after a name, "please", "ok", "can you", "I want you
to"...): "forget X", "forget about X", "/forget X", "don't remember X", "stop remembering X", "don't keep /
save / store X". "I always forget my keys", "don't forget my birthday" and "I don't remember his name" are
not asks. What it names:

    words       "forget the half marathon": facts holding its distinctive words (or, when it has none, all
                its words), in the fact's stems (``memory.write.wording``)
    that        "forget that", "forget it", "forget what I just said": facts from the asker's line before
    everything  "forget everything I said": every fact of the asker from the lines before
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .wording import content_words

_OPENERS = (
    r"ok(?:ay)?|so|and|also|oh|actually|hey|please|pls|wait|sorry|hmm|um|no|on second thought"
)
# a name, "ok", "please"...
_LEAD = r"(?:^|(?<=[.!?;:\n]))\s*(?:[\w'-]+,\s*)?(?:(?:" + _OPENERS + r")\b[\s,]*)*"
_ASK = r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|i\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\s+|please\s+)?"
_VERB = r"(?:/forget|forget|unremember|stop\s+remembering|(?:don'?t|do\s+not|not)\s+(?:remember|keep|save|store))\b"
ASK = re.compile(_LEAD + _ASK + _VERB + r"(?P<what>[^.!?;\n]*)", re.IGNORECASE)
EVERYTHING = frozenset({"everyth"})  # the stem of "everything"
# words that point at what was said rather than name it: "forget what I just said about that"
# stems (``memory.write.wording``)
POINTING = frozenset(
    {
        "about",
        "told",
        "earlier",
        "last",
        "messag",
        "thing",
        "stuff",
        "bit",
        "part",
        "pleas",
        "bot",
        "now",
        "again",
    }
)


@dataclass(frozen=True, slots=True)
class Asked:
    """One ask to forget, by ``speaker`` on line ``line`` (0-based): ``what`` it names (empty: "that", the
    asker's line ``before`` the ask), or ``everything`` they said before it."""

    speaker: str
    line: int
    what: str
    before: int | None
    everything: bool = False


def forgets_in(speakers: Sequence[str | None], texts: Sequence[str]) -> tuple[Asked, ...]:
    """The asks to forget among the people's lines (``speakers[i]`` None: the bot's line, never an ask)."""
    out = []
    for i, (speaker, text) in enumerate(zip(speakers, texts, strict=True)):
        if speaker is None:
            continue
        earlier = next((j for j in range(i - 1, -1, -1) if speakers[j] == speaker), None)
        for match in ASK.finditer(text or ""):
            # "I quit my job. Forget that."
            before = i if content_words(text[: match.start()]) else earlier
            what = match.group("what").strip()
            named = content_words(what) - POINTING
            everything = bool(named) and named <= EVERYTHING
            out.append(
                Asked(speaker, i, "" if everything or not named else what, before, everything)
            )
    return tuple(out)

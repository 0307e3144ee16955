"""A reply that says it stored or forgot something must be backed by a tool that did (ORCH-9).

Weak models say "I'll remember that" or "I've forgotten it" without calling any tool (a 1.5B made 0 calls in 9
requests and claimed to remember anyway). The claim is checked against the tools that ran and succeeded in the
same turn, and against what the pipeline does by itself (a remembered person's words go to extraction, so
"I'll remember that" holds there; nothing forgets by itself); an unbacked one gets a
short honest line appended. Appended, not replaced: a streamed reply has
already been read, and the rest of it may be a good answer. The patterns are first-person and specific ("I'll
remember", "noted", "I've forgotten"), so ordinary chat ("I remember you said...", "don't
forget your keys") never matches.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ran:
    """One tool call of the turn and what it answered (``Error: ...`` when it failed)."""

    name: str
    arguments: str
    result: str

    @property
    def ok(self) -> bool:
        return not self.result.lstrip().lower().startswith("error")

    def does(self, words: tuple[str, ...]) -> bool:
        """Whether this call is of a kind (by its name, or the action a one-tool-per-area design passes)."""
        try:
            action = json.loads(self.arguments).get("action", "")
        except (ValueError, AttributeError):
            action = ""
        said = f"{self.name} {action if isinstance(action, str) else ''}".lower()
        return any(word in said for word in words)


_WILL = r"\bi(?:'ll|’ll| will| shall|'m going to|’m going to| am going to)\s+(?:also\s+|now\s+|definitely\s+)?"
_HAVE = r"\bi(?:'ve|’ve| have)?\s+(?:also\s+|now\s+|just\s+|already\s+)?"
_IT = r"\b(?:consider it|it's|it’s|it is|that's|that’s|that is|it has been|it's been|it’s been)\s+"
CLAIMS: dict[str, tuple[re.Pattern[str], ...]] = {
    "keep": (
        re.compile(
            _WILL
            + r"(?:remember|note|save|store|keep (?:that|this|it) in mind|make a note|write (?:that|it) down)\b",
            re.I,
        ),
        re.compile(
            _HAVE + r"(?:noted|saved|stored|made a note|written (?:that|it) down|jotted)\b", re.I
        ),
        re.compile(r"(?:^|[.!?]\s+)(?:noted|got it,? noted|saved|stored)\s*(?:[.!,]|$)", re.I),
        re.compile(_IT + r"(?:saved|stored|noted)\b", re.I),
    ),
    "forget": (
        re.compile(
            _HAVE
            + r"(?:forgotten|deleted|erased|wiped|removed (?:it|that|this|them)? ?from (?:my )?memory)\b",
            re.I,
        ),
        re.compile(_WILL + r"(?:forget|delete|erase)\b", re.I),
        re.compile(_IT + r"(?:forgotten|deleted|erased)\b", re.I),
    ),
}
# The tools that back each kind of claim (memory_store / memory_update; memory_delete). A reminder claim is not
# read here: ``bot.reminders.claims`` checks it against the reminder rows stored this turn (ORCH-13).
BACKED_BY: dict[str, tuple[str, ...]] = {
    "keep": ("store", "update", "save", "remember"),
    "forget": ("delete", "forget"),
}
NOTES = {
    "keep": "(To be clear: nothing was saved. Remembering is off here, so I won't keep this.)",
    "forget": "(To be clear: nothing was forgotten just now. /forget followed by the words removes it for sure.)",
}
FORGOTTEN = "(Done: what you asked me to forget is forgotten.)"
# A reply that already says it is done ("Done.", "All done!", "That's done"): the note would say
# it twice ("Done.\n\n(Done: what you asked me to forget is forgotten.)", issue 45)
_SAYS_DONE = re.compile(
    r"(?:^|[.!?]\s+)(?:ok(?:ay)?[,!.]?\s+|sure[,!.]?\s+)?(?:all\s+)?done\b"
    r"|\b(?:it's|it’s|it is|that's|that’s|that is|consider it|all)\s+(?:all\s+)?done\b",
    re.I,
)
# A reply that only says the model cannot help ("I'm sorry, but I can't help you with that.", the
# real 1.5B's answer to a forget and a reminder the bot then did): said to a person whose ask was
# done, it contradicts what follows it, so it goes and the note alone says what was done
_REFUSAL = re.compile(
    r"^\W*(?:i['’]?m sorry|sorry|i apologi[sz]e|unfortunately)\b[^.!?\n]{0,40}"
    r"\b(?:can['’]?t|cannot|unable|not able)\b[^\n]{0,60}$",
    re.IGNORECASE,
)


def only_refuses(text: str) -> bool:
    """Whether ``text`` is only a short "I'm sorry, but I can't help with that"."""
    return _REFUSAL.match(text.strip()) is not None


_NEGATED = re.compile(r"\b(?:not|n't|never|can't|cannot|won't)\b[^.!?]{0,20}$", re.IGNORECASE)


def claims(text: str) -> list[str]:
    """The kinds of action the reply claims to have done ("keep", "forget")."""
    found = []
    for kind, patterns in CLAIMS.items():
        if any(_affirmed(text, match) for pattern in patterns for match in pattern.finditer(text)):
            found.append(kind)
    return found


def _affirmed(text: str, match: re.Match[str]) -> bool:
    """Not a claim: a negation ("I haven't saved", "I can't remember") or a question ("Should I remember that?")."""
    before = text[max(0, match.start() - 30) : match.start()]
    sentence_end = re.search(r"[.!?\n]", text[match.end() :])
    closing = text[match.end() + sentence_end.start()] if sentence_end else ""
    return not _NEGATED.search(before) and "n't" not in match.group().lower() and closing != "?"


def unbacked(
    text: str, ran: Sequence[Ran], *, extracted: bool = False, forgot: bool = False
) -> list[str]:
    """The claimed kinds no successful tool call of this turn backs. ``extracted``: the person's words go to
    background extraction (WRITE-1), which keeps what they said by itself: a "keep" claim is then true
    without a tool. ``forgot``: a forget asked in words was done before the model answered."""
    done = {"keep": extracted, "forget": forgot}
    return [
        kind
        for kind in claims(text)
        if not done[kind] and not any(call.ok and call.does(BACKED_BY[kind]) for call in ran)
    ]


def honest_note(
    text: str, ran: Sequence[Ran], *, extracted: bool = False, forgot: bool = False
) -> str:
    """The line to append to ``text`` ("" when every claim it makes is backed)."""
    return " ".join(NOTES[kind] for kind in unbacked(text, ran, extracted=extracted, forgot=forgot))


async def honest(
    text: str,
    ran: Sequence[Ran],
    stream: Callable[[str], Awaitable[None]] | None,
    *,
    extracted: bool,
    forgot: bool = False,
) -> str:
    """The final reply, with a short honest line when it claims a store or a forget nothing did (also
    streamed, after what the person already read). ``extracted``: the person's words go to extraction;
    ``forgot``: something was forgotten this turn before the model answered, which the person is
    told even when the model does not say so (a real 1.5B answered a done forget with "I can't help
    with that")."""
    text = text.strip()
    if forgot and stream is None and only_refuses(text):
        text = ""  # the note says it was done (a streamed reply was read already: the note follows)
    kinds = unbacked(text, ran, extracted=extracted, forgot=forgot)
    notes = [NOTES[kind] for kind in kinds]
    if forgot and "forget" not in claims(text) and not _SAYS_DONE.search(text):
        notes.append(FORGOTTEN)
    if not notes:
        return text
    if kinds:
        log.info(
            "the reply claims what nothing did this turn (%s); an honest line is added",
            ", ".join(kinds),
        )
    note = " ".join(notes)
    if stream is not None:
        await stream(f"\n\n{note}" if text else note)
    return f"{text}\n\n{note}" if text else note

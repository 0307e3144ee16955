"""What a model files that is no fact about anyone (issue 45: each filed by a real 1.5B), and a
request to remember at a fact's head, taken off:

    a request        "remind me tomorrow at 9am to call the vet" (a reminder is set, not filed)
    a pleasantry     "Thanks, that's all for today."
    "remember that"  "Remember that my sister's birthday is on 12 May" -> "My sister's birthday ..."

(A question with no statement beside it is ``ownership.asks_only``.)"""

from __future__ import annotations

import re

from ..reminder_time import asks_for_reminder

_REQUEST = re.compile(
    r"^\W*(?:please\s+)?(?:remember|note|don'?t\s+forget|keep\s+in\s+mind)(?:\s+that)?[\s:,]+",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^\W*(?:thanks|thank\s+you|cheers|bye|goodbye|good\s*night|hello|hi|hey|that'?s\s+all)\b",
    re.IGNORECASE,
)


def not_a_fact(content: str) -> str | None:
    """Why ``content`` is no fact (the tally's reason), or None."""
    if asks_for_reminder(content):
        return "a request, not a fact"
    if _PLEASANTRY.match(content):
        return "a greeting or a thanks, not a fact"
    return None


def unasked(content: str) -> str:
    """``content`` without a request to remember it at its head."""
    rest = _REQUEST.sub("", content, count=1)
    return rest[:1].upper() + rest[1:] if rest != content and rest else content

"""What a model files that is no fact about anyone (issue 45: each filed by a real 1.5B), and a
request to remember at a fact's head, taken off:

    a request        "remind me tomorrow at 9am to call the vet" (a reminder is set, not filed)
    a pleasantry     "Thanks, that's all for today."
    "remember that"  "Remember that my sister's birthday is on 12 May" -> "My sister's birthday ..."
    a label          "Maya: I teach chemistry" -> "I teach chemistry" (the transcript's form)

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
# a greeting that is all the line says ("Morning runs are her favourite" is a fact)
_GREETING = re.compile(
    r"^\W*(?:good\s+)?(?:morning|afternoon|evening|day)(?:\s+(?:all|everyone|there))?\W*$",
    re.IGNORECASE,
)


# a speaker's label before a line, as the transcript shows lines: "Maya: Morning!"
_LABEL = re.compile(r"^\s*[^\W\d_][^\s:：]{0,23}\s*[:：]\s*")


def not_a_fact(content: str) -> str | None:
    """Why ``content`` is no fact (the tally's reason), or None."""
    if asks_for_reminder(content):
        return "a request, not a fact"
    said = _LABEL.sub("", content, count=1)
    if _PLEASANTRY.match(said) or _GREETING.match(said):
        return "a greeting or a thanks, not a fact"  # "Maya: Morning!" too (the real 1.5B)
    return None


def unlabelled(content: str, name: str) -> str:
    """``content`` without its teller's label at its head ("Maya: I teach chemistry": the line as
    the transcript shows it, filed whole)."""
    label = _LABEL.match(content)
    if not name or label is None or label.group().rstrip(" :：") != name:
        return content
    return content[label.end() :] or content


def unasked(content: str) -> str:
    """``content`` without a request to remember it at its head."""
    rest = _REQUEST.sub("", content, count=1)
    return rest[:1].upper() + rest[1:] if rest != content and rest else content

"""When a newer fact is a new version of an older one, and when the two are two facts (issue 44).

The store chains a fact to an older one it updates or contradicts (``memory.write.store``: the old
row is superseded, and forgetting the new one takes it too, as the same fact in older words).
Meaning alone cannot tell a changed value from another event: "Alice ran 5 km on Monday" and "Alice
ran 7 km on Tuesday" are 0.95 alike to MiniLM, and were chained, so one forget took both. Two facts
are ``distinct``, and never chained, when

    both name a day or date, not the same ones     "ran 5 km on Monday" / "ran 7 km on Tuesday",
                                                   "swam on 3 March" / "swam on 5 March"
    their numbers differ, and so do their words    "has 2 cats" / "has 2 cats and 1 dog",
                                                   "locker is 12" / "bike lock is 14"

A changed number in the same words stays a new version: "Alice's locker is 12" -> "... is 14",
"Alice has 2 cats" -> "... 3 cats", "the train leaves at 8:15" -> "... at 9:40". Days and dates:
week days, months ("May" only beside a number), dates in digits, years, yesterday, today, tonight,
tomorrow, and "last/next/this week|month|year|weekend".
"""

from __future__ import annotations

import re
import unicodedata

from .wording import content_words, stem

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january", "february", "march", "april", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip
_TOKEN = re.compile(r"\d+(?:[-/.]\d+)*(?:st|nd|rd|th)?|[^\W\d_]+(?:'[^\W\d_]+)?")
_RELATIVE = frozenset({"yesterday", "today", "tonight", "tomorrow"})
_SPAN = frozenset({"week", "month", "year", "weekend"})
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)$")
_YEAR = re.compile(r"(?:19|20)\d\d$")


def distinct(older: str, newer: str) -> bool:
    """Whether two facts are two, never versions of one (the table above)."""
    when_a, nums_a, rest_a = _read(older)
    when_b, nums_b, rest_b = _read(newer)
    if when_a and when_b and when_a != when_b:
        return True
    return nums_a != nums_b and rest_a != rest_b


def _read(text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The fact's days and dates, its other numbers, and its content words less both."""
    words = _TOKEN.findall(unicodedata.normalize("NFKC", text or "").casefold())
    when: set[str] = set()
    for i, word in enumerate(words):
        before, after = words[i - 1] if i else "", words[i + 1] if i + 1 < len(words) else ""
        if mark := _when(word, before, after):
            when.add(mark)
    numbers = {_number(w) for w in words if w[0].isdigit()} - when
    marks = {part for mark in when for part in mark.split()}
    told = {stem(w) for w in marks} | marks | numbers
    rest = frozenset(w for w in content_words(text) if w not in told and not w[0].isdigit())
    return frozenset(when), frozenset(numbers), rest


def _when(word: str, before: str, after: str) -> str | None:
    """The day or date this word names ("mondays" is "monday"; "may" only beside a number)."""
    bare = word.removesuffix("s")
    if bare in _DAYS or word in _RELATIVE:
        return bare if bare in _DAYS else word
    if word in _MONTHS or (word == "may" and (before[:1].isdigit() or after[:1].isdigit())):
        return word
    if word in _SPAN and before in ("last", "next", "this"):
        return f"{before} {word}"
    if word[0].isdigit() and (any(c in word for c in "-/.") or _YEAR.match(word)):
        return word  # 2026-03-05, 3/5, 5.3.2026, 2026
    if word[0].isdigit() and (before in _MONTHS or after in _MONTHS or "may" in (before, after)):
        return _number(word)  # the day of "3 March", "March 3rd"
    return None


def _number(word: str) -> str:
    found = _ORDINAL.match(word)
    return found.group(1) if found else word

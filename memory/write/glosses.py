"""An English reading of a learned fact written in another language (SEC-5, issue 31): before such a
fact about a person who has forgotten something is stored, the model translates it into English and
the translation is checked against the person's tombstones too
(``memory.write.tombstones.unforgotten``), so that "Alice hat Angst vor Spinnen" is known as "Alice
is afraid of spiders", forgotten. A model reads a language far better than it writes one: the 1.5B
that wrote "verzweifelt" for "afraid" read "Angst vor Spinnen" right.

The fact is the model's own output, just written; the English reading is never stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..recall.leaks import _vocabulary
from .traces import FOREIGN_STOPS, fold_case
from .wording import STOPS

LONGEST = 300  # an English reading is one sentence; a rambling model is cut
_WORD = re.compile(r"[^\W\d_]+")
_BOTH = STOPS & FOREIGN_STOPS  # "in", "die", "son": no sign either way


def foreign(text: str, names: Iterable[str] = ()) -> bool:
    """Whether a fact is written in another language than English, by its little words: more of
    German's, French's, Spanish's, Italian's or Portuguese's than English's ("Alice hat Angst vor
    Spinnen"); with none of either ("Alice schlafwandelt"), when most of its words are not
    English."""
    own = {fold_case(name) for name in names}  # the person's own names, as written
    words = [fold_case(w) for w in _WORD.findall(text or "")]
    # one letter says nothing: "d'avoine" is not English's "d" ("I'd"), "à" folded not its "a"
    words = [w for w in words if len(w) > 1 and w not in own and w not in _BOTH]
    english = sum(w in STOPS for w in words)
    other = sum(w in FOREIGN_STOPS for w in words)
    if english or other:
        return other > english
    vocabulary = _vocabulary()  # the English word list (loaded once)
    return bool(words) and sum(w in vocabulary for w in words) * 2 < len(words)


def english_reading(answer: str) -> str | None:
    """The model's English reading: its first line, quotes off, cut to one sentence's length."""
    line = next((x.strip() for x in (answer or "").splitlines() if x.strip()), "")
    line = line.strip("\"'`“”").strip()
    return line[:LONGEST] or None

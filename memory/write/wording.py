"""What a sentence says, as a set of word stems: for matching a fact with the messages it came from
(``memory.write.extraction``) and with the facts that were forgotten (``memory.write.tombstones``).

    "Alice's zebra finches breed in May."  ->  {"alic", "breed", "finch", "may", "zebra"}

Case, punctuation, stop words, word order and repeats do not count, and a light stemmer folds the common
English endings (plural and third-person s, -es after a sibilant, -ies, -ing, -ed, a final e), so a fact
reworded that way still reads the same. Negations are kept: "not", "no", "never" and "n't" change what a
sentence says. Chinese, Japanese or Thai text is read as its character pairs
(``memory.unspaced``), pairs of two grammar characters left out like stop words:
"小明喜欢跑步" -> {"小明", "明喜", "喜欢", "欢跑", "跑步"}.
"""

from __future__ import annotations

import re
import unicodedata

from ..storage.fts import STOP_WORDS
from ..unspaced import spaced

_KEEP = frozenset({"not", "no", "nor", "never"})
STOPS = frozenset(w for w in STOP_WORDS if w not in _KEEP and not w.endswith("n't"))
_WORD = re.compile(r"\w+(?:'\w+)*")
_SIBILANT_ES = ("ches", "shes", "sses", "xes", "zes")


def content_words(text: str) -> frozenset[str]:
    """The stems of the words that carry meaning, as a set."""
    folded = unicodedata.normalize("NFKC", text or "").casefold().replace("\u2019", "'")
    folded = spaced(folded, little=False)
    return frozenset(stem(w) for w in _WORD.findall(folded) if w not in STOPS)


def normalised(text: str) -> str:
    """The content words in one canonical order: equal for two wordings that differ only in what is ignored."""
    return " ".join(sorted(content_words(text)))


def stem(word: str) -> str:
    """A light stemmer: the same stem for "breeds", "breeding" and "breed", or "likes", "liked" and "like"."""
    w = word.removesuffix("'s")
    if len(w) <= 3:
        return w
    if w.endswith(("ies", "ied")):
        w = w[:-3] + "y"
    elif w.endswith(_SIBILANT_ES):
        w = w[:-2]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeioulsz":
        w = w[:-1]  # running -> run
    return w

"""What a sentence says, as a set of word stems: for matching a fact with the messages it came from
(``memory.write.extraction``) and with the facts that were forgotten (``memory.write.tombstones``).

    "Alice's zebra finches breed in May."  ->  {"alic", "breed", "finch", "may", "zebra"}

Case, punctuation, stop words, word order and repeats do not count, and a light stemmer folds the
common English endings (plural and third-person s, -es after a sibilant, -ies, -ing, -ed, a final
e), so a fact reworded that way still reads the same. Negations are kept: "not", "no", "never" and
"n't" change what a sentence says, and ``denies`` reads them: "I would never steal from the
collection box" holds the words of "Bob steals from the collection box" and denies it. Chinese,
Japanese or Thai text is read as its character pairs (``memory.unspaced``), pairs of two grammar
characters left out like stop words: "小明喜欢跑步" -> {"小明", "明喜", "喜欢", "欢跑", "跑步"}.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ..storage.fts import STOP_WORDS
from ..unspaced import spaced

_KEEP = frozenset({"not", "no", "nor", "never"})
STOPS = frozenset(w for w in STOP_WORDS if w not in _KEEP and not w.endswith("n't"))
_WORD = re.compile(r"\w+(?:'\w+)*")
_SIBILANT_ES = ("ches", "shes", "sses", "xes", "zes")
NEGATIONS = frozenset(
    {"not", "no", "nor", "never", "cannot", "nothing", "nobody", "none", "neither"}
)
# Where one statement ends and the next begins: "I never lie, but I steal" is two of them
_CLAUSE_END = re.compile(r"[.!?;:\n]+|,?\s+but\s+|\s+(?:although|though|whereas)\s+")
# A reply's opening "No," / "Not really:" answers a question; it does not deny what follows it
_INTERJECTION = re.compile(
    r"^\s*(?:oh\s+)?(?:no|nope|nah|not really|not at all|not exactly|no way)"
    r"\s*[,!\-\u2013\u2014]+\s*"
)


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


def negation(word: str) -> bool:
    """A word that turns what a clause says around: "not", "never", "no", "don't", "wouldn't"."""
    return word in NEGATIONS or word.endswith("n't")


def denies(text: str, fact: str, words: frozenset[str] | None = None) -> bool:
    """Whether ``text`` holds the fact's words the other way round: the clause of it holding most
    of ``words`` (the fact's content words less its negations; ``content_words(fact)`` when None)
    is negated and the fact's own such clause is not, or the other way. A text holding none of them
    denies nothing.

        denies("I would never steal from the collection box", "Bob steals from the collection box")
        -> True; denies("No, I have a grey cat", "Alice has a grey cat") -> False
    """
    wanted = frozenset(
        w for w in (content_words(fact) if words is None else words) if not negation(w)
    )
    line = _polarity(text, wanted)
    if line is None:
        return False
    said = _polarity(fact, wanted)
    return line != (_negated(_fold(fact)) if said is None else said)


def _polarity(text: str, wanted: frozenset[str]) -> bool | None:
    """Whether the clauses of ``text`` holding most of ``wanted`` are all negated (a clause
    saying it plainly wins over one denying it: "I never lie. I do steal from it."); None: none
    holds any."""
    scored = [(len(wanted & said), negated) for said, negated in _clauses(text)]
    best = max((n for n, _ in scored), default=0)
    return all(negated for n, negated in scored if n == best) if best else None


@lru_cache(maxsize=4096)
def _clauses(text: str) -> tuple[tuple[frozenset[str], bool], ...]:
    """Each clause of ``text``: its content words and whether it is negated."""
    out = []
    for sentence in _CLAUSE_END.split(_fold(text)):
        clause = _INTERJECTION.sub("", sentence)
        if clause.strip():
            out.append((content_words(clause), _negated(clause)))
    return tuple(out)


def _negated(folded: str) -> bool:
    return any(negation(w) for w in _WORD.findall(folded))


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").casefold().replace("\u2019", "'")

"""Words close in meaning to a query's words, for the words channel (docs/recall.md, "Words close in meaning").

BM25 finds only the words a question uses: "any tips for my phone's battery?" misses "my new power bank and
charging pad". The thesaurus gives each whole English word of the MiniLM vocabulary (21,000 words) its nearest
others by MiniLM's own meaning of the word alone (cosine >= ``MIN_STORED``, at most ``STORED`` of them, one form
a stem and none of its own: "battery" -> charge, powered). Retrieval searches the words close to the query's in a
second BM25 query and counts what it finds at a share of a match on the query's own words
(``RecallKnobs.expand_weight``).

The thesaurus is a file shipped with the package (``memory/assets/thesaurus.tsv.gz``), made once by
``scripts/build_thesaurus.py`` from the model and the tokenizer's vocabulary: nothing in it comes from a
store, so it holds nothing anybody said and nothing to forget; it costs no model run at query time.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path

import numpy as np

ASSETS = Path(__file__).parents[1] / "assets"
THESAURUS = ASSETS / "thesaurus.tsv.gz"
STORED = 5  # neighbours kept a word in the file
MIN_STORED = 0.55  # the least likeness kept in the file (a knob may ask for more, never less)
PER_WORD = 3  # neighbours a query word brings in at most
MAX_WORDS = 8  # words a query brings in at most
MIN_LETTERS = 3

Stemmer = Callable[[str], str]


@cache
def _tables() -> tuple[dict[str, str], dict[str, str]]:
    """(word -> its neighbours as stored, "charging:0.71 charger:0.69"; stem -> the commonest word of that stem).
    Neighbours are parsed per query, a few words at a time: 20,000 short strings hold ~3 MB, their parsed tuples
    would hold five times that."""
    by_word: dict[str, str] = {}
    by_stem: dict[str, str] = {}
    with gzip.open(THESAURUS, "rt", encoding="utf-8") as f:
        for line in f:  # the file lists words commonest first
            word, stem, close = line.rstrip("\n").split("\t")
            by_word[word] = close
            by_stem.setdefault(stem, word)
    return by_word, by_stem


def neighbours(word: str, stem: str = "") -> list[tuple[str, float]]:
    """The stored neighbours of ``word`` (lower case), likest first, or of the commonest word of its ``stem``
    ("cuisines" -> cuisine's); [] for a word the thesaurus lacks."""
    by_word, by_stem = _tables()
    found = by_word.get(word) or by_word.get(by_stem.get(stem, ""))
    if not found:
        return []
    return [(w, float(s)) for w, s in (item.rsplit(":", 1) for item in found.split())]


def expand(terms: Sequence[tuple[str, str]], stem: Stemmer, likeness: float) -> list[str]:
    """Words close to the query's ``terms`` ((raw, stemmed) pairs, as the words channel finds them), at most
    ``PER_WORD`` a word and ``MAX_WORDS`` in all, none sharing a stem with the query's words or with each other.
    Taken in rounds: every word's likest neighbour first, then every word's second, so that one word with many
    close neighbours ("phone": telephone, smartphone, iphone) does not crowd out another's ("battery": charge)."""
    taken = {s for _, s in terms}
    lists = []
    for raw, own in terms:
        close = [(like, word) for word, like in neighbours(raw, own) if like >= likeness]
        lists.append([(like, word, s) for like, word in close if (s := stem(word)) not in taken])
    picked: list[str] = []
    for place in range(PER_WORD):
        for _, word, s in sorted(
            (found[place] for found in lists if place < len(found)), key=lambda c: -c[0]
        ):
            if s not in taken and len(picked) < MAX_WORDS:
                taken.add(s)
                picked.append(word)
    return picked


def vocabulary(tokens: Iterable[str], stop_words: frozenset[str]) -> list[str]:
    """The whole words of a WordPiece vocabulary worth a neighbour list: ASCII letters only, 3 or more, no stop word."""
    return [
        t
        for t in tokens
        if t.isascii()
        and t.isalpha()
        and t.islower()
        and len(t) >= MIN_LETTERS
        and t not in stop_words
    ]


def build(words: list[str], vectors: np.ndarray, stem: Stemmer, *, chunk: int = 2048) -> list[str]:
    """The file's lines, commonest word first: each word, a tab, its stem, a tab, and its neighbours "word:0.71"
    likest first (``vectors``: unit rows, one a word)."""
    stems = [stem(w) for w in words]
    lines = []
    for start in range(0, len(words), chunk):
        for i, row in enumerate(vectors[start : start + chunk] @ vectors.T, start):
            if kept := _likest(row, words, stems, stems[i]):
                lines.append(f"{words[i]}\t{stems[i]}\t{' '.join(kept)}")
    return lines


def _likest(row: np.ndarray, words: list[str], stems: list[str], own: str) -> list[str]:
    """At most ``STORED`` "word:likeness" items, likest first, none below ``MIN_STORED``, one form a stem and none
    of the word's own stem ("soccers" after "soccer" is left out)."""
    width = min(4 * STORED + 8, len(row))
    top = np.argpartition(-row, width - 1)[:width]
    seen = {own}
    kept: list[str] = []
    for j in top[np.argsort(-row[top])]:
        if row[j] < MIN_STORED or len(kept) == STORED:
            break
        if stems[j] not in seen:
            seen.add(stems[j])
            kept.append(f"{words[j]}:{row[j]:.2f}")
    return kept

"""Turning user text into a safe, fast FTS5 query (RET-1, SEC-2).

User text never reaches FTS syntax raw: it is tokenised with the same tokenizer the index uses, stop
words are dropped (faster and better recall, STACK.md), every term is double-quoted (so NEAR, AND,
``*``, ``^``, ``-`` and parentheses are just words), and terms are OR-ed. Terms found in a large share of
all rows add little to BM25 but cost a long posting-list walk, so the most common ones are dropped
when the index is big, keeping at least the rarest few.

What costs time in a large index is not walking a posting list (counting the 10k rows of a common
word takes a fraction of a millisecond) but scoring each matching row with ``bm25()`` (a few
microseconds each: positions decoded for every phrase, a sort). So a big index is searched rare terms
first (``TextQuery.rare``): the same expression and the same ``bm25()``, but only the rows that also
match a rare term or two of the common ones are scored, over the whole history. Every other matching
row holds exactly one common term, so it scores at most that term's bound (BM25 gives a term at most
``idf * (k1 + 1)``): when the last of the rows scored beats every bound, the answer is the plain
query's, row for row. When it does not, the rows of the common terms whose bound reaches it are
scored too, newest first and at most ``COMMON_ROWS`` of them (``memory.storage.corpus.Corpus.text_search``): a
word in 8% of a million rows (the bench's commonest) would cost ~40 ms to score in full, and among its
rows BM25 ranks little more than length. A query of common words alone is searched the same way.
Below ``COMMON_ROWS`` matching rows the answer is the plain query's; past it, what can differ is only
which of the rows holding a single common word and nothing rarer make the list.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import apsw

from ..unspaced import has_unspaced, query_words
from .db import Database
from .tokenizer import NAME as TOKENIZER

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "also",
        "just",
        "get",
        "got",
        "did",
        "does",
        "tell",
        "know",
        "really",
        "yes",
        "yeah",
        "ok",
        "okay",
        "hey",
        "hi",
        "oh",
        "say",
        "said",
        "says",
        "think",
        "thinks",
        "thought",
        "describe",
        "described",
        "mention",
        "mentioned",
        "talk",
        "talked",
        "kind",
        "type",
    ]
)

MAX_TERMS = 24
MAX_QUERY_CHARS = 2_000
RARE_FIRST_ROWS = 250_000  # below this the plain query is cheaper (at 100k rows the split doubled FTS p95: 4.7 -> 9.4 ms)
COMMON_SHARE = (
    0.01  # a term in more than this share of the rows is "common" for the rare-first split
)
MAX_PAIRED = 6  # more common terms than this (15 pairs) and the query runs plain
COMMON_ROWS = (
    5_000  # rows holding one common term and nothing rarer: at most this many scored, the newest
)
BM25_K1 = 1.2  # FTS5's bm25() constants (fts5_aux.c); the bound below depends on k1 only
BOUND_SLACK = (
    1.05  # document frequencies are cached for minutes: a common term's idf may have grown a little
)


@dataclass(frozen=True, slots=True)
class TextQuery:
    """A MATCH expression and, for a big index, ``rare``: the rows worth scoring first (None: nothing but
    common terms, or no split).

    A row that matches ``expr`` but not ``rare`` holds exactly one of the ``common`` terms, and scores at
    most that term's bound (as a positive BM25 value); ``bound`` is the largest of them."""

    expr: str
    first: str | None = (
        None  # the rare terms and the pairs of common ones, before the partition restriction
    )
    common: tuple[
        tuple[str, float], ...
    ] = ()  # (quoted term, the most a row holding only it can score)
    ptokens: tuple[str, ...] = ()

    @property
    def rare(self) -> str | None:
        return None if self.first is None else _restricted(self.first, self.ptokens)

    @property
    def bound(self) -> float:
        return max((b for _, b in self.common), default=0.0)

    def threats(self, floor: float) -> str | None:
        """The common terms whose rows alone could reach ``floor`` (the score to beat), as one expression;
        None when none can, and the rare-first answer stands."""
        terms = self._threats(floor)
        return _restricted(" OR ".join(terms), self.ptokens) if terms else None

    def widened(self, floor: float) -> str | None:
        """``rare`` plus every common term whose rows alone could reach ``floor``; None when none can."""
        terms = self._threats(floor)
        if not terms:
            return None
        return _restricted(" OR ".join([self.first, *terms] if self.first else terms), self.ptokens)

    def _threats(self, floor: float) -> list[str]:
        return [term for term, bound in self.common if bound >= floor]


class FtsQueryBuilder:
    """Builds MATCH expressions for one FTS5 table, with a cached document-frequency view."""

    def __init__(self, db: Database, fts_table: str, df_ttl_s: float = 600.0) -> None:
        self.db = db
        self.fts_table = fts_table
        self._tokenizer = db.con.fts5_tokenizer(TOKENIZER)
        self._vocab = f"{fts_table}_vocab"
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self._vocab} USING fts5vocab(main, {fts_table}, row)"
        )
        self._df: dict[str, tuple[float, int]] = {}
        self._df_ttl = df_ttl_s
        self._rows: tuple[float, int] = (0.0, 0)
        self._instances: str | None = None  # the fts5vocab instance table, made when first needed

    def terms(self, text: str) -> list[tuple[str, str]]:
        """(raw word, stemmed term) pairs, stop words and duplicates removed, in query order; the
        words of an unspaced script as ``memory.unspaced.query_words`` searches them."""
        found = self.words(text, MAX_QUERY_CHARS)
        unspaced = [stem for _, stem in found if has_unspaced(stem)]
        if unspaced:
            spaced = [(raw, stem) for raw, stem in found if not has_unspaced(stem)]
            found = spaced + [(word, word) for word in query_words(unspaced)]
        return found[:MAX_TERMS]

    def stem(self, word: str) -> str:
        """The index's term for one word ("cuisines" -> "cuisin"); the word itself where it has none (a stop word)."""
        return next((stem for _, stem in self.terms(word)), word)

    def words(self, text: str, max_chars: int) -> list[tuple[str, str]]:
        """Every (raw word, stemmed term) pair of the first ``max_chars`` of ``text``, as ``terms`` finds them."""
        data = (text or "")[:max_chars].encode("utf-8", "replace")
        seen: dict[str, str] = {}
        # apsw types one result for every include_* combination; with the defaults used here each token is (start, end, *stems)
        tokens = cast(
            list[tuple[int, int, *tuple[str, ...]]],
            self._tokenizer(data, apsw.FTS5_TOKENIZE_QUERY, None),
        )
        for start, end, *stems in tokens:
            raw = data[start:end].decode("utf-8", "replace").lower()
            stem = stems[0] if stems else raw
            if raw in STOP_WORDS or len(stem) < 2 and not (stem.isdigit() or has_unspaced(stem)):
                continue
            seen.setdefault(stem, raw)
        return [(raw, stem) for stem, raw in seen.items()]

    def match(self, text: str, ptokens: tuple[str, ...] = ()) -> str | None:
        """A MATCH expression, or None when the text has no searchable words."""
        found = self.query(text, ptokens)
        return found.expr if found else None

    def query(self, text: str, ptokens: tuple[str, ...] = ()) -> TextQuery | None:
        """The MATCH expression with, in a big index, its rare-terms-first companion; None when nothing is searchable."""
        terms = self._prune(self.terms(text))
        if not terms:
            return None
        expr = _expression(terms, ptokens)
        if self._row_count() < RARE_FIRST_ROWS:
            return TextQuery(expr)
        rows = self._indexed_rows()
        common = [t for t in terms if self._doc_freq(t[1]) > COMMON_SHARE * rows]
        if not common or len(common) > MAX_PAIRED:
            return TextQuery(expr)
        bounds = tuple(
            (_quoted(raw), BOUND_SLACK * (BM25_K1 + 1) * _idf(rows, self._doc_freq(stem)))
            for raw, stem in common
        )
        rare = [_quoted(raw) for raw, stem in terms if (raw, stem) not in common]
        if not rare:  # common words only: nothing to score first, their rows newest first
            return TextQuery(expr, None, bounds, ptokens)
        # rows with a rare term, or with two common ones; what is left has one common term and nothing else
        pairs = [
            f"({_quoted(a)} AND {_quoted(b)})"
            for i, (a, _) in enumerate(common)
            for b, _ in common[i + 1 :]
        ]
        return TextQuery(expr, " OR ".join(rare + pairs), bounds, ptokens)

    def _indexed_rows(self) -> int:
        """The row count bm25() itself uses (the first varint of FTS5's averages record, rowid 1): one lookup."""
        block = self.db.scalar(f"SELECT block FROM {self.fts_table}_data WHERE id = 1")
        return _varint(block) if block else self._row_count()

    def _prune(self, terms: list[tuple[str, str]], keep: int = 3) -> list[tuple[str, str]]:
        total = self._row_count()
        if total < 20_000 or len(terms) <= keep:
            return terms
        limit = max(1_000, int(total * 0.04))
        ranked = sorted(terms, key=lambda t: self._doc_freq(t[1]))
        kept = [t for i, t in enumerate(ranked) if i < keep or self._doc_freq(t[1]) <= limit]
        return [t for t in terms if t in kept]

    def _row_count(self) -> int:
        stamp, count = self._rows
        if time.monotonic() - stamp > self._df_ttl:
            count = int(self.db.scalar(f"SELECT COUNT(*) FROM {self.fts_table}_docsize") or 0)
            self._rows = (time.monotonic(), count)
        return count

    def holders(
        self, stems: Iterable[str], columns: tuple[str, ...], cap: int | None = None
    ) -> dict[int, set[str]]:
        """rowid -> which of ``stems`` its ``columns`` hold, read off the index itself (an fts5vocab instance
        table walks each term's posting list): no row is fetched or tokenised. For rare terms: a common one
        walks all its rows, unless ``cap``: a term held by more rows than that is left out (the walk stops there)."""
        if self._instances is None:
            self._instances = f"{self.fts_table}_instances"
            self.db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self._instances} USING fts5vocab(main, {self.fts_table}, instance)"
            )
        sql = f"SELECT DISTINCT doc FROM temp.{self._instances} WHERE term = ? AND col IN ({','.join('?' * len(columns))})"
        sql += "" if cap is None else f" LIMIT {int(cap) + 1}"
        found: dict[int, set[str]] = {}
        for stem in stems:
            rowids = [rowid for (rowid,) in self.db.execute(sql, (stem, *columns))]
            if cap is not None and len(rowids) > cap:
                continue
            for rowid in rowids:
                found.setdefault(rowid, set()).add(stem)
        return found

    def doc_freq(self, stem: str) -> tuple[int, int]:
        """(rows holding this stemmed term, rows indexed), both cached for minutes."""
        return self._doc_freq(stem), self._row_count()

    def _doc_freq(self, stem: str) -> int:
        """Cached for minutes, but a term no row held is read again: it is a new word (a name, a
        number) until the row saying it is written, and a search right after ("/forget bib 4417"
        just after telling it) must not take it for one nothing holds."""
        hit = self._df.get(stem)
        if hit and hit[1] and time.monotonic() - hit[0] < self._df_ttl:
            return hit[1]
        df = int(self.db.scalar(f"SELECT doc FROM temp.{self._vocab} WHERE term = ?", (stem,)) or 0)
        if len(self._df) > 50_000:
            self._df.clear()
        self._df[stem] = (time.monotonic(), df)
        return df


def _expression(terms: list[tuple[str, str]], ptokens: tuple[str, ...]) -> str:
    return _restricted(" OR ".join(_quoted(raw) for raw, _ in terms), ptokens)


def _quoted(raw: str) -> str:
    return '"' + raw.replace('"', '""') + '"'


def _restricted(words: str, ptokens: tuple[str, ...]) -> str:
    return f"({words}) AND ptoken : ({' OR '.join(ptokens)})" if ptokens else words


def _idf(rows: int, docs: int) -> float:
    """FTS5's idf: ln((N - n + 0.5) / (n + 0.5)), and 1e-6 where that is not positive."""
    idf = math.log((rows - docs + 0.5) / (docs + 0.5)) if rows > docs else 0.0
    return idf if idf > 0 else 1e-6


def _varint(data: bytes) -> int:
    """SQLite's variable-length integer at the start of ``data`` (7 bits a byte, big-endian, 9th byte whole)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value

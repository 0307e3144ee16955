"""Turning user text into a safe, fast FTS5 query (RET-1, SEC-2).

User text never reaches FTS syntax raw: it is tokenised with the same tokenizer the index uses, stop
words are dropped (faster and better recall, STACK.md), every term is double-quoted (so NEAR, AND,
``*``, ``^``, ``-`` and parentheses are just words), and terms are OR-ed. Terms found in a large share of
all rows add little to BM25 but cost a long posting-list walk, so the most common ones are dropped
when the index is big, keeping at least the rarest few.
"""

from __future__ import annotations

import time
from typing import cast

import apsw

from .db import Database

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


class FtsQueryBuilder:
    """Builds MATCH expressions for one FTS5 table, with a cached document-frequency view."""

    def __init__(self, db: Database, fts_table: str, df_ttl_s: float = 600.0) -> None:
        self.db = db
        self.fts_table = fts_table
        self._tokenizer = db.con.fts5_tokenizer("porter", ["unicode61"])
        self._vocab = f"{fts_table}_vocab"
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self._vocab} USING fts5vocab(main, {fts_table}, row)")
        self._df: dict[str, tuple[float, int]] = {}
        self._df_ttl = df_ttl_s
        self._rows: tuple[float, int] = (0.0, 0)

    def terms(self, text: str) -> list[tuple[str, str]]:
        """(raw word, stemmed term) pairs, stop words and duplicates removed, in query order."""
        data = (text or "")[:MAX_QUERY_CHARS].encode("utf-8", "replace")
        seen: dict[str, str] = {}
        # apsw types one result for every include_* combination; with the defaults used here each token is (start, end, *stems)
        tokens = cast(list[tuple[int, int, *tuple[str, ...]]], self._tokenizer(data, apsw.FTS5_TOKENIZE_QUERY, None))
        for start, end, *stems in tokens:
            raw = data[start:end].decode("utf-8", "replace").lower()
            stem = stems[0] if stems else raw
            if raw in STOP_WORDS or len(stem) < 2 and not stem.isdigit():
                continue
            seen.setdefault(stem, raw)
        return [(raw, stem) for stem, raw in seen.items()][:MAX_TERMS]

    def match(self, text: str, ptokens: tuple[str, ...] = ()) -> str | None:
        """A MATCH expression, or None when the text has no searchable words."""
        terms = self._prune(self.terms(text))
        if not terms:
            return None
        words = " OR ".join('"' + raw.replace('"', '""') + '"' for raw, _ in terms)
        if not ptokens:
            return words
        return f"({words}) AND ptoken : ({' OR '.join(ptokens)})"

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

    def _doc_freq(self, stem: str) -> int:
        hit = self._df.get(stem)
        if hit and time.monotonic() - hit[0] < self._df_ttl:
            return hit[1]
        df = int(self.db.scalar(f"SELECT doc FROM temp.{self._vocab} WHERE term = ?", (stem,)) or 0)
        if len(self._df) > 50_000:
            self._df.clear()
        self._df[stem] = (time.monotonic(), df)
        return df

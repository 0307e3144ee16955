"""The multilingual model's tokenizer: XLM-RoBERTa's SentencePiece unigram model, in Python.

The vocabulary (250,002 pieces and their log-probabilities) comes from the model file. A text is
normalised character by character, its spaces become META, and each word is cut into the pieces
whose scores sum highest (Viterbi); a character no piece covers is ``<unk>``. ``tokenizers``'s own
Unigram model gives the same ids but holds ~265 MB for this vocabulary; a dict holds ~40 MB, and
the words a chat repeats are cut once (a cache).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

META = "\u2581"  # SentencePiece's mark for a space
_WORD = re.compile(f"{META}[^{META}]*|[^{META}]+")
_UNK_PENALTY = 10.0  # an unknown character scores the lowest piece's score less this
WORDS_CACHED = 50_000


class Unigram:
    """Text -> piece ids, as the model was trained to read them (no ``<s>``/``</s>``)."""

    def __init__(
        self, vocabulary: Sequence[tuple[str, float]], unk: int, normalise: dict[int, str]
    ) -> None:
        self._ids = {piece: index for index, (piece, _) in enumerate(vocabulary) if index != unk}
        self._scores = [score for _, score in vocabulary]
        self._unk = unk
        self._unk_score = min(self._scores) - _UNK_PENALTY
        self._longest = max(len(piece) for piece, _ in vocabulary)
        self._table = normalise
        self.word = functools.lru_cache(maxsize=WORDS_CACHED)(self._word)

    def words(self, text: str) -> list[str]:
        """Text as the tokenizer's words: normalised, runs of spaces as one, every space a META
        that starts a word (one before the first word). No piece holds a META past its first
        character, so a word at a time finds the same pieces as the whole text at once."""
        text = re.sub(" {2,}", " ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return _WORD.findall(text.replace(" ", META))

    def ids(self, text: str) -> list[int]:
        return [i for word in self.words(text) for i in self.word(word)]

    def _word(self, word: str) -> tuple[int, ...]:
        """The highest-scoring cut of one word (ties: the first found, shorter starts first)."""
        size = len(word)
        best = [0.0] + [float("-inf")] * size
        back: list[tuple[int, int]] = [(0, 0)] * (size + 1)  # (start, piece id; -1 unknown)
        for start in range(size):
            here = best[start]
            for end in range(start + 1, min(size, start + self._longest) + 1):
                piece = self._ids.get(word[start:end])
                if piece is not None and here + self._scores[piece] > best[end]:
                    best[end] = here + self._scores[piece]
                    back[end] = (start, piece)
            if here + self._unk_score > best[start + 1]:
                best[start + 1] = here + self._unk_score
                back[start + 1] = (start, -1)
        pieces = []
        end = size
        while end > 0:
            start, piece = back[end]
            pieces.append(self._unk if piece < 0 else piece)
            end = start
        return tuple(reversed(pieces))

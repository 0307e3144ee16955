"""The word index's tokenizer (LANG-1): FTS5's ``porter unicode61``, with text in unspaced scripts
split.

``unicode61`` reads a whole Chinese sentence as one word, so a question found nothing. This
tokenizer takes each of its tokens that holds such characters apart (``memory.unspaced``):

- stored text: every character at its own position, with the pair it starts colocated (FTS5's synonyms), so
  "我喜欢猫" holds 我, 喜, 欢, 猫 and 我喜, 喜欢, 欢猫;
- a query: a run's pairs ("喜欢猫" -> 喜欢, 欢猫), or the character alone when the run is one character.

So a two-character query word matches its pair, a longer one matches as a phrase of its pairs, and a
lone character matches itself, whatever surrounds it in the stored text. Latin, Cyrillic, Greek...
text goes through ``porter unicode61`` unchanged. Every connection registers it (``register``): a
table made with ``tokenize = 'companion'`` cannot be read or written by a connection without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import apsw

from ..unspaced import RUN, has_unspaced

NAME = "companion"
# marks are part of their letter (Thai vowels, Hindi matras): unicode61 alone splits words at them
BASE = ("porter", ["unicode61", "categories", "L* N* Co M*"])
Token = tuple[Any, ...]  # (start byte, end byte, token, *colocated tokens)


def register(con: apsw.Connection) -> None:
    con.register_fts5_tokenizer(NAME, _factory)


def _factory(
    con: apsw.Connection, args: list[str]
) -> Callable[[bytes, int, str | None], list[Token]]:
    base = con.fts5_tokenizer(BASE[0], [*BASE[1], *args])

    def tokenize(utf8: bytes, flags: int, locale: str | None) -> list[Token]:
        out: list[Token] = []
        for token in cast(list[Token], base(utf8, flags, locale)):
            start, end, text = int(token[0]), int(token[1]), str(token[2])
            if has_unspaced(text):
                out.extend(_split(base, utf8[start:end], start, flags, locale))
            else:
                out.append(token)
        return out

    return tokenize


def _split(
    base: Callable[..., Any], raw: bytes, offset: int, flags: int, locale: str | None
) -> list[Token]:
    """One token of ``unicode61`` holding unspaced characters: its runs as characters and pairs, the
    rest of it (a Latin word written against Chinese, "iPhone手机") through the base tokenizer."""
    text = raw.decode("utf-8", "replace")
    query = bool(flags & apsw.FTS5_TOKENIZE_QUERY)
    out: list[Token] = []
    at = 0
    for match in RUN.finditer(text):
        out.extend(_other(base, text[at : match.start()], offset, text, at, flags, locale))
        out.extend(_run(match.group(), offset + _bytes(text[: match.start()]), query))
        at = match.end()
    out.extend(_other(base, text[at:], offset, text, at, flags, locale))
    return out


def _run(run: str, offset: int, query: bool) -> list[Token]:
    ends = [offset]
    for char in run:
        ends.append(ends[-1] + _bytes(char))
    if len(run) == 1:
        return [(ends[0], ends[1], run)]
    if query:
        return [(ends[i], ends[i + 2], run[i : i + 2]) for i in range(len(run) - 1)]
    pairs = [(run[i : i + 2],) if i < len(run) - 1 else () for i in range(len(run))]
    return [(ends[i], ends[i + 1], char, *pairs[i]) for i, char in enumerate(run)]


def _other(
    base: Callable[..., Any],
    piece: str,
    offset: int,
    text: str,
    at: int,
    flags: int,
    locale: str | None,
) -> list[Token]:
    if not piece:
        return []
    shift = offset + _bytes(text[:at])
    return [
        (start + shift, end + shift, *tokens)
        for start, end, *tokens in base(piece.encode("utf-8"), flags, locale)
    ]


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))

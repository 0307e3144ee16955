"""What a reply could be hiding a word in, undone before the leak check reads it (SEC-6, issue 31).

A model told (or tricked) into repeating a secret past the leak check writes it so the word index no longer
sees it. ``unmasked(text)`` returns the text as the check should read it: the text itself, NFKC-folded
(fullwidth and mathematical letters become plain ones), with invisible characters taken out, followed by the
words it may be hiding, each undone once:

    "Wоmbatson" (Cyrillic о), "Ｗombatson"        -> wombatson      look-alike letters, compatibility forms
    "W-o-m-b-a-t-s-o-n", "W o m b a t s o n"      -> wombatson      letters spaced or hyphenated apart
    "Wom-bat-son", "X-4471-Q"                     -> wombatson, x4471q   a word cut by separators
    "W0mb@ts0n", "Z4nz1b4r1t3"                    -> wombatson, zanzibarite  leet (both readings of "1")
    "four four seven one", "forty-four seventy-one", "four thousand four hundred seventy-one" -> 4471
    "nostabmoW"                                   -> wombatson      a word written backwards

The added words only matter when a memory or message the place may not see holds them (the check weighs
every word as before), so a join that makes nonsense ("I a m" is never joined: runs of three or more)
costs a look-up, never a false alarm by itself. Pure string work, a fraction of a millisecond a reply.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Callable, Iterator

# Cyrillic and Greek letters drawn like Latin ones (Unicode's confusables, the ones a keyboard offers).
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁԛԝһӏвкмнтАВЕКМНОРСТХІЈЅУ"  # Cyrillic
    "αβεικνοροτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",  # Greek
    "aeopcyxijsdqwhlbkmhtABEKMHOPCTXIJSYabeikvopotuxABEZHIKMNOPTYX",
)
_LEET = {
    "0": "o",
    "3": "e",
    "4": "a",
    "5": "s",
    "6": "g",
    "7": "t",
    "8": "b",
    "9": "g",
    "@": "a",
    "$": "s",
    "|": "l",
}
# zero-width spaces and joiners, soft hyphens, combining marks left after NFKC
_INVISIBLE = {
    "Cf",
    "Mn",
}
# Every pattern here is one character class repeated, or an alternation that cannot overlap ("_" is a separator,
# never a letter, in _SPACED): linear on any text. A 20,000-character word took 23 s through a nested pattern.
_WORD = re.compile(r"[\w@$|]+", re.UNICODE)
# w o m b a t, W-o-m-b-a-t
_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_][\s\-_.·•*/\\]{1,3}){2,}[^\W_](?![^\W_])")
# a run that may be a word cut by separators: Wom-bat-son, X-4471-Q
_CUT = re.compile(r"[\w\-.·/\\]+")
_SEPARATORS = re.compile(r"[\-_.·/\\]+")
MAX_WORD = 64  # longer runs are no word anyone hides (and would cost a reading each)

_NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
# English number words, also what a reminder's "in fifteen minutes" is read with
# (``memory.reminder_time``)
ENGLISH_UNITS = {w: i for i, w in enumerate(f"{_NUMBERS} seventeen eighteen nineteen".split(" "))}
ENGLISH_TENS = {
    w: 10 * i
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2
    )
}
UNITS = ENGLISH_UNITS | {"oh": 0, "nought": 0}
TENS = dict(ENGLISH_TENS)
SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
# German number words (a DM fact's code spelled out in German: "vier vier sieben eins"), and its
# compound tens, unit first ("vierundvierzig": 44)
_DE_UNITS = [
    "null",
    "eins",
    "zwei",
    "drei",
    "vier",
    "fünf",
    "sechs",
    "sieben",
    "acht",
    "neun",
    "zehn",
    "elf",
    "zwölf",
]
UNITS |= {w: i for i, w in enumerate(_DE_UNITS)} | {"zwo": 2, "fuenf": 5, "zwoelf": 12}
_DE_TENS = ["zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"]
TENS |= {w: 10 * i for i, w in enumerate(_DE_TENS, start=2)} | {"dreissig": 30, "fuenfzig": 50}
_DE_COMPOUND = re.compile(
    r"(ein|zwei|drei|vier|fünf|fuenf|sechs|sieben|acht|neun)und(" + "|".join(TENS) + ")"
)
_TOKEN = re.compile(r"[^\W_]+")
# a letter and a leet character (one word)
_LEET_MARK = re.compile(r"[a-z][\w@$|!]*[0-9@$|]|[0-9@$|][\w@$|!]*[a-z]")
_LEET_ANY = re.compile(r"[0-9@$|]")
_NUMBER_MARK = re.compile(r"(?:" + "|".join([*UNITS, *TENS, *SCALES]) + r")\b")
# a run that may be base64 ("WmFuemliYXJpdGU=": "Zanzibarite"): 12 characters or more, padded right
_BASE64 = re.compile(r"(?<![\w+/])[A-Za-z0-9+/]{12,}={0,2}(?![\w+/=])")
MAX_DECODED = 4_000  # characters of base64 read in all: a reply is short, a blob is no sentence


def unmasked(
    text: str, known: Callable[[str], bool] = lambda word: False
) -> tuple[str, tuple[str, ...]]:
    """``text`` folded (NFKC, look-alikes, no invisible characters), and the words hidden in it (not in it as such).

    :param known: is this a word of the language? (Only unknown words are read backwards: "nostabmow" is, "stressed"
        is not; reading every word backwards would cost a look-up each.)
    """
    folded = fold(text)
    lowered = folded.lower()
    extra = dict.fromkeys(_hidden(lowered, known, folded))
    if (
        not text.isascii()
    ):  # an invisible character may have stood for a space ("Dr\u200bWombatson")
        extra.update(dict.fromkeys(_WORD.findall(fold(text, invisible=" ").lower())))
    plain = set(_WORD.findall(lowered))
    return folded, tuple(w for w in extra if w and w not in plain)


def fold(text: str, invisible: str = "") -> str:
    """NFKC (fullwidth, ligatures, mathematical letters), invisible characters removed (or made ``invisible``),
    look-alike letters made Latin. ASCII text is already all of that.

    Ordinary text in other scripts stays itself (LANG-4): a look-alike is made Latin only in a word
    that mixes it with Latin letters ("Wоmbatson"), or is made of look-alikes alone in text mostly
    Latin ("Ѕсоре is here"), never in "как дела" or "τι κάνεις"; a combining mark is taken out only
    after a Latin, Greek or Cyrillic letter (a strike-through over a word), never from Thai, Hindi
    or Hebrew, where it is part of the letter."""
    if text.isascii():
        return text
    nfkc = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for c in nfkc:
        kind = unicodedata.category(c)
        if kind == "Cf" or (kind in _INVISIBLE and out and _alphabetic(out[-1])):
            out.append(invisible)
        else:
            out.append(c)
    joined = "".join(out)
    latin = sum(c.isascii() and c.isalpha() for c in joined)
    other = sum(
        c.isalpha() and "\u0370" <= c < "\u0530" and c not in _LOOKALIKE_SET for c in joined
    )
    return _LETTERS.sub(lambda m: _latin_if_disguised(m.group(), latin > other), joined)


_LETTERS = re.compile(r"[^\W\d_]+")
_LOOKALIKE_SET = frozenset("аеорсухіјѕԁԛԝһӏвкмнтАВЕКМНОРСТХІЈЅУαβεικνοροτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")


def _alphabetic(c: str) -> bool:
    """A letter of the Latin, Greek or Cyrillic alphabets (where a combining mark over it is
    decoration)."""
    return c.isalpha() and c < "\u0530"


def _latin_if_disguised(word: str, in_latin_text: bool) -> str:
    """A word mixing look-alikes with Latin letters, or made of look-alikes alone in Latin text,
    made Latin."""
    if word.isascii() or not any(c in _LOOKALIKE_SET for c in word):
        return word
    if any(c.isascii() for c in word):
        return word.translate(_LOOKALIKES)
    disguised = in_latin_text and all(c in _LOOKALIKE_SET for c in word)
    return word.translate(_LOOKALIKES) if disguised else word


def _hidden(lowered: str, known: Callable[[str], bool], folded: str = "") -> Iterator[str]:
    yield from _joined(lowered)
    yield from _halves(folded or lowered, known)
    if folded and _BASE64.search(folded):
        yield from _decoded(folded)
    if _LEET_ANY.search(lowered):
        yield from _leet(lowered)
    yield from (word for word in _reversed(lowered) if not known(word[::-1]))
    if _NUMBER_MARK.search(lowered):
        yield from _spelled_numbers(lowered)


def _joined(text: str) -> Iterator[str]:
    """Letters spaced or hyphenated apart, and words cut by separators, put back together."""
    for found in _SPACED.finditer(text):
        yield re.sub(r"[\W_]+", "", found.group())
    for run in _CUT.findall(text):
        parts = [part for part in _SEPARATORS.split(run) if part]
        if len(parts) >= 2 and len(run) <= MAX_WORD:
            yield "".join(parts)


def _halves(text: str, known: Callable[[str], bool]) -> Iterator[str]:
    """Two neighbouring words written as one, when either is no word of the language or the first
    is capitalised (a name's half): "Zanzi + barite", "Dr Wombat son"; "the son" is never joined."""
    words = _TOKEN.findall(text)
    for first, second in zip(words, words[1:], strict=False):
        joined = (first + second).lower()
        if (
            2 <= len(first) <= MAX_WORD
            and 2 <= len(second) <= MAX_WORD
            and joined.isalpha()
            and (first[0].isupper() or not (known(first.lower()) and known(second.lower())))
        ):
            yield joined


def _decoded(text: str) -> Iterator[str]:
    """The words of base64 runs that decode to text."""
    budget = MAX_DECODED
    for found in _BASE64.finditer(text):
        run = found.group()
        if budget <= 0:
            return
        budget -= len(run)
        try:
            plain = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if plain.isprintable() and sum(c.isalpha() for c in plain) >= len(plain) / 2:
            yield from (w.lower() for w in _WORD.findall(plain))


def _leet(text: str) -> Iterator[str]:
    """Words mixing letters with digits or symbols, read as letters (a code like "x4471q" is kept as written too)."""
    for word in _WORD.findall(text):
        if len(word) <= MAX_WORD and _LEET_MARK.search(word):
            plain = "".join(_LEET.get(c, c) for c in word)
            yield plain.replace("1", "i").replace("!", "i")
            yield plain.replace("1", "l").replace("!", "i")


def _reversed(text: str) -> Iterator[str]:
    """Each word of four letters or more backwards (whole-text reversal reverses every word; order tells nothing)."""
    for word in _WORD.findall(text):
        if 4 <= len(word) <= MAX_WORD and word.isalpha():
            yield word[::-1]


def _spelled_numbers(text: str) -> Iterator[str]:
    """Runs of number words as the digits they spell: each group read as written ("four four" -> 44, "forty-four
    seventy-one" -> 4471), or as one number when it has a scale word ("four thousand ... seventy-one" -> 4471);
    with a lone letter either side, that too ("X four four seven one Q" -> x4471q)."""
    words = [*_TOKEN.findall(_DE_COMPOUND.sub(r"\2 \1", text)), ""]
    run: list[str] = []
    for i, word in enumerate(words):
        if word in UNITS or word in TENS or word in SCALES or (word == "and" and run):
            run.append(word)
            continue
        if len([w for w in run if w != "and"]) >= 2:
            digits = _digits(run)
            before = words[i - len(run) - 1] if i > len(run) else ""
            before, after = (w if len(w) == 1 and w.isalpha() else "" for w in (before, word))
            yield from dict.fromkeys(
                (digits, before + digits, digits + after, before + digits + after)
            )
        run = []


def _digits(words: list[str]) -> str:
    words = [w for w in words if w != "and"]
    if any(w in SCALES for w in words):
        total = current = 0
        for w in words:
            if w in SCALES:
                current = max(current, 1) * SCALES[w]
                if SCALES[w] > 100:
                    total, current = total + current, 0
            else:
                current += UNITS.get(w, TENS.get(w, 0))
        return str(total + current)
    groups: list[str] = []
    for before, w in zip(["", *words], words, strict=False):
        if before in TENS and 0 < UNITS.get(w, 10) < 10:
            groups[-1] = str(TENS[before] + UNITS[w])  # forty four -> 44
        else:
            groups.append(str(UNITS.get(w, TENS.get(w, 0))))
    return "".join(groups)

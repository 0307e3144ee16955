"""A person's own name written in another alphabet (SEC-5, LANG-4): "Алиса" and "Элис" are "Alice",
"Αλέξης" is "Alexis". Every fact about a person says their name, so it tells facts apart no better
in Cyrillic than in Latin letters (``memory.write.traces``: a person's own names weigh nothing).

Names are compared by a key of their consonants, as they sound: the word spelled in Latin letters,
"c" before "e", "i" or "y" read as "s", "k" for "c", "q" and "ck", "s" for "z", vowels and "h"
dropped, a doubled letter once: "Alice", "Alisa", "Элис" and "Алиса" are all "ls". A key that short
also fits "Лиза" (Lisa): a name of the person's alphabet is still told apart exactly, and another
alphabet's word is only ever taken for one of the person's names, never for another's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_LETTERS = {
    **dict(zip("абвгдезийклмнопрстуфыэіїєґ", "abvgdeziiklmnoprstufyeiieg", strict=True)),
    **{
        "ё": "e",
        "ж": "zh",
        "х": "kh",
        "ц": "ts",
        "ч": "ch",
        "ш": "sh",
        "щ": "shch",
        "ъ": "",
        "ь": "",
    },
    **{"ю": "yu", "я": "ya"},
    **dict(zip("αβγδεζηικλμνοπρσςτυφω", "avgdeziiklmnoprsstyfo", strict=True)),
    **{"θ": "th", "χ": "ch", "ψ": "ps", "ξ": "ks"},
}
_LATIN = str.maketrans(_LETTERS)
_SOUNDS = (("ck", "k"), ("ph", "f"), ("x", "ks"), ("q", "k"), ("c", "k"), ("z", "s"), ("w", "v"))


def sound_key(word: str) -> str:
    """The consonants of ``word`` as it sounds, in Latin letters ("Алиса" and "Alice": "ls")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    latin = "".join(c for c in decomposed if not unicodedata.combining(c)).translate(_LATIN)
    latin = re.sub(r"c(?=[eiy])", "s", latin)
    for written, sound in _SOUNDS:
        latin = latin.replace(written, sound)
    consonants = re.sub(r"[aeiouyh\W\d_]", "", latin)
    return re.sub(r"(.)\1+", r"\1", consonants)


def other_alphabet(word: str) -> bool:
    """Written in letters that are not Latin (Cyrillic, Greek)."""
    return any(
        c.isalpha() and not c.isascii() and c.translate(_LATIN) != c for c in word.casefold()
    )


def own_name_elsewhere(written: str, names: Iterable[str]) -> bool:
    """Whether a capitalised word of another alphabet is one of ``names`` (the person's own, in
    Latin letters or in that alphabet) as it sounds."""
    if not written[:1].isupper() or not other_alphabet(written):
        return False
    key = sound_key(written)
    return bool(key) and any(sound_key(name) == key for name in names)

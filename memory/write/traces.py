"""What a forgotten fact leaves behind so that it is known again however it is worded (SEC-5, issue 31).

A tombstone (``memory.write.tombstones``) keeps, besides the keyed hashes of the fact's exact wording, a
``Trace``: two things from which the words cannot be read back, only a candidate fact compared with.

    marks       for each word of the fact that carries meaning: a short keyed hash of its *form*
                (accents and case folded, the common endings off, one spelling where British and
                American differ, the first five letters kept, seven for a long word, so "tortoises",
                "Tortoise" and "tortoise's" are one form, and so are "knits" and "knitted", "labour"
                and "labor", "diabetes", "diabetic" and "Diabetes", "végétarienne" and
                "vegetarian"), with a weight: 8 for a name or a code (capitalised and not an English
                word: "Quintrell", "Reykjavik"; "4471"), 4 for a word rare in English (the leak
                check's ranking, ``memory.recall.leaks``: "tortoise"), 2 for a less common one
                ("marathon"), 1 for a common one ("sister"), 0 for a little word of English or five
                other languages or a hedge ("always"); a pair of Chinese, Japanese or Thai
                characters (``memory.unspaced``) 1 (``pair_weight``), its mark apart from
                words' (``PAIRS_APART``: a pair never meets an English word by chance). The
                person's own names weigh 0, in any alphabet (``memory.write.name_keys``: every
                fact about Alice says "Alice" or "Алиса"); a relative named by the relation
                ("grandmother", ``RELATIONS``) 1, as "brother" does; a capitalised word beside a
                name is part of it ("Welle Nord"). A tombstone's words also carry the
                marks of their closest synonyms (the thesaurus of ``memory.recall.thesaurus``,
                likeness >= ``SYNONYM``: "afraid" also as "scared", "frightened"), except a
                capitalised word inside the sentence ("Porto" is no other word for "Lisbon").
    signature   SIGNATURE_BITS sign bits of the fact's embedding, each the side of a keyed random hyperplane
                it falls on (random-projection LSH): two sentences agree on a bit with probability
                1 - angle / pi, so the share of agreeing bits estimates how close the meanings are.

Why neither gives the words back. Without the key (kept outside the store: ``bot.secret_key``) a
mark and the signature are random bits for any sentence: nothing can be tested, let alone read. With
the key a guess can be tested, as with any keyed hash, and the marks are kept short so that a test
says little: a word's mark is 12 bits (one of 4,096 values), so the ~13,500 word forms of an English
dictionary (the MiniLM vocabulary) give each mark about three words (measured: 292 of the 300 marks
of the suite's forgotten words share their value with at least one other dictionary form); a name's
is 16 bits, so a list of 100,000 made-up names meets each name mark about 1.5 times. The signature
is 32 bits (SIGNATURE_BITS since LANG-4) of a 384-dimension vector: "near or not", never the words
(the median forgotten fact of the suite has 5 of the suite's other 453 sentences within 4 bits of
its signature).

A candidate matches the trace when it shares a name or code with it and a telling word of it or a
meaning near it (a name alone never makes two facts one); or when the marks it shares
include a telling word (weight 2 or more) and weigh at least ``WORDS_ALONE`` of the trace's weight,
or at least ``WORDS_WITH_MEANING`` with a signature agreeing on at least ``MEANING_WITH_WORDS`` of
its bits; or, sharing only common words, when it has no other word ("Alice likes green tea" is not
"Alice likes tea"). Meaning alone never matches: the bundled English model puts "Alice is allergic
to cats" as near "... to peanuts" as a German wording of it, and 32 bits are a sample. A fact in
another language is read in English by the model before it is stored (``memory.write.glosses``), and
the reading is matched too. On the paraphrase suite (tests/memory/data/forget_rewordings.txt, 50
facts x 5 rewordings, 254 other facts of the person, 50 of them in other languages) the words alone
hold 225/250 (English 196/200, translations 29/50), with the real 1.5B's English readings 238/250
(translations 42/50), and block 0 either way; on a second suite written after the tuning
(forget_rewordings_holdout.txt, 20 x 5, 40 others) 84/100 and 90/100, blocking 0. The signature's
rule is what holds "Alice makes her own cider" for "Alice brews her own cider" there;
``MEANING_WITH_WORDS`` is set a step above where the first suite's unrelated facts start to be
blocked (0.75).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..recall.leaks import COMMON_RANK, RARE_RANK, _number_weight, _vocabulary
from ..recall.thesaurus import neighbours
from ..unspaced import is_pair, spaced
from .name_keys import other_alphabet, own_name_elsewhere
from .wording import STOPS

WORD_BITS, NAME_BITS = 12, 16  # a word's mark is one of 4,096 values, a name's one of 65,536
WORD, PAIR = 0, 2  # the kinds of mark besides a name's (1)
PAIRS_APART = 2  # the version of traces whose pairs' marks are apart from words'
SIGNATURE_BITS = (
    128  # LANG-4: 32 (the first tombstones') left a meaning check noisy: 0.85 was 4 bits of 32
)
# a longer word keeps 7: "sleepwalk" is not "sleep"
FORM_LETTERS, COMPOUND, LONG_FORM_LETTERS = (
    5,
    8,
    7,
)
SYNONYM = (
    0.65  # how alike (the thesaurus's likeness) a word must be to stand for a tombstone's word
)
NAME = 8  # the weight of a name or a code: one shared is enough
WORDS_ALONE = 0.6  # the shared marks weigh this share of the trace's: the same fact, however worded
WORDS_WITH_MEANING, MEANING_WITH_WORDS = 0.4, 0.85  # some of its words, and a close meaning
# Words of German, French, Spanish, Italian and Portuguese that carry no meaning of their own (a
# translated fact's "ist", "une", "della"), folded as ``fold`` makes them; not those that are also
# English words that do ("war", "sin")
_FOREIGN_STOP_WORDS = (
    "der die das den dem des ein eine einen einem einer eines ist hat haben habe sind waren "
    "wird werden wurde und oder im in ins auf bei beim mit von vom zu zum zur fur nach aus "
    "uber unter vor hinter neben zwischen durch gegen ohne ihr ihre ihren ihrem ihrer sein "
    "seine seinen seinem seiner mein meine dein nicht kein keine auch als wie noch schon "
    "sehr sich sie wir ich dass jede jeder jedes immer les une est et au aux en du de la le "
    "il elle elles ils son sa ses pour par dans sur sous avec sans chez vers entre qui que "
    "quoi dont ne pas sont etait ont nous vous leur leurs mon mes tres tous tout toute "
    "toutes chaque cette ces cet el los las es y del al una unos unas tiene tienen para por "
    "con se su sus lo un pero fue esta estan han desde hasta hacia sobre mis quien muy todos "
    "todas todo este estos estas ese esa cada gli uno sono hanno della dei delle degli dalla "
    "nel nella sul sulla per tra fra alla che chi non suo sua suoi sue mio mia molto ogni "
    "tutti questo questa uns umas sao foi estao tem nos nas dos das com sem pela seu seus "
    "suas meu minha quem nao muito esse essa"
)
FOREIGN_STOPS = frozenset(_FOREIGN_STOP_WORDS.split())
# how often or how much: "Alice was always afraid of spiders" says the forgotten fact ("never" and
# "not" do count)
_HEDGE_WORDS = (
    "always often usually sometimes still currently now again already ever even quite rather"
)
HEDGES = frozenset(_HEDGE_WORDS.split())
# a relative or someone close, named by the relation: says whose a fact is, as "brother" does, never
# what it is (these rank less common in English than "brother", so they would weigh as telling)
_RELATION_WORDS = (
    "grandmother grandfather grandma grandpa granny grandparent grandson granddaughter grandchild "
    "niece nephew stepmother stepfather stepson stepdaughter stepbrother stepsister fiance fiancee "
    "colleague coworker neighbour neighbor flatmate roommate housemate classmate godmother "
    "godfather "
    "mum mom dad sibling spouse"
)
RELATIONS = frozenset(_RELATION_WORDS.split())
_WORD = re.compile(r"\w+")
_FOLDS = str.maketrans(
    {"ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "ł": "l", "đ": "d", "ð": "d", "þ": "th"}
)


@dataclass(frozen=True, slots=True)
class Trace:
    """What a tombstone keeps of a fact's meaning: form marks with their weights (and, for a tombstone, the marks
    of each word's close synonyms, ``alike``), and a meaning signature."""

    marks: dict[int, int]
    signature: int | None  # None: no embedder, or it failed (the marks still hold)
    alike: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # a candidate's word's mark -> its mark in the older form (``form(older=True)``) where that
    # differs: a tombstone laid before knows the word by it
    older: dict[int, int] = field(default_factory=dict)
    bits: int = SIGNATURE_BITS  # the signature's length (a tombstone laid before LANG-4: 32)
    # PAIRS_APART: its pairs of characters are marked apart from words (``Tracer._mark``); a
    # tombstone laid before knows a candidate's pairs by their older, word-like marks
    version: int = PAIRS_APART

    @property
    def weight(self) -> int:
        return sum(self.marks.values())

    def encode(self) -> tuple[str, str]:
        """(marks, signature) as the tombstone's columns store them: "mark:weight[:synonym,synonym]" each."""
        items = [f"{mark:05x}:{w}" + self._synonyms(mark) for mark, w in sorted(self.marks.items())]
        marks = " ".join([f"v{self.version}"] * (self.version >= PAIRS_APART) + items)
        return marks, "" if self.signature is None else f"{self.signature:0{SIGNATURE_BITS // 4}x}"

    def _synonyms(self, mark: int) -> str:
        alike = self.alike.get(mark)
        return ":" + ",".join(f"{a:04x}" for a in alike) if alike else ""

    @classmethod
    def decode(cls, marks: str, signature: str) -> Trace:
        items = marks.split()
        version = int(items.pop(0)[1:]) if items and items[0].startswith("v") else 1
        parts = [item.split(":") for item in items]
        own = {int(p[0], 16): int(p[1]) for p in parts}
        alike = {
            int(p[0], 16): tuple(int(a, 16) for a in p[2].split(",")) for p in parts if len(p) > 2
        }
        return cls(
            own,
            int(signature, 16) if signature else None,
            alike,
            bits=4 * len(signature) or SIGNATURE_BITS,
            version=version,
        )

    def matches(self, candidate: Trace, *, names_alone: bool = False) -> bool:
        """Whether ``candidate`` says this trace's fact again (see the module docstring).
        ``names_alone``: names or codes with no telling word are enough when they weigh most of
        the fact (a person's own message said after the forget: "Ich habe Angst vor Spinnen"
        shares only German nouns, capitalised like names, with "Alice hat Angst vor Spinnen"), never
        one name of several ("Marta says hi" does not say "Tomasz, Marta's brother, lives in
        Gdansk")."""
        seen = candidate.marks.keys() | {
            before
            for mark, before in candidate.older.items()
            if self.version < PAIRS_APART or mark >> NAME_BITS != PAIR
        }
        # a synonym that is another word of this fact counts once, as that word: "landlord" is near
        # "rent", but "Alice's landlord is friendly" does not say "... raising the rent"
        found = {
            mark
            for mark in self.marks
            if mark in seen or (set(self.alike.get(mark, ())) - self.marks.keys()) & seen
        }
        agree = self.agreement(candidate)
        names = [mark for mark in found if self.marks[mark] == NAME]
        if names:
            # its name or code, in any language and word order, with a telling word of it or its
            # meaning: a name alone never makes two facts one ("Grzegorz has a cat" is not
            # "Grzegorz's bib number is 4417", nor "Marta's brother Tomasz is a pilot" "... lives in
            # Gdansk", nor "Алиса" every fact about her)
            telling = any(2 <= self.marks[mark] < NAME for mark in found)
            # (a meaning as near as words need: at 0.75 the suite held 15 more, but the languages
            # suite blocked 19 other facts instead of 10, such as "Alice's brother Teodor is
            # learning to sail")
            if telling or (agree is not None and agree >= MEANING_WITH_WORDS):
                return True
            named = sum(self.marks[mark] for mark in found)
            if names_alone and named >= WORDS_ALONE * self.weight:
                return True
            found = {mark for mark in found if mark not in names}
        common = [self.marks[mark] for mark in found]
        shared = sum(common) / (self.weight or 1)
        if max(common, default=0) <= 1:
            # common words only: the same words and no other ("Alice likes green tea" is not "Alice likes tea")
            mine = self.marks.keys() | {a for alike in self.alike.values() for a in alike}
            # its words' marks (not as names)
            words = [mark for mark in candidate.marks if mark >> NAME_BITS != 1]
            inside = all(m in mine or candidate.older.get(m) in mine for m in words)
            return shared >= WORDS_ALONE and inside
        if shared >= WORDS_ALONE:
            return True  # most of its words, one of them telling
        return agree is not None and shared >= WORDS_WITH_MEANING and agree >= MEANING_WITH_WORDS

    def agreement(self, other: Trace) -> float | None:
        """The share of signature bits two traces agree on (None when either has none)."""
        if self.signature is None or other.signature is None:
            return None
        # the same keyed planes in the same order: a shorter signature is the first bits of a longer
        # one
        bits = min(self.bits, other.bits)
        differ = (self.signature ^ other.signature) & ((1 << bits) - 1)
        return 1.0 - bin(differ).count("1") / bits


class Tracer:
    """Makes traces with one key (the tombstones' key: ``bot.secret_key``) for one owner at a time."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._planes: np.ndarray | None = None

    def trace(
        self,
        owner: str,
        text: str,
        vector: np.ndarray | None,
        names: Iterable[str] = (),
        *,
        synonyms: bool = False,
    ) -> Trace:
        """The trace of ``text`` about ``owner`` ("scope|scope_id"); ``names``: the owner's own names (weigh 0);
        ``synonyms``: each word's close synonyms marked too (a tombstone's trace: "afraid" also as "scared")."""
        marks: dict[int, int] = {}
        older: dict[int, int] = {}
        alike: dict[int, tuple[int, ...]] = {}
        for i, written, word, weight in weighed(text, list(names)):
            shape = form(word)
            # a candidate's capitalised word or code may be a tombstone's name: both kinds
            kinds = (weight == NAME,) if synonyms else _kinds(written)
            pair = is_pair(written)
            before = None if synonyms else form(word, older=True)
            for n in kinds:
                mark = self._mark(owner, shape, PAIR if pair else n)
                marks[mark] = max(marks.get(mark, 0), weight)
                if pair and not synonyms:  # a tombstone laid before pairs had marks of their own
                    older[mark] = self._mark(owner, shape)
                elif before is not None and before != shape:
                    older[mark] = self._mark(owner, before, n)
            if synonyms and weight != NAME and (i == 0 or not written[:1].isupper()):
                # not a place's, a month's or a party's: "Porto" is no other word for "Lisbon"
                alike[mark] = tuple(self._mark(owner, form(w)) for w in synonyms_of(word))
        return Trace(
            marks,
            None if vector is None else self.signature(vector),
            {m: a for m, a in alike.items() if a},
            older,
        )

    def signature(self, vector: np.ndarray) -> int:
        planes = self._hyperplanes(len(vector))
        bits = (planes @ np.asarray(vector, dtype=np.float64)) >= 0
        return sum(1 << i for i, bit in enumerate(bits) if bit)

    def _mark(self, owner: str, shape: str, kind: int = WORD) -> int:
        """A word's mark: WORD_BITS of its keyed hash, NAME_BITS for a name (told apart by the bit
        above); a pair of characters' is WORD_BITS told apart by the next bit (LANG-4: eight pairs
        of a Japanese sentence met a tombstone's English word by chance one time in a few dozen)."""
        digest = int.from_bytes(
            hmac.new(self.key, f"mark\x00{owner}\x00{shape}".encode(), hashlib.sha256).digest()[:4],
            "big",
        )
        if kind == PAIR:
            return (1 << (NAME_BITS + 1)) | digest % (1 << WORD_BITS)
        return (1 << NAME_BITS) | digest % (1 << NAME_BITS) if kind else digest % (1 << WORD_BITS)

    def _hyperplanes(self, dim: int) -> np.ndarray:
        """SIGNATURE_BITS random directions drawn from the key (so only the key's holder can compute a signature)."""
        if self._planes is None or self._planes.shape[1] != dim:
            seed = int.from_bytes(
                hmac.new(self.key, b"signature planes", hashlib.sha256).digest(), "big"
            )
            self._planes = np.random.default_rng(seed).standard_normal((SIGNATURE_BITS, dim))
        return self._planes


def weighed(text: str, names: list[str]) -> list[tuple[int, str, str, int]]:
    """(position, as written, folded, weight) of each word of ``text`` that weighs something: not a
    little word, nor one of the person's own ``names`` in any alphabet ("Alice", "Алиса"). A
    capitalised word beside a name is that name's ("Welle Nord", "Monte Baldo"), so that a name of
    two words is not a name and a telling word."""
    own = {form(w) for name in names for w in _WORD.findall(fold_case(name))}
    found = []
    for i, written in enumerate(_WORD.findall(spaced(text or "", little=False))):
        word = fold_case(written)
        weight = pair_weight(written) if is_pair(written) else word_weight(word)
        if is_name(written, word):
            # Cyrillic and Greek capitalise a sentence's first word as English does, and no word
            # list of theirs tells it from a name: there it weighs as a rare word
            weight = 4 if i == 0 and other_alphabet(written) else NAME
        if weight and form(word) not in own and not own_name_elsewhere(written, names):
            found.append([i, written, word, weight])
    for before, after in zip(found, found[1:], strict=False):
        if after[0] == before[0] + 1 and NAME in (before[3], after[3]):
            for part in (before, after):
                if part[0] and part[1][:1].isupper() and part[3] >= 2:
                    part[3] = NAME
    return [(i, written, word, weight) for i, written, word, weight in found]


def synonyms_of(word: str) -> list[str]:
    """The words closest in meaning to ``word`` (the thesaurus of ``memory.recall.thesaurus``, likeness >= SYNONYM)."""
    return [w for w, likeness in neighbours(word, _stem(word)) if likeness >= SYNONYM]


def fold_case(text: str) -> str:
    """Case and accents folded: "Tromsø", "TROMSO" and "tromso" are one word, "végétarienne" "vegetarienne"."""
    decomposed = unicodedata.normalize("NFKD", (text or "").casefold().translate(_FOLDS))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).replace("\u2019", "'")


def form(word: str, *, older: bool = False) -> str:
    """A word's form: its root's first FORM_LETTERS letters, LONG_FORM_LETTERS for a long word
    ("sleepwalk" is not "sleep"); a code or number whole. "breeds", "breed", "breeding" and "Breed"
    are one form, so are "knits" and "knitted", "scarf" and "scarves", "morning" and "mornings".
    ``older``: the form of the first tombstones with traces (one ending off, ``_stem``)."""
    if any(c.isdigit() for c in word):
        return word
    stemmed = _stem(word) if older else _root(word)
    return stemmed[: FORM_LETTERS if len(stemmed) <= COMPOUND else LONG_FORM_LETTERS]


def _root(word: str) -> str:
    """Two endings off ("mornings"), "v" back to "f" ("scarv", "wolv"), a doubled last letter single
    ("knitt"), and one spelling where British and American differ ("labour" and "labor", "travell"
    and "travel", "chilly" and "chili": a model's English reading is often American)."""
    w = _stem(_stem(word))
    w = w[:-1] + "f" if w.endswith("v") and len(w) >= 4 else w
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) > 4:  # British and American spellings alike: "labour" "labor", "travell" "travel"
        w = re.sub(r"(?<=[^aeiou])our", "or", w.replace("ll", "l"))
    return w[:-1] + "i" if w.endswith("ly") and len(w) >= 5 else w


def _stem(word: str) -> str:
    """The common English endings off, keeping at least four letters (``memory.write.wording.stem`` makes "bre"
    of "breed" but "breed" of "breeds", which is fine for whole sentences but not for one word)."""
    w = word.removesuffix("'s")
    for suffix, instead in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4 and not w.endswith(("ss", "us", "is")):
            return w[: -len(suffix)] + instead
    return w.removesuffix("s") if len(w) == 5 and w.endswith("es") else w


def _kinds(written: str) -> tuple[bool, ...]:
    """The kinds of mark a candidate's word gets: a word's, and a name's too when it may stand for a
    tombstone's name (capitalised, or a code). A lowercase word is not marked as a name: its 16-bit
    name mark would meet some tombstone's name by chance ("bicicletta" met "Tromsø")."""
    return (False, True) if written[:1].isupper() or any(c.isdigit() for c in written) else (False,)


def is_name(written: str, word: str) -> bool:
    """A name (capitalised, and not a word of English: "Quintrell", "Reykjavik") or a code ("4471", "x4471q")."""
    if any(c.isdigit() for c in word):
        return word_weight(word) >= 4
    return (
        written[:1].isupper() and len(word) >= 3 and _vocabulary().get(word, RARE_RANK) >= RARE_RANK
    )


def pair_weight(pair: str) -> int:
    """A pair of Chinese, Japanese or Thai characters (``memory.unspaced``): 1, as a common word; a
    lone character 0. Telling pairs (2) held 31 of the languages suite's 150 rewordings instead of
    25, but blocked 9 other facts instead of 6: a transliterated name ("爱丽丝") is two telling pairs
    in every fact about her, and "爱丽丝对海鲜过敏" then says "爱丽丝对芒果过敏". The meaning
    signature carries what pairs cannot."""
    return 0 if len(pair) < 2 else 1


def word_weight(word: str) -> int:
    """4 for a name, a code or a word rare in English; 2 for a less common word; 1 for a common one; 0 for a
    word that says nothing (a little word of English or of five other languages, a hedge, a short
    number)."""
    if word in STOPS or word in FOREIGN_STOPS or word in HEDGES or len(word) < 3:
        return 0
    if word in RELATIONS or _stem(word) in RELATIONS:
        # whose, not what: "Ernestina, Alice's grandmother, cooks" is not "... lives in Trieste"
        return 1
    digits = sum(c.isdigit() for c in word)
    if digits:
        return 2 * _number_weight(word, digits)
    vocabulary, stemmed = _vocabulary(), _stem(word)  # "likes" is as common as "like"
    rank = min(vocabulary.get(w, RARE_RANK) for w in (word, stemmed, stemmed + "e"))
    return 1 if rank < COMMON_RANK else 2 if rank < RARE_RANK else 4

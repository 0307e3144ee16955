"""Nothing the conversation did not say (issue 45): a fact the model wrote is filed only when its
distinctive words were said, in the lines it came from.

A real 1.5B filed "I've adopted a beagle called Rex." (the extraction prompt's example line) about a
person, citing "What's my cat called?"; the older check (``Ownership.invented``: no word of the fact
in any line) let it through, as "called" is in the cited line. Three rules now hold a candidate
back:

    unsaid      fewer than half of its distinctive words (``ownership.distinctive``: a name, a word
                outside the commonest English ones in all its forms, "talks" no rarer than "talk",
                a pair of Chinese characters) are in the lines it
                came from: the lines it cites, the lines filed as its sources, its owner's other
                lines (weak models cite the line beside the right one) and the line before each (the
                question it answers: "Is Rex a beagle?" "Yes!"). The speakers' names, words like
                "user" and numbers (a date the model resolved) are not asked for.
    told        a distinctive word of a person's fact is in what the bot stated and in no line
                of anyone else nor in a question the bot asked: the bot's words are no ground for a
                person's fact (the real 1.5B answered "In welcher Stadt wohne ich?" with "Ich
                wohne in der Stadt Berlin." and "Wie heißt mein Kater?" with a name it made up,
                and both were filed as the person's).
    copied      a distinctive word of the prompts' own examples (the words they show only inside
                quotes) is in the fact and nowhere in the conversation.

A reflection may infer (``Source.REFLECTION``), so it is held to ``copied`` only."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache

import prompts

from ..models import FactKind, MemoryType
from ..unspaced import spaced
from .ownership import GENERIC, distinctive, stated_and_asked
from .wording import STOPS, content_words, stem

_WORD = re.compile(r"\w+(?:'\w+)*")
_NAME_PART = re.compile(r"[^\W\d_]+")
_QUOTED = re.compile(r'"([^"\n$]*)"')
EXAMPLE_PROMPTS = ("extraction", "micro_reflection", "daily_reflection")


class Grounding:
    """The rules over one transcript: ``texts`` its lines' words, ``names`` its speakers' names,
    ``by_bot`` which of its lines (indexes from 0) the bot said."""

    def __init__(
        self, texts: Sequence[str], names: Iterable[str], by_bot: Iterable[int] = ()
    ) -> None:
        self.said = [content_words(_plain(text)) for text in texts]
        self.all_said = frozenset().union(*self.said)
        bot = set(by_bot)
        # the bot's sentences that state ("Du hast geendet zu lernen.") and those that ask ("Is it
        # a beagle?": the answer to it is the person's)
        told: set[str] = set()
        elsewhere = set().union(*(w for i, w in enumerate(self.said) if i not in bot))
        for i in bot:
            stated, asked = stated_and_asked(texts[i])
            told.update(*(content_words(_plain(s)) for s in stated))
            elsewhere.update(*(content_words(_plain(s)) for s in asked))
        self.bot_told = frozenset(told - elsewhere)
        self.names = frozenset(
            stem(part) for name in names for part in _NAME_PART.findall(name.casefold())
        )

    def unsaid(self, fact: str, lines: Iterable[int]) -> bool:
        """Fewer than half of the fact's distinctive words are in ``lines`` (indexes from 0) or
        the line before each."""
        wanted = self.distinctive(fact)
        if not wanted:
            return False
        near = {j for i in lines for j in (i - 1, i) if 0 <= j < len(self.said)}
        held = frozenset().union(*(self.said[j] for j in near))
        return 2 * len(wanted & held) < len(wanted)

    def told(self, fact: str) -> bool:
        """A distinctive or capitalised word of the fact ("Berlin", a German noun) only the bot's
        statements hold."""
        return bool((self.distinctive(fact) | self.capitalised(fact)) & self.bot_told)

    def capitalised(self, fact: str) -> frozenset[str]:
        """The stems of the fact's words written with a capital after its first, names aside."""
        words = _WORD.findall(_plain(fact))[1:]
        folded = (w.casefold().replace("\u2019", "'") for w in words if w[:1].isupper())
        return frozenset(
            s
            for w in folded
            if w not in STOPS and w not in GENERIC and (s := stem(w)) not in self.names
        )

    def copied(self, fact: str) -> bool:
        """A distinctive word of a prompt's example is in the fact and in no line said here."""
        return bool((self.distinctive(fact) & example_words()) - self.all_said)

    def distinctive(self, fact: str) -> frozenset[str]:
        """The stems of the fact's distinctive words, names, numbers and words like "user" aside."""
        return frozenset(
            s
            for w in _words(fact)
            if not any(c.isdigit() for c in w)
            and w not in GENERIC
            and (s := stem(w)) not in self.names
            and rare(w)
        )


def rare(word: str) -> bool:
    """A distinctive word in every form the stemmer folds: "talks" is no rarer than "talk"."""
    base = stem(word)
    return all(distinctive(form) for form in (word, base, base + "e"))


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", _plain(text)).casefold().replace("\u2019", "'")
    return [w for w in _WORD.findall(spaced(folded, little=False)) if w not in STOPS]


def _plain(text: str) -> str:
    """Accents off, so "Gdansk" is the "Gdańsk" that was said."""
    split = unicodedata.normalize("NFKD", text or "")
    return unicodedata.normalize("NFC", "".join(c for c in split if not unicodedata.combining(c)))


@cache
def example_words() -> frozenset[str]:
    """The stems of the distinctive words the prompts show only inside quotes: their examples (a
    word of the instructions, "fact" or "tags", is quoted in the item format too), labels aside."""
    labels = {v.value for v in (*FactKind, *MemoryType)}
    quoted: set[str] = set()
    told: set[str] = set()
    for name in EXAMPLE_PROMPTS:
        template = prompts.load(name).template
        quoted |= {
            w for text in _QUOTED.findall(template) if text not in labels for w in _words(text)
        }
        told |= {stem(w) for w in _words(_QUOTED.sub(" ", template))}
    return frozenset(
        s for w in quoted if rare(w) and w not in GENERIC and (s := stem(w)) not in told
    )

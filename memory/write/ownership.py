"""Who owns a fact the model read in a transcript (ORCH-7, ORCH-9, SEC-1): decided by the lines it cites and
by whose lines say it, never by the tag alone (``memory.write.extraction`` files what this decides).

A fact is the author's of the lines it cites. For a fact the model tags with a person:

    a cited line says it                its authors decide: a fact tagged with another person is dropped,
                                        "citation and tag disagree" (Mallory's "I steal from the collection
                                        box" tagged Bob is never Bob's); with no tag, the one author's (several
                                        authors and no tag: dropped); sources: the owner's cited lines
    cites only others' lines            dropped: "citation and tag disagree" (the bot's lines never make a
                                        person's fact, nor unmake one)
    cites line numbers, none exists     dropped: an invented citation
    else (nothing cited, or no cited    the tagged person's (with no tag, the one person cited); dropped when
    line says it)                       another person's line says it and none of theirs does, or only the
                                        bot's line says it (its words are not theirs), or a line
                                        of theirs denies it and none says it; sources: their
                                        lines closest in words, or their cited lines when none says it (weak
                                        models leave ``lines`` out, or cite the line beside the right one)

A fact the model tags as the bot's own ("speaker": "bot") is the bot's only when a line of the bot that it
cites says it AND no person's line in the transcript says it: a bot that echoes "Biscuit sounds lovely! A
grey cat..." does not make the person's cat its own. When a person's line says it, it is that person's
(everything about "I" in a person's line is theirs): filed under them when one person's line plainly states
it (when several people's do, the one whose line the model cited), else dropped.

"Says it" is read from words (``memory.write.wording`` stems, without the speakers' names and words
like "user"): a line says a fact when it holds more than half of the fact's distinctive words (a
code, a number, a word outside the ~5,000 commonest in English, ranked as the leak check ranks
them), or, for a fact of common words only, more than half of its words, the same way round: a line
holding them in a negated clause ("I would never steal from the collection box") denies "Bob steals
from the collection box" and says "Bob would never steal..." (``memory.write.wording.denies``). A
fact tagged with a person whose own line denies it, and none of whose lines says it, is dropped:
"their own words deny it". A line "plainly states" it (enough to move a fact to a person) when,
leaving out its questions, it holds all the distinctive words and three quarters of the rest, not
denied.

A fact none of whose words any line holds was read from nothing said here, and is not filed (extraction; a
reflection may infer); ``memory.write.grounding`` asks more of a fact's distinctive words.
A forget asked in the same transcript is applied before filing (``memory.write.forget_asked``): a fact of the
person who asked, from lines said before the ask (or in it), that matches what they asked to forget is not
filed (and counted as dropped).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..recall.leaks import COMMON_RANK, _vocabulary
from ..scopes import RecallContext
from ..unspaced import spaced
from .forget_asked import POINTING, Asked, forgets_in
from .wording import STOPS, content_words, denies, stem

_WORD = re.compile(r"\w+(?:'\w+)*")
_HAN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
_SENTENCE = re.compile(r"[^.!?。！？؟\n]+[.!?。！？؟]*")
QUESTION_ENDS = ("?", "？", "؟")  # Latin, full width (Chinese, Japanese), Arabic
GENERIC = frozenset({"user", "bot", "assistant", "person", "speaker", "human", "they", "someone"})
BOT_TAGS = frozenset({"BOT", "ASSISTANT"})  # tags (upper-cased) that mean the bot itself
STRONG_SHARE = 0.75  # of a fact's common words a line must hold, with all its distinctive ones, to plainly state it


class LineLike(Protocol):
    """A transcript line (``memory.write.extraction.Line``): who said it (None: the bot), what, its stored id."""

    @property
    def ctx(self) -> RecallContext | None: ...
    @property
    def name(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def message_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Filed:
    """Where a fact goes: ``speaker`` None is the bot itself; ``lines`` index the transcript (its sources)."""

    speaker: str | None
    lines: tuple[int, ...]
    moved: bool = False  # tagged as the bot's, filed under the person whose line says it


@dataclass(frozen=True, slots=True)
class Dropped:
    reason: str


@dataclass(frozen=True, slots=True)
class Words:
    """A fact's words as ownership weighs them: all of them, and the distinctive ones among them."""

    all: frozenset[str]
    rare: frozenset[str]
    text: str = ""  # the fact as written (which way round it says its words)


@dataclass(slots=True)
class Tally:
    """What one pass filed and dropped, by reason: one log line per extraction or reflection."""

    filed: int = 0
    moved: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def drop(self, reason: str, n: int = 1) -> None:
        if n > 0:
            self.dropped[reason] += n

    def line(self, what: str) -> str:
        reasons = "; ".join(f"{reason}: {n}" for reason, n in sorted(self.dropped.items()))
        moved = (
            f" ({self.moved} the model gave the bot, filed under the person who said it)"
            if self.moved
            else ""
        )
        dropped = sum(self.dropped.values())
        return f"{what}: {self.filed} fact(s) filed{moved}, {dropped} dropped" + (
            f" ({reasons})" if reasons else ""
        )


class Ownership:
    """The ownership rules over one transcript's lines (``Line``: ``ctx`` None for the bot's)."""

    def __init__(self, lines: Sequence[LineLike]) -> None:
        self.lines = lines
        self.speaker = [line.ctx.speaker_id if line.ctx is not None else None for line in lines]
        self.said = [content_words(line.text) for line in lines]
        self._stated: dict[
            int, frozenset[str]
        ] = {}  # read only for a "bot" fact a person's line says
        self.names = frozenset(w for line in lines for w in content_words(line.name))
        self.asked = forgets_in(self.speaker, [line.text for line in lines])
        self.bot_tags = BOT_TAGS | {
            line.name.strip().upper() for line in lines if line.ctx is None and line.name.strip()
        }

    def is_bot(self, tag: str) -> bool:
        """A tag that names the bot: "bot" as the prompt asks, or "assistant", or the name its lines show."""
        return tag in self.bot_tags

    def words(self, fact: str) -> Words:
        """The fact's stems less names and words like "user", and which of them are distinctive."""
        folded = unicodedata.normalize("NFKC", fact or "").casefold().replace("\u2019", "'")
        # Chinese, Japanese or Thai as character pairs, as the lines are read (``content_words``)
        folded = spaced(folded, little=False)
        pairs = {(stem(w), w) for w in _WORD.findall(folded) if w not in STOPS}
        pairs = {(s, w) for s, w in pairs if s not in self.names and w not in GENERIC}
        return Words(
            frozenset(s for s, _ in pairs),
            frozenset(s for s, w in pairs if distinctive(w)),
            fact or "",
        )

    # -- a fact tagged with a person (or with no one) --------------------------------------------------------
    def person(self, tagged: str | None, cited: list[int] | None, fact: str) -> Filed | Dropped:
        """``tagged``: the person the model named (None: nobody it could name); ``cited``: line numbers from 1
        (None: the fact cites nothing readable)."""
        words, valid = self.words(fact), self._valid(cited or [])
        if cited is not None and not valid:
            return Dropped("cites no line of this transcript")
        people = list(dict.fromkeys(s for i in valid if (s := self.speaker[i]) is not None))
        authors = [
            p for p in people if any(self.speaker[i] == p and self.says(i, words) for i in valid)
        ]
        if authors:  # the cited lines that say it decide
            if tagged is None and len(authors) > 1:
                return Dropped("cites several people and names none")
            if tagged is not None and tagged not in authors:
                return Dropped("citation and tag disagree")
            owner = tagged or authors[0]
            return Filed(owner, tuple(i for i in valid if self.speaker[i] == owner))
        return self._unsaid(tagged, valid, people, words)

    def _unsaid(
        self, tagged: str | None, valid: list[int], people: list[str], words: Words
    ) -> Filed | Dropped:
        """No cited line says it (nothing cited, or a model citing a line beside the right one): the tag decides,
        unless the citation names only others' lines, or another person's line says it and none of theirs."""
        if tagged is None:
            if len(people) != 1:
                return Dropped("names no speaker of this conversation")
            tagged = people[0]
        elif people and tagged not in people:
            return Dropped("citation and tag disagree")
        sayers = self.sayers(words)
        if sayers and tagged not in sayers:
            return Dropped("another person's line says it, not the tagged one's")
        if tagged not in sayers and any(
            s == tagged and self.gainsays(i, words) for i, s in enumerate(self.speaker)
        ):
            return Dropped("their own words deny it")
        if not sayers and any(
            s is None and self.says(i, words) for i, s in enumerate(self.speaker)
        ):
            # what the bot said is not what the person said
            return Dropped("only the bot's words say it")
        cited = tuple(i for i in valid if self.speaker[i] == tagged)
        # where their own lines say it, those words beat a citation beside them; else the citation stands
        return Filed(
            tagged, self.closest(tagged, words) if tagged in sayers or not cited else cited
        )

    # -- a fact tagged as the bot's own -----------------------------------------------------------------------
    def self_fact(self, cited: list[int] | None, fact: str) -> Filed | Dropped:
        words = self.words(fact)
        valid = self._valid(cited or [])
        if self.sayers(words):
            return self._moved(words, valid)
        own = tuple(i for i in valid if self.speaker[i] is None and self.says(i, words))
        if not own:
            return Dropped("self fact: no line of the bot that it cites says it")
        return Filed(None, own)

    def _moved(self, words: Words, valid: list[int]) -> Filed | Dropped:
        """A "bot" fact a person's line says: that person's, when one person plainly states it (the one whose
        cited line does, when several do); else nobody's."""
        cited_people = {s for i in valid if (s := self.speaker[i]) is not None}
        plain = {s for i, s in enumerate(self.speaker) if s is not None and self.states(i, words)}
        owners = (cited_people & plain) or plain
        if len(owners) != 1:
            return Dropped("self fact: a person's words, not the bot's")
        (owner,) = owners
        stating = tuple(
            i for i, s in enumerate(self.speaker) if s == owner and self.states(i, words)
        )
        return Filed(owner, tuple(i for i in valid if i in stating) or stating, moved=True)

    def invented(self, fact: str) -> bool:
        """No line of the transcript holds any of the fact's words (names and words like "user" aside): read
        from nothing said here. Lenient: one shared word is enough, as a date the model resolved ("2026-12-03")
        is not "3 December". A real 1.5B answered a 20-line conversation with the one example of the extraction
        prompt ("My favourite season is autumn"), tagged as the person's. Reflection may infer: not held to it."""
        words = self.words(fact).all
        return bool(words) and not any(words & said for said in self.said)

    # -- reading lines ----------------------------------------------------------------------------------------
    def says(self, i: int, words: Words) -> bool:
        """Line ``i`` holds more than half of the fact's distinctive words (or of all, when none
        is), the same way round as the fact."""
        return self._holds(i, words) and not self._denies(i, words)

    def gainsays(self, i: int, words: Words) -> bool:
        """Line ``i`` holds the fact's words as ``says`` asks, the other way round ("I would never
        ...")."""
        return self._holds(i, words) and self._denies(i, words)

    def _holds(self, i: int, words: Words) -> bool:
        wanted = words.rare or words.all
        return bool(wanted) and 2 * len(wanted & self.said[i]) > len(wanted)

    def _denies(self, i: int, words: Words) -> bool:
        return bool(words.text) and denies(self.lines[i].text, words.text, words.all)

    def states(self, i: int, words: Words) -> bool:
        """Line ``i``, its questions left out, holds every distinctive word and most of the others."""
        have = self._stated.get(i)
        if have is None:
            have = self._stated[i] = content_words(" ".join(_statements(self.lines[i].text)))
        return (
            bool(words.all)
            and words.rare <= have
            and len(words.all & have) >= math.ceil(STRONG_SHARE * len(words.all))
            and not self._denies(i, words)
        )

    def sayers(self, words: Words) -> set[str]:
        """The people one of whose lines says the fact."""
        return {s for i, s in enumerate(self.speaker) if s is not None and self.says(i, words)}

    def closest(self, speaker: str, words: Words) -> tuple[int, ...]:
        """The speaker's lines sharing the most of the fact's words (ties all kept); their only line when they
        said one thing; none when nothing is shared (never all of them)."""
        own = [i for i, s in enumerate(self.speaker) if s == speaker and self.lines[i].message_id]
        if len(own) == 1:
            return tuple(own)
        scored = [(len(words.all & self.said[i]), i) for i in own]
        best = max((score for score, _ in scored), default=0)
        return tuple(i for score, i in scored if best and score == best)

    def _valid(self, cited: Iterable[int]) -> list[int]:
        return list(dict.fromkeys(n - 1 for n in cited if 1 <= n <= len(self.lines)))

    # -- a forget asked in the same transcript ----------------------------------------------------------------
    def forgotten(self, filed: Filed, fact: str) -> Asked | None:
        """The ask to forget, in this transcript, that holds back this fact of the asker's from lines before it
        (None: nothing does)."""
        if filed.speaker is None:
            return None
        words = content_words(fact)
        for ask in self.asked:
            if (
                ask.speaker == filed.speaker
                and all(i <= ask.line for i in filed.lines)
                and self._covers(ask, filed, words)
            ):
                return ask
        return None

    def _covers(self, ask: Asked, filed: Filed, fact: frozenset[str]) -> bool:
        """ "Forget everything": all; "forget that": a fact from the line before; "forget the half marathon": a
        fact holding the ask's distinctive words and at least half of its words (all, if none is distinctive)."""
        if ask.everything:
            return True
        if not ask.what:
            return ask.before is not None and ask.before in filed.lines
        named = self.words(ask.what)
        named = Words(named.all - POINTING, named.rare - POINTING)
        if not named.all:
            return False
        if named.rare:
            return named.rare <= fact and 2 * len(named.all & fact) >= len(named.all)
        return named.all <= fact


def distinctive(word: str) -> bool:
    """A code or number, or a word outside the commonest ~5,000 in English (the leak check's ranking)."""
    if any(c.isdigit() for c in word):
        return True
    if word.endswith("n't"):
        return (
            False  # "don't", "isn't": kept as content words (they change a meaning), never telling
        )
    vocabulary = _vocabulary()
    return vocabulary.get(word, vocabulary.get(word.removesuffix("'s"), COMMON_RANK)) >= COMMON_RANK


def asks_only(text: str) -> bool:
    """Whether a fact is a question with at most a fragment beside it: "What should I cook tonight?"
    and "What should I cook tonight? Something quick." (a real 1.5B filed both) state nothing, "Is it
    raining? I love rain." states something; so in Chinese or Japanese ("你知道林晓是做什么工作的吗？",
    filed by the real 1.5B)."""
    said = " ".join(_statements(text))
    # a Chinese or Japanese clause is one \w run: two of its characters count as a word
    han = len(_HAN.findall(said))
    words = len(re.findall(r"\w+", _HAN.sub(" ", said))) + han // 2
    return bool(re.search(r"[?？]", text or "")) and words < 3


def _statements(text: str) -> list[str]:
    """The sentences of a line that are not questions ("Are you a night owl?" states nothing)."""
    return stated_and_asked(text)[0]


def stated_and_asked(text: str) -> tuple[list[str], list[str]]:
    """A line's sentences: those that state, and those that ask."""
    stated: list[str] = []
    asked: list[str] = []
    for sentence in _SENTENCE.findall(text or ""):
        (asked if sentence.rstrip().endswith(QUESTION_ENDS) else stated).append(sentence)
    return stated, asked

"""A reply that answers the person's question about themself as if it were the bot's own life, in
any language (issue 45): the real 1.5B answered "Weißt du, was ich beruflich mache?" with "Ja, ich
bin als Krankenpfleger im Kinderkrankenhaus tätig." and "In welcher Stadt wohne ich?" with "Ich
wohne in der Stadt Berlin.". English replies are turned to the second person
(``reply_checks.Echoes.as_theirs``, ``told_back``); no other language's grammar is turned here, so
such a reply is asked again, and when the model says it again the person is told the fact the
prompt showed about them, in the words it was stored in.

A reply speaks as the person when it is in the first person, says "you" in no language, and two
thirds or more of its words (at least two) are words of one of the person's recent lines or of one
fact about people the prompt showed. Only after a question in the first person ("...wohne ich?",
"我住在哪里？"): "I love hiking too!" after "I love hiking" is a reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

SHARE = 2 / 3  # of a reply's words found in one line or fact
WordsOf = Callable[[str], list[str]]
_ASKS = re.compile(r"[?？؟]")
_YOU = re.compile(
    r"\b(?:you|you're|you've|your|yours|du|dein|deine|deinen|deinem|deiner|dich|dir|euch|tu|te|toi"
    r"|ton|ta|tes|vous|votre|vos|tú|ti|tuo|tua|você|seu|sua"
    r"|ты|тебя|тебе|твой|твоя|вы|вас|ваш)\b"
    r"|你|您|あなた",
    re.IGNORECASE,
)


class TheirWords:
    """The person's recent lines and the facts about people one turn's prompt showed, as words
    (``words`` makes them: reply_checks' four-letter prefixes of the words that carry meaning)."""

    def __init__(
        self,
        lines: Sequence[str],
        facts: Sequence[str],
        words: WordsOf,
        first_person: re.Pattern[str],
    ) -> None:
        self.words, self.first_person = words, first_person
        self.facts = [(fact, set(words(fact))) for fact in facts]
        self.lines = [set(words(line)) for line in lines] + [w for _, w in self.facts]
        last = lines[-1] if lines else ""
        self.asked_about_self = bool(_ASKS.search(last) and first_person.search(last))

    def may_be_theirs(self, start: str) -> bool:
        """Whether the start of a streaming reply may still turn out spoken as theirs (held
        back)."""
        return (
            self.asked_about_self
            and bool(self.first_person.search(start))
            and not _YOU.search(start)
        )

    def spoken_as_theirs(self, reply: str) -> bool:
        """Whether ``reply`` answers the person's question about themself in the bot's first
        person."""
        if not self.may_be_theirs(reply):
            return False
        said = set(self.words(reply))
        return any(_mostly(said, theirs) for theirs in self.lines)

    def fact_of(self, reply: str) -> str | None:
        """The fact about the person a reply spoken as theirs was made of (the most words
        shared)."""
        said = set(self.words(reply))
        shared = [(len(said & words), fact) for fact, words in self.facts if _mostly(said, words)]
        return max(shared)[1] if shared else None


def _mostly(said: set[str], theirs: set[str]) -> bool:
    shared = len(said & theirs)
    return shared >= 2 and shared >= SHARE * len(said)

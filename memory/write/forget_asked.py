"""Asks to forget, read in a transcript: what a person asked the bot to forget before its facts are
filed.

Forgetting a stored memory is ``memory.upkeep.forgetting`` (the /forget command, the memory_delete
tool, the dashboard, a veto). An ask in the same conversation as the fact it names comes before
there is any memory to forget: extraction runs after the turns go quiet, so "I'm running a half
marathon ... actually, forget the half marathon" reaches the model in one transcript, and the model
may well file the half marathon anyway. ``memory.write.ownership`` drops such a fact: the asker's,
from lines said before the ask, matching what was asked.

An ask is a sentence that opens with the request (after a name, "please", "ok", "can you", "I want
you to"...): "forget X", "forget about X", "/forget X", "don't remember X", "stop remembering X",
"don't keep / save / store X"; in other words (issue 45), "scratch / disregard / never mind what I
said about X" and "delete / erase / remove that, or my X", ending the sentence. "I always forget my
keys", "don't forget my birthday" and "I don't remember his name" are not asks. "Don't keep / save /
store / remember X" is an ask only when X is something the bot keeps: what the person said ("that",
"what I told you", "that I ...") or one thing of theirs ending the sentence ("my phone number", "my
address on file"); "don't keep my birthday a secret", "don't keep me waiting", "don't store the
cheese in the fridge door", "don't save my seat" are English, not asks. What it names (up to a
comma; "forget it, I'll google it" and "forget about it, it's fine" are not asks):

    words       "forget the half marathon": facts holding its distinctive words (or, when it has none, all
                its words), in the fact's stems (``memory.write.wording``)
    that        "forget that", "forget it", "forget what I just said": facts from the asker's line before
    everything  "forget everything I said": every fact of the asker from the lines before

An ask is ``plain`` when it cannot be anything else: "/forget X", or it names what the person said
or one thing of theirs ("forget my race bib number", "forget that I live in Leeds", "forget what I
said about Leeds") and "forget about my X" ends the sentence ("forget about my ex, he's not worth
it" is talk). A plain ask, or a ``whole`` one ("actually, forget the half marathon.") whose words
the person said themselves, is done before the model answers (``bot.orchestrator``); "forget the
cheese, let's have pasta" is left to the model's tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .wording import content_words

_OPENERS = (
    r"ok(?:ay)?|so|and|also|oh|actually|hey|please|pls|wait|sorry|hmm|um|no|on second thought"
)
# a name, "ok", "please"...
_LEAD = r"(?:^|(?<=[.!?;:\n]))\s*(?:[\w'-]+,\s*)?(?:(?:" + _OPENERS + r")\b[\s,]*)*"
_ASK = r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|i\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\s+|please\s+)?"
_VERB = (
    r"(?:(?P<forget>/forget|forget|unremember|stop\s+remembering)"
    r"|(?P<strike>scratch|delete|erase|remove|disregard|never\s+mind)"
    r"|(?:don['’]?t|do\s+not|not)\s+(?:remember|keep|save|store))\b"
)
# of those, the ones said of a thing as often as of what was said ("never mind my brother, he's
# late"): an ask only when they name what was said ("scratch what I said about my brother")
_SAID_ONLY = ("scratch", "disregard", "never")
ASK = re.compile(_LEAD + _ASK + _VERB + r"(?P<what>[^.!?;\n]*)", re.IGNORECASE)
# what may follow the thing named and change nothing: "my phone number on file, please"
_TAIL = re.compile(
    r"(?:[\s,]*\b(?:please|pls|anymore|any\s+more|any\s+longer|for\s+good|either|too|as\s+well"
    r"|thanks|thank\s+you|ok(?:ay)?|on\s+file|(?:in|from)\s+(?:your\s+)?memory))+[\s,]*$",
    re.IGNORECASE,
)
# "that", "what I just said": the asker's line before
_POINTER = re.compile(r"(?:that|this|what\s+i\s+(?:just\s+)?(?:said|told\s+you|wrote|mentioned))")
# what the person said: "that I work at Acme", "what I told you about Leeds", "the bit about my
# sister"
_SAID = re.compile(
    r"(?:that\s+)?(?:i|i'm|i've|i'd|i'll|my)\b.*"
    r"|(?:what|everything|anything|all|whatever|the\s+(?:thing|things|bit|part|stuff))"
    r"\s+(?:i|about|that\s+i)\b.*"
    r"|.*\bi\s+(?:just\s+)?(?:told|said|mentioned|gave|wrote)\b.*"
)
_MINE = re.compile(r"(?:about\s+)?(?:my|our)\s+(?P<thing>[\w'-]+(?:\s+[\w'-]+){0,4})")
# after "my": a word that makes "keep my X ..." English rather than a thing the bot keeps ("my
# birthday a secret", "my seat warm", "my bike in the hall", "my word"), or a verb ("my birthday
# is May 3"): in doubt, not an ask
_NOT_A_THING_WORDS = (
    "a an the me you him her it us them this that in on at to from for with by into onto as like up "
    "down out off away over under is are was were be secret secrets waiting warm cold safe quiet busy "
    "going open shut closed private hidden alive company seat spot place word promise cool distance "
    "breath mind head hopes chin mouth eye eyes hands temper bacon skin life soul"
)
_NOT_A_THING = frozenset(_NOT_A_THING_WORDS.split())
_NEVER_MIND = frozenset({"it", "about it"})
EVERYTHING = frozenset({"everyth"})  # the stem of "everything"
# words that point at what was said rather than name it: "forget what I just said about that"
# stems (``memory.write.wording``)
POINTING = frozenset(
    {
        "about",
        "told",
        "earlier",
        "last",
        "messag",
        "thing",
        "stuff",
        "bit",
        "part",
        "pleas",
        "bot",
        "now",
        "again",
    }
)


@dataclass(frozen=True, slots=True)
class Asked:
    """One ask to forget, by ``speaker`` on line ``line`` (0-based): ``what`` it names (empty: "that", the
    asker's line ``before`` the ask), or ``everything`` they said before it; ``plain``: it cannot be
    anything but an ask (module doc)."""

    speaker: str
    line: int
    what: str
    before: int | None
    everything: bool = False
    plain: bool = False
    whole: bool = False  # nothing but "please", "anymore"... follows what it names in its sentence


def forgets_in(speakers: Sequence[str | None], texts: Sequence[str]) -> tuple[Asked, ...]:
    """The asks to forget among the people's lines (``speakers[i]`` None: the bot's line, never an ask)."""
    out = []
    for i, (speaker, text) in enumerate(zip(speakers, texts, strict=True)):
        if speaker is None:
            continue
        earlier = next((j for j in range(i - 1, -1, -1) if speakers[j] == speaker), None)
        for match in ASK.finditer(text or ""):
            head, _, rest = match.group("what").partition(",")
            what = _TAIL.sub("", head).strip()
            spoken = " ".join(what.lower().replace("’", "'").split())
            ends = not _TAIL.sub("", rest).strip()  # nothing after the thing but "please"...
            forget = match.group("forget") is not None
            if not forget and not (_kept(spoken) and ends):
                continue  # "don't keep me waiting", "scratch that, I meant Tuesday": not an ask
            strike = (match.group("strike") or "").lower()
            if strike.startswith(_SAID_ONLY) and _MINE.fullmatch(spoken):
                continue  # "never mind my brother."
            if spoken in _NEVER_MIND and not ends:
                continue  # "forget about it, it's fine"
            # "I quit my job. Forget that."
            before = i if content_words(text[: match.start()]) else earlier
            named = content_words(what) - POINTING
            everything = bool(named) and named <= EVERYTHING
            plain = match.group("forget") == "/forget" or (
                _kept(spoken) and (ends or not spoken.startswith("about "))
            )
            what = "" if everything or not named else what
            out.append(Asked(speaker, i, what, before, everything, plain, ends))
    return tuple(out)


def only_asks(text: str) -> bool:
    """Whether ``text`` says nothing but asks to forget ("Forget my race bib number.", "Please
    forget my phone number, thanks!"): once they are taken out, no word is left but a courtesy
    ("forget my locker code. How are you?" asks something too)."""
    rest = ASK.sub(" ", text).lower().replace("’", "'")
    return all(word in _COURTESY for word in re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", rest))


_COURTESY = frozenset(
    [
        "please",
        "thanks",
        "thank",
        "you",
        "ok",
        "okay",
        "oh",
        "and",
        "also",
        "actually",
        "now",
        "again",
        "hey",
        "hi",
        "so",
        "well",
        "just",
        "cheers",
        "ta",
        "pls",
        "thx",
    ]
)


def _kept(what: str) -> bool:
    """Whether ``what`` (lower case, one space) names something the bot keeps: what the person
    said, or one thing of theirs ("my race bib number"), not "me", "the cheese" or "my birthday a
    secret"."""
    if _POINTER.fullmatch(what):
        return True
    mine = _MINE.fullmatch(what)
    if mine is not None:
        return not _NOT_A_THING.intersection(mine.group("thing").split())
    return bool(_SAID.fullmatch(what)) and not what.startswith("my ")

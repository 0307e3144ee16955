"""A person's fact told about them, not in their voice (issue 45): "I work as a nurse" stored or
shown as it was said reads, to a chat model, as its own life ("I'm a nurse at the children's
hospital", the bot answering as the person). So a fact in the first person about its speaker is
turned round, however the model wrote it:

    "I work as a nurse at the hospital."   ->  "Priya works as a nurse at the hospital."
    "I'm allergic to nuts and my son too"  ->  "Priya is allergic to nuts and Priya's son too"
    "I've just adopted a kitten."          ->  "Priya has just adopted a kitten."

The name stands wherever "I", "me" or "my" stood: "their" or "she" could be read as anyone else the
sentence names ("my sister says I cook well"). The verb after "I" (past a few adverbs: "I really
love") agrees: "am" -> "is", "have" -> "has", "don't" -> "doesn't", "live" -> "lives", "watch" ->
"watches"; past forms, modals and the forms that are the same in both tenses ("read", "put") stay.
"The user" is the name too.

English, Chinese (whose verbs do not change: "我住在成都" -> "林晓住在成都") and German
(``memory.write.german_person``: "Ich wohne in München" -> "Jonas wohnt in München"), and only what
is cheap and safe: a sentence is turned when most of its other words are English (the leak check's
vocabulary), so "me gusta el café" and "moro em Lisboa com a minha irmã" are left in their language
and their words (never translated); the snapshot labels whose each fact is for those
(``bot.assembly``)."""

from __future__ import annotations

import re

from ..recall.leaks import _vocabulary
from .german_person import german, told

_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_SUBJECT = frozenset({"i", "i'm", "i've", "i'd", "i'll"})
_OBJECT = {"me": "{name}", "my": "{name}'s", "mine": "{name}'s", "myself": "themself"}
_USER = re.compile(r"\bthe\s+user\b", re.IGNORECASE)  # not "User 8": a name
ENGLISH_SHARE = 0.6  # of a sentence's other words that must be English for it to be turned


def _listed(words: str) -> frozenset[str]:
    return frozenset(words.split())


ADVERBS = _listed(
    "really also often usually always never sometimes just still only mostly generally rarely "
    "actually currently now recently even already absolutely definitely totally mainly normally "
    "typically hardly seldom occasionally truly honestly simply finally once much rather "
    "especially barely nearly almost soon probably"
)
# a verb after "I" that is the same for "Priya": modals, past forms, the forms alike in both tenses
_SAME = _listed(
    "can could will would shall should may might must did had was used ought read put set cut hit "
    "quit let hurt cost shut spread can't couldn't won't wouldn't shouldn't didn't hadn't mustn't "
    "went got made met took saw came left bought began ran wrote grew knew felt found gave kept "
    "lost paid said sent sold spent taught thought told won broke chose drove ate fell flew forgot "
    "built caught brought fought meant slept stood understood woke wore became swam sang rode "
    "drank sat heard held led fed fled stuck threw tore lent dug hung shot slid spoke stole struck "
    "swore and or but too"
)
_AGREE = {
    "am": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
    "'m": "is",
}
_CONTRACTED = {"i'm": "is", "i've": "has", "i'll": "will"}
_PARTICIPLES = _listed("been had gone done seen got known taken given written eaten")


def third_person(text: str, name: str) -> str:
    """``text`` about ``name`` in the third person; unchanged when it is not English, holds no first
    person, or ``name`` is no name (empty, or no letter in it)."""
    name = " ".join((name or "").split())
    if not any(c.isalpha() for c in name):
        return text
    if _CHINESE_I.search(text):
        return _chinese(text, name)
    if german(text):  # "ich", "mein": never words of English
        return told(text, name)
    if not english(text):
        return text
    tokens = list(_TOKEN.finditer(text))
    out, at, i = [], 0, 0
    while i < len(tokens):
        token, word = tokens[i], _word(tokens[i].group())
        if word in _SUBJECT and (word != "i" or _is_pronoun_i(tokens, i)):
            said, i = _subject(tokens, i, name)
        elif word in _OBJECT:
            said, i = _OBJECT[word].format(name=name), i + 1
        else:
            i += 1
            continue
        out.append(text[at : token.start()] + said)
        at = tokens[i - 1].end()
    out.append(text[at:])
    return _USER.sub(name, "".join(out))


# Chinese "I" and "my" (not "we", 我们): the verb does not change, so the name stands in for it
# ("我住在成都" -> "林晓住在成都", "我的猫" / "我哥哥" -> "林晓的猫" / "林晓的哥哥")
_CHINESE_I = re.compile(r"我(?!们)")
_CHINESE_MY = re.compile(
    r"我的|我(?=(?:哥哥|姐姐|弟弟|妹妹|爸爸|妈妈|父亲|母亲|丈夫|妻子|老公|老婆|儿子|女儿|家))"
)


def _chinese(text: str, name: str) -> str:
    return _CHINESE_I.sub(name, _CHINESE_MY.sub(f"{name}的", text))


def first_person(text: str) -> bool:
    """Whether ``text`` speaks in the English first person singular (and is English enough)."""
    words = {_word(m.group()) for m in _TOKEN.finditer(text or "")}
    return bool(words & (_SUBJECT | set(_OBJECT))) and english(text)


def english(text: str) -> bool:
    """Most of the words of ``text`` (the first person and names left out: a capitalised word inside
    the sentence) are English words; one with none of those but "I" is English too."""
    tokens = list(_TOKEN.finditer(text or ""))
    others = [
        _word(m.group())
        for n, m in enumerate(tokens)
        if _word(m.group()) not in _SUBJECT
        and _word(m.group()) not in _OBJECT
        and (n == 0 or not m.group()[:1].isupper())
    ]
    if not others:
        return any(m.group() == "I" or _word(m.group()) in _CONTRACTED for m in tokens)
    vocabulary = _vocabulary()
    known = sum(1 for w in others if w.isascii() and w.split("'")[0] in vocabulary)
    return known >= ENGLISH_SHARE * len(others)


def _word(token: str) -> str:
    return token.casefold().replace("’", "'")


def _is_pronoun_i(tokens: list[re.Match[str]], i: int) -> bool:
    """A bare "i" is the pronoun unless it is a list marker or a letter ("part i", "(i)")."""
    return tokens[i].group() == "I" or i + 1 < len(tokens)


def _subject(tokens: list[re.Match[str]], i: int, name: str) -> tuple[str, int]:
    """The words for "I" (with its verb, contracted or next) and the index of the next token."""
    word = _word(tokens[i].group())
    if word in _CONTRACTED:
        return f"{name} {_CONTRACTED[word]}", i + 1
    if word == "i'd":
        return f"{name} {'had' if _next_verb(tokens, i + 1) in _PARTICIPLES else 'would'}", i + 1
    j = i + 1
    while j < len(tokens) and _word(tokens[j].group()) in ADVERBS:
        j += 1
    if j >= len(tokens):
        return name, i + 1
    between = tokens[i].string[tokens[i].end() : tokens[j].start()]
    return f"{name}{between}{agree(tokens[j].group())}", j + 1


def _next_verb(tokens: list[re.Match[str]], j: int) -> str:
    while j < len(tokens) and _word(tokens[j].group()) in ADVERBS:
        j += 1
    return _word(tokens[j].group()) if j < len(tokens) else ""


def agree(verb: str) -> str:
    """The form of ``verb`` after a name for its form after "I": "live" -> "lives", "am" -> "is"."""
    word = _word(verb)
    if word in _AGREE:
        return _AGREE[word]
    if word in _SAME or word.endswith("ed") or not verb.isalpha() or not verb.islower():
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"

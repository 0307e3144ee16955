"""What a reply must not be: empty, or words the model was given rather than an answer (issue 45).

Small models parrot. The real 0.5B answered all 17 turns of a conversation with "I saved, updated,
and forgot something." (a sentence of ``prompts/tool_results.md``), and another run every turn with
"Fired at the asked time in this chat." (a tool's description). ``Echoes`` knows the words a reply
could parrot: the instruction prompts of a reply turn, the tools' descriptions, and the bot's own
last replies, and the person's own lines (a first-person reply made of them is the bot speaking as
the person); ``parroted`` says whether a short reply is made of nothing else. Words are compared
as content words cut to their first four letters ("fires" and "fired" are one word), in runs of
three: a reply is a parrot when it has three content words or more and every run of three of them
is found in what it could parrot, or when it is the bot's reply for the third time in a row. A
reply repeating a memory is not one (memories are not in the set), nor a repeated reply that
shares a word with the person's new message ("what's my dog called?" may get the same answer).

``Draft`` holds the first words of a streamed reply until they are not a parrot, so a caught one is
never shown (the console streams as the model writes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import prompts
from memory import spaced

from ..types import StreamSink
from .language import LITTLE_WORDS
from .whose_words import TheirWords

# The prompts of a reply turn (the system prompt's own words, the notes the loop adds), without
# their $variables
REPLY_PROMPTS = (
    "system",
    "tool_results",
    "tool_repeat",
    "answer_again",
    "forget_done",
    "forget_not_found",
    "leak_retry",
    "skip",
    "voice",
)
RUN = 3  # content words in a run
RECENT = 3  # the bot's last replies a reply may not repeat...
REPEATS = 2  # ...as often as this: a third time in a row (a reply may well come twice)
HOLD_CHARS = 240  # a parrot is a sentence or two: longer text streams on, whatever its words
PEOPLE = 20  # the person's last lines a first-person reply may not be made of
ECHO_RUNS = (
    3  # a line said back is a parrot from 5 content words ("Happy birthday Sam!" is a reply)
)
_SECOND_PERSON = re.compile(r"\b(?:you|you're|you've|your|yours)\b", re.IGNORECASE)
# the first person in English and five other languages (a German chat's "Ich habe einen grauen
# Kater" was said back by the real 1.5B as its own)
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|[Ii]ch|[Mm]ein|[Mm]eine|[Mm]ir|[Mm]ich|[Jj]e|[Mm]on|[Mm]a"
    r"|[Mm]es|[Yy]o|[Mm]is|[Ii]o|[Ee]u|[Mm]eu|[Mm]inha)\b|我(?!们)"
)
# what a reply may open with before saying the person's line as its own: "I know that I work as a
# nurse at the children's hospital." (the real 1.5B, asked "Do you know what I do for work?")
_LEAD_IN = re.compile(
    r"^\s*(?:(?:yes|well|sure|of course)[,!.]?\s+)?I\s+(?:know|remember|recall|think|believe)"
    r"(?:\s+that)?[,:]?\s+(?=\S)"
    # or a greeting: "你好！我养了一只橘猫，叫豆豆。" to that line (the real 1.5B, four turns running)
    r"|^\s*(?:hi|hello|hey|hallo|你好|您好)(?:\s+there)?[!,.！，。]*\s*(?=\S)",
    re.IGNORECASE,
)
# "I'm Sam", "I am Sam", "my name is Sam", "call me Sam": who the speaker says they are (not "I'm
# Sam's friend")
_INTRO = re.compile(
    r"\b(?:I['’]m|I am|[Mm]y name is|[Cc]all me|Ich bin|[Ii]ch heiße|[Mm]ein Name ist|[Jj]e suis"
    r"|[Jj]e m['’]appelle|[Mm]e llamo|[Mm]i chiamo|[Mm]eu nome é)\s+([A-Z][^\W\d_]+)\b(?!['’]s)"
)
# the English first person, and what it is said to the person as
_TO_YOU = {
    "i am": "you are",
    "i was": "you were",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "i": "you",
    "my": "your",
    "mine": "yours",
    "me": "you",
    "myself": "yourself",
}
_ENGLISH_I = re.compile(
    r"\b(?:I am|I was|I['’]m|I['’]ve|I['’]d|I['’]ll|I|[Mm]y|[Mm]ine|[Mm]e|[Mm]yself)\b"
)
# a question about the asker ("What subject do I teach?", "What am I allergic to?"), and a reply
# that says it of the bot ("I teach chemistry.", "I am allergic to shellfish.")
_ASKED_SELF = re.compile(
    r"^\W*(?:what|where|which|who|how|when)\b[^?]*?\b(?:do|did|am|was|will|can)\s+I\s+"
    r"([a-z]{3,})",
    re.IGNORECASE,
)
_SAYS_I = re.compile(r"^\s*I(?:['’]m|\s+am|\s+was)?\s+([a-z]{3,})")
_MY = re.compile(r"\b[Mm]y\s+(?:own\s+)?([^\W\d_]{3,})")
_MY_ZH = re.compile(r"我的([\u4e00-\u9fff]{1,2})")  # "我的猫叫咪咪。" to "我的猫叫什么名字？"
# a speaker's label a weak model writes before its reply, as the transcript shows lines: "林晓："
_SPEAKER = re.compile(r"^\s*[^\s:：]{1,24}[:：]\s*")
_LABEL = re.compile(r'^\s*"([^"\n]{1,40})"\s*[:：]')  # a group turn as the model is shown it
_LABELLED = re.compile(r'^\s*["“]?([^"“”:：\n]{1,40}?)["”]?\s*[:：]\s*(?=\S)')
_BOT = re.compile(r"You are (.{1,40}?), ")  # the system prompt's first words
# the clock note at the end of a person's turn (``bot.assembly.clock_note``), which a weak model
# copies into its reply: "(sent 05:58 UTC)"
_CLOCK = re.compile(r"\s*\(sent \d{1,2}:\d{2}[^)\n]{0,80}\)")
# the person's next line, made up by the model: "You're welcome! (You: bye)" (the real 1.5B), and
# a note of a save it never made: "You live now in Glasgow. (Added to your location: Glasgow)"
_THEIR_TURN = re.compile(
    r"\s*\((?:(?:you|user|me)\s*[:：]|(?:added|saved|stored) (?:to|in) your )[^()\n]{0,200}\)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_PART = re.compile(r"[^\W\d_]+$")
_STOPWORDS = """a an the and or but if of to in on at by for with from as is are was were be been
being am do does did have has had i i'm i've i'll i'd me my mine you you're your yours it its it's
this that these those there here we our us they them their he she him her his not no so too very
just also all any some what what's which who whom when where why how can could will would shall
should may might must let now then than into out up about over again once only own same other such
more most each few both"""
# and the little words of other languages: "ich" shared by a question and a German reply said
# again four times is no sign the reply answers it (the real 1.5B)
_STOP = frozenset(_STOPWORDS.split()) | LITTLE_WORDS


def _fold(name: str) -> str:
    return name.strip().casefold()


def word_prefixes(text: str) -> list[str]:
    """The words that carry meaning, lower-cased and cut to four letters."""
    # Chinese, Japanese...: their character pairs (a sentence is one \w run)
    words = (m.lower().replace("’", "'").removesuffix("'s") for m in _WORD.findall(spaced(text)))
    return [w[:4] for w in words if w not in _STOP]


def _runs(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


@cache
def _prompt_runs() -> frozenset[tuple[str, ...]]:
    runs: set[tuple[str, ...]] = set()
    for name in REPLY_PROMPTS:
        text = re.sub(r"\$\{?\w+\}?", " . ", prompts.load(name).template)
        runs |= _runs(word_prefixes(text))
    return frozenset(runs)


def _to_you(text: str) -> str:
    """An English sentence in the first person said to the person: "I'm", "my" -> "You're", "your"."""
    told = _ENGLISH_I.sub(lambda m: _TO_YOU[m.group(0).casefold().replace("’", "'")], text)
    return told[:1].upper() + told[1:]


def plain_words(text: str) -> list[str]:
    """``text``'s words, lower-cased, punctuation off."""
    return re.findall(r"\w+", text.casefold())


def _owned(text: str) -> set[str]:
    """The things ``text`` calls its speaker's own: "my cat", "my grandfather's" -> cat,
    grandfather."""
    return {w.casefold()[:4] for w in _MY.findall(text)} | set(_MY_ZH.findall(text))


def echoes_prompt(text: str) -> bool:
    """Whether a reply, less the bot's own notes, is only words of the reply prompts (a sentence of
    ``prompts/tool_results.md`` said as the reply, as the real 0.5B did every turn)."""
    runs = _runs(word_prefixes(without_clock(text)))
    return bool(runs) and runs <= _prompt_runs()


class Echoes:
    """What one turn's reply could parrot: the reply prompts, the tools' descriptions, recent
    replies."""

    def __init__(self, convo: Sequence[dict[str, Any]], schemas: Iterable[dict[str, Any]]) -> None:
        given = set(_prompt_runs())
        for schema in schemas:
            given |= _runs(word_prefixes(str((schema.get("function") or {}).get("description"))))
        self.given = frozenset(given)
        replies = [m for m in convo if m.get("role") == "assistant" and m.get("content")]
        self.replies = [_runs(word_prefixes(str(m["content"]))) for m in replies[-RECENT:]]
        # and word for word, for a reply too short for runs ("Saving", every turn of a real 0.5B)
        self.said = [plain_words(str(m["content"])) for m in replies[-REPEATS:]]
        people = [_text(m.get("content")) for m in convo if m.get("role") == "user"]
        # (less the note ending the turn: "antworte auf Deutsch" is not the person's words, and a
        # reply saying "Antwort auf Deutsch" seven times running shared a word with each line)
        self.asked = set(word_prefixes(_without_clock(people[-1]) if people else ""))
        # the line being answered: said back word for word ("Biscuit knocked a glass off the
        # table this morning, the rascal." to that line, the real 1.5B) is no reply
        self.last = _runs(word_prefixes(_without_clock(people[-1]))) if people else set()
        # what the person just called theirs: "my grandfather" in "What's my grandfather's name?"
        # answered "My grandfather's name is Tomasz." (the real 1.5B) is the bot speaking as them
        self.theirs = _owned(_without_clock(people[-1])) if people else set()
        # what the person asks about themself: "Where do I live now?" -> live
        asked_self = _ASKED_SELF.search(_without_clock(people[-1])) if people else None
        self.their_verb = asked_self.group(1).casefold()[:4] if asked_self else None
        # the person's own lines: a reply in the first person made of them is the bot speaking as
        # the person (a real 1.5B answered "I have a grey cat called Biscuit." to that line, and
        # "I live in Leeds" to "which city do I live in?")
        lines = [_without_clock(line) for line in people[-PEOPLE:]]
        self.people = [_runs(word_prefixes(line)) for line in lines]
        # and the facts about people the prompt shows: "I work as a nurse at the children's
        # hospital." was the real 1.5B's answer to "Do you know what I do for work?", the snapshot
        # saying 'about "Sam": "Sam works as a nurse at the children's hospital."'
        system = " ".join(_text(m.get("content")) for m in convo if m.get("role") == "system")
        facts = _facts_about_people(system)
        self.people += [_runs(word_prefixes(fact)) for fact in facts]
        # in any language: a first-person answer to a question about the person, made of their words
        self.their_words = TheirWords(lines, facts, word_prefixes, _FIRST_PERSON)
        # the names the person gave themselves: "Hello! I'm Sam." to "Hi! I'm Sam." (the real
        # 1.5B) is the bot taking the person's name, however few words it shares with the line
        self.names = {name for line in people[-PEOPLE:] for name in _INTRO.findall(line)}
        # who speaks in the transcript the model is shown ('"Quinn": when did ...' in a group) and
        # the bot's own name: a reply that opens with one of them as a label copied the format
        labels = {m.group(1) for line in people[-PEOPLE:] if (m := _LABEL.match(line))}
        if named := _BOT.match(system):
            labels.add(named.group(1))
        self.labels = frozenset(_fold(label) for label in labels)

    def unlabelled(self, text: str) -> str:
        """``text`` without a speaker's label at its start ("Quinn: Melanie went ...", '"Quinn":
        ...': the real 1.5B copied the transcript's format into 9 of 30 answers)."""
        label = _LABELLED.match(text)
        if label is None or _fold(label.group(1)) not in self.labels:
            return text
        return text[label.end() :]

    def parroted(self, text: str) -> bool:
        """Whether ``text`` is only words the model was given, or a recent reply said again to new
        words."""
        text = _SPEAKER.sub("", _without_clock(text), count=1)
        if self.names & set(_INTRO.findall(text)):
            return True
        words = word_prefixes(text)
        runs = _runs(words)
        if not runs:  # too short to judge by runs: the same words a third time in a row
            same = len(self.said) == REPEATS and all(plain_words(text) == s for s in self.said)
            return same and bool(words) and not self.asked & set(words)
        if runs <= self.given:
            return True
        core = _LEAD_IN.sub("", text, count=1)
        own = _runs(word_prefixes(core)) or runs
        if _FIRST_PERSON.search(core) and any(own <= said for said in self.people):
            return True
        if self.their_words.spoken_as_theirs(core):
            return True
        if self.theirs & _owned(text):
            return True
        if len(runs) >= ECHO_RUNS and runs <= self.last and not _SECOND_PERSON.search(text):
            return True
        if self.asked & set(words):
            return False  # an answer to the new line may well be said again
        # a sentence of its own said again word for word to new words is no answer to them
        # ("Ich bin ein kompatibles Kater ..." twice running, the real 1.5B); a short one from
        # its third time
        again = len(runs) >= ECHO_RUNS and bool(self.replies) and runs <= self.replies[-1]
        return again or sum(runs <= said for said in self.replies) >= REPEATS

    def as_theirs(self, text: str) -> str:
        """A reply that answers the person's question about themself in the first person ("Where
        do I live now?" -> "I live now in Glasgow.", the real 1.5B), told in the second person
        ("You live now in Glasgow."); any other reply as it is."""
        core = _LEAD_IN.sub("", text, count=1)
        said = _SAYS_I.match(core)
        if self.their_verb is None or said is None or _SECOND_PERSON.search(core):
            return text
        if said.group(1).casefold()[:4] != self.their_verb:
            return text
        return _to_you(core)

    def told_back(self, text: str) -> str | None:
        """An English reply that is the person's own line or fact said in the bot's first person
        ("I teach chemistry at a secondary school." to "What subject do I teach?": the real 1.5B,
        twice, where the answer is right but whose it is wrong), told back to them in the second
        person; None for any other reply."""
        core = _LEAD_IN.sub("", _SPEAKER.sub("", _without_clock(text), count=1), count=1)
        runs = _runs(word_prefixes(core))
        if not runs or _SECOND_PERSON.search(core) or not _ENGLISH_I.search(core):
            return None
        if not any(runs <= said for said in self.people):
            return None
        return _to_you(core)

    def plainly_new(self, text: str) -> bool:
        """Whether the start of a reply already says something of its own (a run found nowhere)."""
        known = self.given.union(*self.replies, *self.people)
        whole = _PART.sub("", text)  # a word still arriving is not judged yet
        if self.names & set(_INTRO.findall(whole)) or any(m in whole for m in _NOTE_MARKS):
            return False  # held to the end: "Hey there! I'm Maya." is asked again (the 1.5B)
        if self.their_words.may_be_theirs(whole):
            return False  # "Ja, ich bin als Krankenpfleger ..." to "Weißt du, was ich mache?"
        return any(run not in known for run in _runs(word_prefixes(whole)))


class Draft:
    """A stream sink holding a reply's first words until ``Echoes.plainly_new`` clears them (or the
    answer ends and the loop decides): a caught parrot is dropped unseen; the rest streams on. Once
    open, a parenthesis that may be one of the bot's own notes copied from an earlier reply
    ("(Reminder set for ...)", a clock note) is held until it closes: a copied note is dropped
    unseen, any other aside streams on (issue 45: the console showed the copy the stored reply did
    not have)."""

    def __init__(self, sink: StreamSink, echoes: Echoes) -> None:
        self.sink, self.echoes = sink, echoes
        self.held: list[str] = []
        self.open = False
        self.aside = ""  # once open: a parenthesis that may be a copied note

    async def __call__(self, text: str) -> None:
        if self.open:
            await self._past_notes(text)
            return
        self.held.append(text)
        held = "".join(self.held)
        if len(held) > HOLD_CHARS or self.echoes.plainly_new(held):
            await self.release()

    async def release(self, settled: str | None = None) -> None:
        """What is held goes out; ``settled``: the answer as it ended, cleaned (``without_clock``),
        sent instead of the raw words held, when nothing was sent yet. An aside still held goes out
        unless it is a copied note."""
        if self.open:
            aside, self.aside = self.aside, ""
            if aside and without_clock(aside):
                await self.sink(aside)
            return
        self.open = True
        held, self.held = "".join(self.held), []
        if settled is not None and held:
            await self.sink(settled)
        elif held:
            await self._past_notes(held)

    def drop(self) -> None:
        self.held = []

    async def _past_notes(self, text: str) -> None:
        """Streams ``text``, holding from a "(" while what follows may still be a note."""
        rest, out = self.aside + text, []
        while (start := rest.find("(")) >= 0:
            out.append(rest[:start])
            rest = rest[start:]
            note = _OWN_NOTE.match(rest) or _CLOCK.match(rest) or _THEIR_TURN.match(rest)
            if note is not None:
                rest = rest[note.end() :]  # a copied note, whole: never shown
            elif _may_be_note(rest[1:]):
                break  # still arriving: held
            else:
                out.append("(")
                rest = rest[1:]
        else:
            out.append(rest)
            rest = ""
        self.aside = rest
        if "".join(out):
            await self.sink("".join(out))


# how each of the bot's notes opens, after its "(" (``_OWN_NOTE``, ``_CLOCK``)
_NOTE_OPENINGS = (
    "Reminder set for",
    "I haven't set a reminder",
    "I didn't set a new reminder",
    "Done: what you asked me to forget",
    "To be clear: nothing was",
    "sent ",
    *(f"{who}:" for who in ("You", "you", "User", "user", "Me", "me")),  # ``_THEIR_TURN``
    *(f"{done} {to} your" for done in ("Added", "Saved", "Stored") for to in ("to", "in")),
)
_NOTE_LONGEST = 400  # no note of the bot's is longer: a longer aside is the model's own


def _may_be_note(after: str) -> bool:
    """Whether the text after a "(" is, or may still become, one of the bot's notes."""
    if len(after) > _NOTE_LONGEST or "\n" in after:
        return False
    return any(after.startswith(o) or o.startswith(after) for o in _NOTE_OPENINGS)


def _text(content: object) -> str:
    if isinstance(content, list):  # a message with an image: its text parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


# the notes the bot adds after a reply (``bot.reminders.commands``, ``bot.reminders.claims``,
# ``bot.model.honesty``): never the model's to write; one level of parentheses inside ("(UTC)")
_OWN_NOTE = re.compile(
    r"\s*\((?:Reminder set for|I haven't set a reminder|I didn't set a new reminder"
    r"|Done: what you asked me to forget|To be clear: nothing was)[^()]*(?:\([^()]*\)[^()]*)*\)"
    # or a piece of one (the real 0.5B ended replies with "(Reminders lists them; /reminders
    # cancel <n> cancels one))")
    r"|\s*\(?[^()\n]{0,80}/reminders cancel <n> cancels one\)*"
)
# what each note holds, looked for before the pattern is run (a 400,000-character reply)
_NOTE_MARKS = (
    "Reminder set for",
    "I haven't set a reminder",
    "I didn't set a new reminder",
    "Done: what you asked me to forget",
    "To be clear: nothing was",
    "/reminders cancel <n> cancels one",
)


# a whole reply in quotation marks (or opened with one it never closes), no other inside
_QUOTED = re.compile(r'^\s*\(?["“](?P<inner>[^"“”]+)(?:["”]\)?)?\s*$')


def _without_clock(text: str) -> str:
    return _CLOCK.sub("", text)


def without_clock(text: str) -> str:
    """A reply without the clock notes a weak model copied from the person's turns, without
    the bot's own notes it copied from its earlier replies (the real 1.5B ended "Got it, no prawns
    for you." with the "(Reminder set for ...)" of three turns before: read as a new reminder
    claimed), and without a line of the person's it made up ("(You: bye)")."""
    if _QUOTED.match(text):  # the real 0.5B wrapped its replies in quotes: '"I don't know."'
        text = _QUOTED.sub(r"\g<inner>", text)
    text = _THEIR_TURN.sub("", text)
    noted = any(mark in text for mark in _NOTE_MARKS)
    if not (noted or _CLOCK.search(text)):
        return text
    return _OWN_NOTE.sub("", _without_clock(text)).strip()


# a fact line of the snapshot (``bot.assembly``): - about "Sam": "Sam works as a nurse ..." (...)
_FACT_LINE = re.compile(r'about "[^"\n]*"(?:, told by "[^"\n]*")?: ("(?:[^"\\\n]|\\.)*")')


def _facts_about_people(system: str) -> list[str]:
    found = []
    for quoted in _FACT_LINE.findall(system):
        try:
            found.append(str(json.loads(quoted)))
        except ValueError:
            continue
    return found

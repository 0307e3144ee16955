"""The scripted conversations of ``companion modelcheck`` (ORCH-9) in English, German and Chinese,
and the language test of a stored fact (LANG-3: memories filed from a German chat are German, from
a Chinese chat Chinese).

Each script is a person telling the bot about themselves (a pet, a job, a city, a sibling, a dated
plan, a preference, "remember that ..."), a restart (the buffered extraction runs), questions about
what it knows and a new hobby. The English one also asks twice to forget; a second English one
(``en2``) has a move, a relative, a reminder and a forget asked in everyday words and five recall
questions whose answers are scored; the German and Chinese ones ask nothing to be forgotten (a
forget asked in words is read in English only, ``memory.write.forget_asked``: they check the
language, not the forgetting).

Gold facts match by key words in the script's language, names as written: a German chat's cat filed
as "Jonas has a grey cat called Krümel" misses the gold "Kater", and a Chinese chat's city filed as
"Chengdu" misses "成都".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORDS = re.compile(r"[\w']+")
_LETTERS = re.compile(r"[^\W\d_]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def holds(content: str, key: str) -> bool:
    """Whether ``content`` holds the key word: a key in Han characters anywhere in it (Chinese has
    no spaces), a key ending in ``*`` as the start of one of its words ("zahnarzt*":
    Zahnarzttermin), else as one of its words, a possessive's too ("priya": "Priya's")."""
    content = content.lower()
    if _HAN.search(key):
        return key in content
    words = [w.removesuffix("'s").rstrip("'") for w in _WORDS.findall(content)]
    if key.endswith("*"):
        return any(w.startswith(key[:-1]) for w in words)
    return key in words


@dataclass(frozen=True, slots=True)
class Gold:
    """A fact the conversation states: a stored fact is it when it holds a key word of each
    group."""

    label: str
    groups: tuple[tuple[str, ...], ...]

    def matches(self, content: str) -> bool:
        return all(any(holds(content, key) for key in group) for group in self.groups)


# Function words (articles, pronouns, prepositions, conjunctions, auxiliaries) and the verbs a fact
# about a person most often has ("Lena studiert Medizin in Hamburg" has no function word of
# either), without the words both languages write alike ("in", "an", "am", "so", "was", "will",
# "war"): a fact's language is the side with more.
GERMAN_WORDS = _words(
    "der die das den dem des ein eine einen einem einer eines und oder aber dass weil wenn ist "
    "sind hat haben hatte wird werden wurde möchte mit bei beim im ins auf für von vom zu zum zur "
    "nach aus als auch sich sein seine seinen seinem seiner ihr ihre ihren ihrem ihrer er sie es "
    "ich mein meine meinen meinem meiner mich mir nicht kein keine gegen um über unter vor seit "
    "sehr lieber gerne noch jeden jede arbeitet wohnt lebt heißt studiert mag trinkt spielt lernt "
    "geht"
)
ENGLISH_WORDS = _words(
    "the a and or but that because if is are were be been has have had does with at on of to for "
    "from by as into about his her hers their they he she it its i my me not no who which this "
    "these those very every works lives studies likes prefers drinks plays learns goes named "
    "called"
)
LANGUAGES = ("en", "de", "zh")


def language_of(text: str) -> str:
    """The language of a fact: "zh" when most of its letters are Han characters, else "de" when
    it has more German than English function words, else "en"."""
    letters = _LETTERS.findall(text)
    if letters and 2 * sum(1 for c in letters if _HAN.match(c)) > len(letters):
        return "zh"
    words = _WORDS.findall(text.lower())
    german = sum(1 for w in words if w in GERMAN_WORDS)
    english = sum(1 for w in words if w in ENGLISH_WORDS)
    return "de" if german > english else "en"


# A fact about a person in their own first person, in any of the languages ("I have a cat", "Ich
# habe einen Kater", "我养了一只猫"): a German chat's "I have a pet named Krümel" is one too.
FIRST_PERSON = _words("i i'm i've my me mine ich mein meine meinen meinem meiner mich mir 我")


@dataclass(frozen=True, slots=True)
class Script:
    """One scripted conversation: who speaks, what they say before and after the restart, the
    gold facts, the words asked to be forgotten (no file of the store may keep them) and the
    person's words a fact about the bot never holds (the script gives the bot no life of its
    own)."""

    language: str
    user_name: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    gold: tuple[Gold, ...]
    forgotten: tuple[str, ...]
    person_words: frozenset[str]
    # after the restart: (question, key words a right answer holds one of); the reminders the
    # conversation asks for in words
    questions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    reminders: int = 0
    name: str = ""  # the key of ``SCRIPTS`` (the language, or "en2")

    def in_language(self, fact: str) -> bool:
        return language_of(fact) == self.language

    def first_person(self, fact: str) -> bool:
        return any(holds(fact, w) for w in FIRST_PERSON)

    def persons(self, fact: str) -> bool:
        return any(holds(fact, w) for w in self.person_words)

    def invented(self, fact: str) -> bool:
        """A fact that is no gold fact and holds none of the person's words: nothing they said."""
        return not any(g.matches(fact) for g in self.gold) and not self.persons(fact)

    def answered(self, question: str, shown: str) -> bool | None:
        """Whether the reply ``shown`` to a recall question holds one of its keys (None: no such
        question)."""
        keys = dict(self.questions).get(question)
        return None if keys is None else any(holds(shown, k) for k in keys)


ENGLISH = Script(
    "en",
    "Sam",
    before=(
        "Hi! I'm Sam. Nice to meet you.",
        "I have a grey cat called Biscuit.",
        "I work as a nurse at the children's hospital.",
        "I live in Leeds, near the river.",
        "I much prefer tea to coffee, green tea especially.",
        "My dentist appointment is on 3 December at 9am.",
        "Remember that my sister Priya's birthday is on 12 May.",
        "My race bib number for Sunday is 4417.",
        "Forget my race bib number.",
        "I'm running the Harrogate half marathon in March.",
        "Biscuit knocked a glass off the table this morning, the rascal.",
        "What should I cook tonight? Something quick.",
    ),
    after=(
        "Hello again!",
        "Forget that I'm running the half marathon.",
        "Which city do I live in?",
        "What's my cat called?",
        "I've started learning the cello on weekends.",
        "Do you know what I do for work?",
        "What do you remember about me?",
        "Thanks, that's all for today.",
    ),
    gold=(
        Gold("cat", (("biscuit",),)),
        Gold("job", (("nurse",),)),
        Gold("city", (("leeds",),)),
        Gold("preference", (("tea",),)),
        Gold("dated plan", (("dentist",),)),
        Gold("remember that", (("priya",),)),
        Gold("hobby", (("cello",),)),
    ),
    forgotten=("4417", "harrogate"),
    person_words=_words(
        "biscuit cat nurse hospital leeds tea dentist priya sister marathon cello 4417"
    ),
)

GERMAN = Script(
    "de",
    "Jonas",
    before=(
        "Hallo! Ich bin Jonas. Schön, dich kennenzulernen.",
        "Ich habe einen grauen Kater namens Krümel.",
        "Ich arbeite als Krankenpfleger im Kinderkrankenhaus.",
        "Ich wohne in München, nicht weit vom Englischen Garten.",
        "Meine Schwester Lena studiert Medizin in Hamburg.",
        "Ich trinke viel lieber Tee als Kaffee, am liebsten grünen Tee.",
        "Mein Zahnarzttermin ist am 3. Dezember um 9 Uhr.",
        "Merk dir, dass ich allergisch gegen Erdnüsse bin.",
        "Krümel hat heute Morgen ein Glas vom Tisch geworfen, der Schlingel.",
        "Was soll ich heute Abend kochen? Etwas Schnelles.",
    ),
    after=(
        "Hallo, da bin ich wieder!",
        "In welcher Stadt wohne ich?",
        "Wie heißt mein Kater?",
        "Ich habe angefangen, am Wochenende Geige zu lernen.",
        "Weißt du, was ich beruflich mache?",
        "Was weißt du alles über mich?",
        "Danke, das war's für heute.",
    ),
    gold=(
        Gold("pet", (("krümel",), ("kater*", "katze*", "haustier*"))),
        Gold("job", (("krankenpfleg*", "pfleger*", "kinderkrankenpfleg*"),)),
        Gold("city", (("münchen",),)),
        Gold("sibling", (("lena",), ("schwester*",))),
        Gold("preference", (("tee", "tees", "grüntee"),)),
        Gold("dated plan", (("zahnarzt*",),)),
        Gold("remember that", (("erdnuss*", "erdnüss*"),)),
        Gold("hobby", (("geige*",),)),
    ),
    forgotten=(),
    person_words=_words(
        "krümel kater* katze* krankenpfleg* kinderkrankenhaus münchen lena schwester* tee "
        "zahnarzt* erdnuss* erdnüss* geige*"
    ),
)

CHINESE = Script(
    "zh",
    "林晓",
    before=(
        "你好！我叫林晓，很高兴认识你。",
        "我养了一只橘猫，叫豆豆。",
        "我在儿童医院当护士。",
        "我住在成都，离锦江不远。",
        "我哥哥林涛在深圳当程序员。",
        "比起咖啡，我更喜欢喝茶，尤其是绿茶。",
        "我12月3日上午9点要去看牙医。",
        "记住，我对花生过敏。",
        "豆豆今天早上把桌上的杯子打翻了，真调皮。",
        "今晚做什么菜好？要快一点的。",
    ),
    after=(
        "我又来了！",
        "我住在哪个城市？",
        "我的猫叫什么名字？",
        "我最近开始在周末学古筝。",
        "你知道我是做什么工作的吗？",
        "你都记得我哪些事？",
        "谢谢，今天就到这里。",
    ),
    gold=(
        Gold("pet", (("豆豆",), ("猫",))),
        Gold("job", (("护士",),)),
        Gold("city", (("成都",),)),
        Gold("sibling", (("林涛",), ("哥",))),
        Gold("preference", (("茶",),)),
        Gold("dated plan", (("牙",),)),
        Gold("remember that", (("花生",),)),
        Gold("hobby", (("古筝",),)),
    ),
    forgotten=(),
    person_words=_words("豆豆 猫 护士 医院 成都 林涛 哥哥 茶 牙 花生 古筝"),
)

# Issue 45's second conversation: a move, a relative, a reminder and a forget asked in everyday
# words, and five recall questions after the restart (a right answer names what was said).
SECOND = Script(
    "en",
    "Maya",
    before=(
        "Hey there, I'm Maya.",
        "I just moved from Bristol to Glasgow last week.",
        "My new flat is on Byres Road, right above a bakery.",
        "My grandfather Tomas turns 90 next month.",
        "He was a carpenter for forty years and still carves spoons.",
        "I teach chemistry at a secondary school.",
        "Can you remind me tomorrow at 6pm to call my grandfather?",
        "My locker code at the gym is 5821.",
        "Oh, and can you delete my locker code? I shouldn't have shared it.",
        "I'm allergic to shellfish, so no prawns for me.",
    ),
    after=(
        "Morning!",
        "Where do I live now?",
        "What's my grandfather's name?",
        "What subject do I teach?",
        "What am I allergic to?",
        "How old is my grandfather turning?",
        "Thanks, bye!",
    ),
    gold=(
        Gold("move", (("glasgow",),)),
        Gold("flat", (("byres",),)),
        Gold("relative", (("tomas",),)),
        Gold("job", (("chemistry",),)),
        Gold("allergy", (("shellfish", "prawns"),)),
    ),
    forgotten=("5821",),
    person_words=_words(
        "glasgow bristol byres bakery tomas grandfather carpenter spoons chemistry school "
        "shellfish prawns 5821 locker"
    ),
    questions=(
        ("Where do I live now?", ("glasgow", "byres")),
        ("What's my grandfather's name?", ("tomas",)),
        ("What subject do I teach?", ("chemistry",)),
        ("What am I allergic to?", ("shellfish", "prawns")),
        ("How old is my grandfather turning?", ("90", "ninety")),
    ),
    reminders=1,
    name="en2",
)

SCRIPTS = {s.name or s.language: s for s in (ENGLISH, GERMAN, CHINESE, SECOND)}

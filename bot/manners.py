"""Group manners (ORCH-10): whether a message nobody spoke to the bot reaches the chat model, decided on the CPU.

    mode        spoken to (mention, reply, name)   a question its way (score >= 0.6)   other talk
    addressed   answered                           observed                           observed
    chime-in    answered                           answered, at most 5 per 100        observed
    all         answered                           answered                           answered (the model may [SKIP])

The score adds what the bot already has, with no model and no store read on the way (``Talk`` keeps it):

    a question (?, or a question word first)                 +0.30
    an open call ("anyone", "can someone", "any idea")        +0.20
    words of the bot's own last turns here (2+ / 1)          +0.35 / +0.15
    words of this place's memories (2+ / 1)                  +0.20 / +0.10
    the bot spoke here in the last 3 minutes, and this       +0.15
    shares its words or comes from the person it answered
    spoken to someone else (a mention, a reply, their name)  -0.60
    a busy channel (per message a minute past 4)             -0.05 each, at most -0.30

Between 0.45 and 0.6 the optional judge (a one-token yes/no of the extraction model) decides; without one, no.
A thanks to the bot right after it answered that person is acknowledged with a reaction, with no model call.
Unanswered messages are observed: stored, kept as the next answered turn's context, extracted in batches.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import prompts
from memory import AsyncRunner, MemoryEngine, Mode, NoAnswer, PlaceModes, is_pair, mode_of, spaced
from memory.models import Visibility

from .assembly import Turn
from .resolution import Resolver
from .turn.mode import names
from .types import IncomingMessage, Verdict

log = logging.getLogger(__name__)

ANSWER_AT, BORDERLINE_AT = 0.6, 0.45
# at most 5 chime-ins over the last 100 messages not spoken to the bot
CHIME_WINDOW, CHIME_CAP = (
    100,
    5,
)
RECENT_S = 180.0  # a bot turn this recent makes a follow-up likely to be for it
BUSY_FREE_PER_MIN = (
    4  # past this many messages a minute the bot keeps out more (a fast room does not need it)
)
MEMORY_WORDS_TTL_S = (
    600.0  # a place's memory words are read again after this long (off the decision's path)
)
ACK = "👍"  # one both platforms take as a reaction (Telegram allows only its own short list)

_WORD = re.compile(r"[^\W_][\w']+")
READ_CHARS = 4_000  # a message's words are read from its start (a 1 MB paste: 551 ms before)
FORM = 5  # letters of a word compared (endings differ: "закваску", "закваске"; "knot", "knots")
QUESTION_MARKS = "?？؟"
_QUESTION_START = re.compile(
    r"^(?:who|what|when|where|why|how|which|whose|is|are|was|were|do|does|did|can|could|would|should|will|shall|any|anyone)\b",
    re.IGNORECASE,
)
_OPEN_CALL = re.compile(
    r"\b(?:anyone|anybody|someone|somebody|any idea|any ideas|any tips|does everyone)\b",
    re.IGNORECASE,
)
_THANKS = re.compile(
    r"^\W*(?:thanks?(?: you)?|thx|ty|cheers|perfect|great|awesome|nice|got it|ok(?:ay)?)\b[\s\W]*\w{0,12}[\s\W]*$",
    re.IGNORECASE,
)
_STOP_WORDS = (  # words too common to tell what a message is about
    "the and for you your are was were has have had this that with from but not all any can could would should will "
    "just like what when where who why how which there their they them then than its it's i'm you're don't does did "
    "about into out our ours his her hers she him also very really some more most much many been being get got yes yeah "
    "lol haha okay well know think going one two today tomorrow tonight"
)
_STOP = frozenset(_STOP_WORDS.split())


def words(text: str) -> frozenset[str]:
    """Content words: lowercase, three letters or more in any alphabet, or a pair of Chinese,
    Japanese or Thai characters; no stop words."""
    found = _WORD.findall(spaced(text[:READ_CHARS].lower(), little=False))
    return frozenset(w for w in found if w not in _STOP and (len(w) >= 3 or is_pair(w)))


def _forms(found: frozenset[str]) -> frozenset[str]:
    """Words by their first FORM letters: "закваску" and "закваске", "starter" and "starters" meet."""
    return frozenset(w[:FORM] for w in found)


OBSERVE = Verdict(False, why="not for the bot")


@dataclass(slots=True)
class Talk:
    """What the decision reads of one place, kept in memory as messages pass (never a store read)."""

    seen: deque[float] = field(default_factory=lambda: deque(maxlen=64))  # when messages arrived
    bot_at: float = -1e18  # when the bot last spoke here
    bot_answered: str = ""  # the platform user id it answered then
    # its last turns' words
    bot_words: deque[frozenset[str]] = field(default_factory=lambda: deque(maxlen=3))
    memory_words: frozenset[str] = frozenset()
    memory_at: float = -1e18
    # per unaddressed message
    chimes: deque[bool] = field(default_factory=lambda: deque(maxlen=CHIME_WINDOW))

    def busy(self, now: float) -> int:
        """Messages in the last minute."""
        return sum(1 for t in self.seen if now - t <= 60.0)

    def spoken_words(self) -> frozenset[str]:
        return frozenset().union(*self.bot_words) if self.bot_words else frozenset()


def _to_someone_else(message: IncomingMessage, text: str) -> bool:
    """A mention or reply of another person, or a message opening with a name of someone here ("Dana, ...")."""
    if message.mentions:
        return True
    head = (
        text.split(",", 1)[0].split(":", 1)[0].strip().lower()
        if re.match(r"^\s*[\w .'-]{2,40}[,:]", text)
        else ""
    )
    return bool(head) and any(
        head == name.lower() or head == name.lower().split()[0] for _, name in message.participants
    )


def score(message: IncomingMessage, talk: Talk, now: float) -> float:
    """The chime-in score of the table in the module docstring."""
    text = message.text.strip()
    said = _forms(words(text))
    asks = any(mark in text for mark in QUESTION_MARKS) or _QUESTION_START.match(text)
    value = 0.3 if asks else 0.0
    value += 0.2 if _OPEN_CALL.search(text) else 0.0
    shared = len(said & _forms(talk.spoken_words()))
    value += 0.35 if shared >= 2 else 0.15 if shared == 1 else 0.0
    known = len(said & _forms(talk.memory_words))
    value += 0.2 if known >= 2 else 0.1 if known == 1 else 0.0
    # just after the bot spoke, a message on its words, or from the person it answered (not a call to the room),
    # is likely the conversation with it going on
    going_on = shared or (message.author_id == talk.bot_answered and not _OPEN_CALL.search(text))
    value += 0.15 if going_on and now - talk.bot_at <= RECENT_S else 0.0
    value -= 0.6 if _to_someone_else(message, text) else 0.0
    value -= min(0.3, 0.05 * max(0, talk.busy(now) - BUSY_FREE_PER_MIN))
    return round(value, 3)


def acknowledgement(message: IncomingMessage, talk: Talk, now: float) -> str | None:
    """A reaction for a thanks to the bot's last answer, by the person it answered, soon after."""
    recent = now - talk.bot_at <= RECENT_S and talk.bot_answered == message.author_id
    # a thanks is short; and the pattern never meets a long string (backtracking)
    short = len(message.text) <= 40
    return (
        ACK
        if recent and short and not message.mentions and _THANKS.match(message.text.strip())
        else None
    )


def decide(mode: Mode, message: IncomingMessage, talk: Talk, now: float, bot_name: str) -> Verdict:
    """The CPU decision for a message not spoken to the bot (a mention or a reply never comes here)."""
    if names(message.text, bot_name):
        return Verdict(True, why="named")
    if mode is Mode.ALL:
        return Verdict(True, why="mode all")
    ack = acknowledgement(message, talk, now)
    if ack is not None:
        return Verdict(False, ack, why="thanks")
    if mode is Mode.ADDRESSED:
        return OBSERVE
    value = score(message, talk, now)
    if value < BORDERLINE_AT:
        return Verdict(False, score=value, why="low score")
    if sum(talk.chimes) >= CHIME_CAP:
        return Verdict(False, score=value, why="chime-in cap")
    return Verdict(
        value >= ANSWER_AT, score=value, why="score" if value >= ANSWER_AT else "borderline"
    )


# (recent talk, message) -> is it for the bot? (a one-token yes/no)
Judge = Callable[[str, str], Awaitable[bool]]


class GroupManners:
    """The decision with its per-place state: ``decide`` for each message not spoken to the bot, ``spoke`` after
    each reply. ``memory_words`` is how a place's memory words are read (on the memory thread, by the caller)."""

    def __init__(
        self,
        bot_name: Callable[[], str],
        judge: Judge | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.bot_name, self.judge, self.clock = bot_name, judge, clock
        self._talk: dict[str, Talk] = {}

    def talk(self, channel_key: str) -> Talk:
        return self._talk.setdefault(channel_key, Talk())

    def stale(self, channel_key: str) -> bool:
        """The place's memory words are due to be read again."""
        return self.clock() - self.talk(channel_key).memory_at > MEMORY_WORDS_TTL_S

    def learn_memories(self, channel_key: str, texts: Iterable[str]) -> None:
        talk = self.talk(channel_key)
        talk.memory_words = frozenset().union(*(words(t) for t in texts))
        talk.memory_at = self.clock()

    async def decide(self, mode: Mode, message: IncomingMessage, channel_key: str) -> Verdict:
        talk, now = self.talk(channel_key), self.clock()
        talk.seen.append(now)
        verdict = decide(mode, message, talk, now, self.bot_name())
        if verdict.why == "borderline" and self.judge is not None:
            verdict = Verdict(
                await self.judge(self._recent(talk), message.text),
                score=verdict.score,
                why="judged",
            )
        if mode is not Mode.ALL and verdict.why != "named":
            talk.chimes.append(verdict.answer)
        return verdict

    def spoke(self, channel_key: str, answered_user_id: str, text: str) -> None:
        """The bot answered someone here: its words and the time feed the next decisions."""
        talk = self.talk(channel_key)
        talk.seen.append(self.clock())
        talk.bot_at, talk.bot_answered = self.clock(), answered_user_id
        talk.bot_words.append(words(text))

    def _recent(self, talk: Talk) -> str:
        return " ".join(sorted(talk.spoken_words()))[:400]


class PlaceReads:
    """What the decision reads of a place in the store, from the event loop: one hop each."""

    def __init__(self, engine: MemoryEngine, resolver: Resolver, runner: AsyncRunner) -> None:
        self.engine, self.resolver, self.runner = engine, resolver, runner

    async def mode(self, channel_key: str, listening: bool) -> Mode:
        return await self.runner.run(place_mode, self.engine.place_modes, channel_key, listening)

    async def memory_texts(self, message: IncomingMessage) -> list[str]:
        return await self.runner.run(place_memory_texts, self.engine, self.resolver, message)


def place_mode(modes: PlaceModes, channel_key: str, listening: bool) -> Mode:
    """The place's mode: what its admins set, else chime-in in a channel the operator listed, else addressed."""
    return modes.get(channel_key) or (Mode.CHIME_IN if listening else Mode.ADDRESSED)


def place_memory_texts(
    engine: MemoryEngine, resolver: Resolver, message: IncomingMessage, limit: int = 60
) -> list[str]:
    """The recent shared memories this place may see (never a private one: the decision must not hint at it)."""
    ctx = resolver.peek(message).ctx
    found = engine.memory_rows.listing(ctx.memory_partitions(), order="recent", limit=limit)
    return [f"{m.subject} {m.content}" for m in found if m.visibility is not Visibility.PRIVATE]


class ModelJudge:
    """The borderline cases' one-word yes/no on the extraction model (``COMPANION_MANNERS_JUDGE``, off by default):
    a few tokens of the cheaper model instead of a full reply of the chat model. A failing model says no."""

    def __init__(
        self, ask: Callable[[str, str], Awaitable[str]], bot_name: Callable[[], str]
    ) -> None:
        self.ask, self.bot_name = ask, bot_name

    async def __call__(self, recent: str, text: str) -> bool:
        user = prompts.render(
            "manners_judge",
            bot_name=self.bot_name(),
            recent=json.dumps(recent),
            message=json.dumps(text[:1000]),
        )
        try:
            answer = await self.ask("", user)
        except NoAnswer:
            log.warning("the manners judge did not answer; the message is observed")
            return False
        return answer.strip().lower().lstrip("\"'*").startswith("yes")


_SAYS = {
    Mode.ADDRESSED: "I speak here only when spoken to: a mention, a reply to me, or my name.",
    Mode.CHIME_IN: "I speak when spoken to, and now and then when a question looks meant for me (at most 5 in 100 messages).",
    Mode.ALL: "every message here reaches me, and I answer when I have something to add.",
}


_CHANGE = "Admins change it with /manners addressed|chime-in|all."


def manners_command(engine: MemoryEngine, arg: str, turn: Turn) -> str:
    """/manners [addressed|chime-in|all]: shows this place's mode; its admins (or the owner) change it."""
    if turn.ctx.is_dm:
        return "In our private chat I answer every message. /manners sets how I behave in a channel or group."
    modes, key = engine.place_modes, turn.channel_key
    if not arg:
        mode = modes.get(key)
        if mode is None:
            return (
                "No mode is set here, so I use addressed (chime-in in a channel the operator listed for me). "
                + _CHANGE
            )
        return f"Here I'm in {mode.value} mode: {_SAYS[mode]} {_CHANGE}"
    mode = mode_of(arg)
    if not turn.ctx.admin:
        return "Only this place's admins (Manage Server on Discord, group admins on Telegram) can change my manners here."
    modes.set(key, mode, turn.ctx.guild_id)
    return f"Done: {mode.value} mode here. {_SAYS[mode]}"

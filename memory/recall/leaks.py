"""The leak check on the way out (SEC-6): defence in depth behind the partition filter (SEC-1).

Before a reply is posted (in a server channel, a group, a voice channel, and a DM: another person's DM is a shared
place for what someone else said) and before a tool call runs, the bot asks ``LeakCheck.check(ctx, text, seen)``
which memories, and which messages of the last week, that place may not see the text would reveal (a message:
words said and not yet, or never, made a memory). The text is read with the words it hides unmasked
(``memory.evasions``: spelled digits in English and German, look-alike letters, leet, hyphens,
spaced letters, backwards, a word in two halves, base64), after the end of the bot's last reply
there (a word split over two replies):

    reply words -> distinctive? -> held by a live memory outside the place's partitions? -> seen by the place? -> leak
                   (a weight)      (read off the word index: which rows hold the word)      (no)

A word's weight says how much it gives away. A code or a long number ("X4471Q", "4471") and a word rare in
English weigh 2; a less common word ("passport", "secretly") 1; a common one ("moving", "coffee"), and any
word held by more than 2% (or 200) of the store's memories, 0. Rarity in English is the word's rank in the MiniLM
vocabulary, whose whole words are ordered by how often they occur (``the`` is 1996, ``reykjavik`` 28559);
a word it lacks is rarer still. A memory leaks when the words it shares with the reply, none of them seen
by the place, weigh 2 or more: "Reykjavik" or "X4471Q" alone, "passport" with "secretly", never "moving to
the coffee place in the morning". Seen means: in ``seen`` (the names), in a live memory the place may see,
or in a message of a channel the asker may read (the turn itself was stored before the model was asked,
so it counts; ``said`` is the turn's words when it was not). Who said a word matters: a word of a DM-only
row (a DM-private memory, a DM's message, the operator's memory) counts as said only when its knower (the
DM's person, the owner) said it. Another person typing it in the group, or a photo of theirs whose
caption holds it, is a guess or a leak carried in, never a licence to repeat it.

A ``Leak`` carries the memory id and the kind of partition it sits in (what the bot logs) and the words
(for the caller only: they are never logged, and never put into a prompt of the shared place).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..evasions import fold, unmasked
from ..scopes import RecallContext, message_partition, placeholders
from ..storage.corpus import Filter, MemoryCorpus, MessageCorpus, live_memories
from ..unspaced import has_unspaced

ASSETS = Path(__file__).parents[1] / "assets"
MAX_REPLY_CHARS = 20_000  # a reply is capped long before this; past it nothing more is read
COMMON_RANK = 7_000  # vocabulary ids below this are the ~5,000 commonest words: they tell nothing
RARE_RANK = 17_000  # ids from here on (and words the vocabulary lacks) are rare in English
# A word held by more memories than 2% of them, or 200, is common in this store (but any word held by 20 or fewer
# is not); this also bounds the index walk of ``holders`` to a few hundred rows a word.
STORE_COMMON_SHARE, STORE_COMMON_ROWS, STORE_COMMON_FLOOR = 0.02, 200, 20
LEAK_WEIGHT = (
    2  # what the unseen words a memory shares with a reply must weigh together to count as a leak
)
# where a memory's words are (not its partition token)
MEMORY_COLUMNS = (
    "subject",
    "content",
    "tags",
)
MESSAGE_COLUMNS = ("content",)  # what was said (not the speaker's name or the quoted context)
# Messages this recent are read too: extraction and the daily reflection have long run by then, and what was worth
# keeping is a memory. A word said in more than this many messages is the talk of the place: not looked for there.
RECENT_MESSAGES_S, MESSAGE_COMMON_ROWS = 7 * 86_400.0, 500
YEAR = re.compile(r"(19|20)\d\d")
# the bot's last reply in the place, this recent, is read before a new one (its last characters)
FOLLOWS_S, FOLLOWS_CHARS = 600.0, 200
SeenWords = dict[str, tuple[str, int]]  # stem -> (the word as written, its weight)
# a row's id, its kind of place, the one person who may know it ('' for anyone of a server), and
# which of the reply's stems it holds
Held = tuple[str, str, str, set[str]]


@dataclass(frozen=True, slots=True)
class Leak:
    """A memory the place may not see that a reply would reveal. ``words``: never log them."""

    memory_id: str  # or a message's id, for the kinds dm-message and server-message
    kind: str  # dm-private | owner | other-server-lore | server | portable (partition_kind) | dm-message | server-message
    words: tuple[str, ...]


class LeakCheck:
    """One per store; ``check`` runs on the memory thread, a few milliseconds a reply (see the README's figure)."""

    def __init__(
        self, memories: MemoryCorpus, messages: MessageCorpus, now: Callable[[], float]
    ) -> None:
        self.memories, self.messages, self.now = memories, messages, now

    def check(
        self, ctx: RecallContext, reply: str, seen: str = "", said: str = ""
    ) -> tuple[Leak, ...]:
        """The memories and recent messages outside ``ctx``'s view whose distinctive words ``reply`` repeats (as
        written, or hidden: ``memory.evasions``), unseen by the place.

        :param ctx: the place the reply is for (its partitions decide what is outside; a DM is such a place too:
            only its own person's memories are inside it).
        :param reply: the text about to be posted, or the arguments of a tool call about to run.
        :param seen: text the place has seen from no person in particular (names, the bot's name).
        :param said: what the asker said in this turn, which the store may not hold (/privacy
            off): it counts as the asker's words, like their stored messages.
        """
        # a word or a code split over two replies ("... Dr Wombat" then "son."): read with the end of
        # the last one here
        before = self.messages.last_reply(ctx.platform, ctx.channel_id, self.now() - FOLLOWS_S)
        words = self._telling(f"{before[-FOLLOWS_CHARS:]}\n{reply}" if before else reply, seen)
        if not words:
            return ()
        outside = [*self._in_memories(ctx, words), *self._in_messages(ctx, words)]
        unseen = self._unseen(ctx, words, outside, said)
        return tuple(sorted(unseen, key=lambda leak: (leak.kind, leak.memory_id)))

    def _in_memories(self, ctx: RecallContext, words: SeenWords) -> list[Held]:
        """Live memories outside the place's partitions that hold enough of the words."""
        holders = self.memories.holders(
            {stem: raw for stem, (raw, _) in words.items()}, MEMORY_COLUMNS
        )
        heavy = {rid for rid, stems in holders.items() if _weight(stems, words) >= LEAK_WEIGHT}
        if not heavy:
            return []
        mine = ctx.memory_partitions()
        keys = self.memories.keys(heavy, live_memories("t", self.now()))
        return [
            (row_id, partition_kind(key), knower(key), holders[rid])
            for rid, (row_id, key) in keys.items()
            if key not in mine
        ]

    def _in_messages(self, ctx: RecallContext, words: SeenWords) -> list[Held]:
        """Words said lately where this place cannot read them, not yet (or never) made a memory: Alice's "my
        therapist is Dr Wombatson" in her DM, before extraction ran, is not for Bob's DM or the group."""
        holders = self.messages.holders(
            {stem: raw for stem, (raw, _) in words.items()}, MESSAGE_COLUMNS, MESSAGE_COMMON_ROWS
        )
        heavy = {rid for rid, stems in holders.items() if _weight(stems, words) >= LEAK_WEIGHT}
        if not heavy:
            return []
        recent = Filter("t.created_at >= ?", (self.now() - RECENT_MESSAGES_S,))
        keys = self.messages.keys(heavy, recent & _unreadable(ctx))
        return [
            (row_id, message_kind(key), knower(key), holders[rid])
            for rid, (row_id, key) in keys.items()
        ]

    def _unseen(
        self, ctx: RecallContext, words: SeenWords, outside: list[Held], said: str
    ) -> list[Leak]:
        """The rows of ``outside`` whose words the place has not seen elsewhere (a memory it may
        see, a message it may read) still weigh enough to give them away. A word of a DM-only row
        was seen in a message only if its knower said it: Bob typing Alice's therapist's name in
        the group (or a photo of her card: its caption is stored as his words) is a guess or a
        leak, not her word."""
        shown = self._shown(ctx, {stem for *_, stems in outside for stem in stems}, words)
        suspects = [(row, kind, who, stems - shown) for row, kind, who, stems in outside]
        suspects = [found for found in suspects if _weight(found[3], words) >= LEAK_WEIGHT]
        heard = {
            who: self._said_here(
                ctx, set().union(*(s[3] for s in suspects if s[2] == who)), words, who
            )
            for who in {s[2] for s in suspects}
        }
        own = self._told(said, {stem for *_, stems in suspects for stem in stems})
        leaks = []
        for row_id, kind, who, stems in suspects:
            left = stems - heard[who] - (own if who in ("", ctx.speaker_id) else set())
            if _weight(left, words) >= LEAK_WEIGHT:
                leaks.append(Leak(row_id, kind, tuple(sorted(words[s][0] for s in left))))
        return leaks

    def _told(self, said: str, stems: set[str]) -> set[str]:
        """The stems among ``stems`` that ``said`` holds."""
        if not said or not stems:
            return set()
        return {s for _, s in self.memories.fts.words(fold(said), MAX_REPLY_CHARS)} & stems

    def _telling(self, reply: str, seen: str) -> SeenWords:
        """stem -> (word, weight) for the reply's words (hidden ones too) that weigh something and are not in ``seen``."""
        plain, hidden = unmasked(reply[:MAX_REPLY_CHARS], _vocabulary().__contains__)
        said = {stem for _, stem in self.memories.fts.words(fold(seen), MAX_REPLY_CHARS)}
        if hidden:  # the place may have seen a hidden word hidden the same way (only then is what it saw unmasked)
            said |= {
                stem
                for _, stem in self.memories.fts.words(" ".join(unmasked(seen)[1]), MAX_REPLY_CHARS)
            }
        found = self.memories.fts.words(f"{plain}\n{' '.join(hidden)}", 2 * MAX_REPLY_CHARS)
        weighed = ((raw, stem, self.weight(raw, stem)) for raw, stem in found if stem not in said)
        return {stem: (raw, weight) for raw, stem, weight in weighed if weight}

    def weight(self, raw: str, stem: str) -> int:
        """How much one word of a reply gives away: 0 (common), 1 (uncommon) or 2 (a code, a rare word)."""
        digits = sum(c.isdigit() for c in raw)
        if digits:
            return _number_weight(raw, digits)
        if has_unspaced(raw):
            # a pair of Chinese, Japanese... characters (``memory.unspaced``): a word or half of
            # one, and no ranking says how common: two of them unseen make a leak ("王医生": 王医, 医生),
            # one ("医生") not
            return 0 if self._common_in_store(raw, stem) else 1
        rank = _vocabulary().get(raw, RARE_RANK)
        if rank < COMMON_RANK or self._common_in_store(raw, stem):
            return 0
        return 1 if rank < RARE_RANK else 2

    def _common_in_store(self, raw: str, stem: str) -> bool:
        rows, total = self.memories.doc_freq(stem, raw)
        return rows > max(STORE_COMMON_FLOOR, min(STORE_COMMON_ROWS, STORE_COMMON_SHARE * total))

    def _shown(self, ctx: RecallContext, stems: set[str], words: SeenWords) -> set[str]:
        """The words among ``stems`` held by a live memory the place may see."""
        mine, live = ctx.memory_partitions(), live_memories("t", self.now())
        return {stem for stem in stems if self.memories.has_word(words[stem][0], mine, live)}

    def _said_here(
        self, ctx: RecallContext, stems: set[str], words: SeenWords, by: str
    ) -> set[str]:
        """The words among ``stems`` said in a message the asker may read (this channel, readable
        ones of its guild); by ``by`` alone when given."""
        talk = (message_partition(ctx.guild_id, ctx.speaker_id),)
        channels = ctx.channels()
        readable = Filter(
            f"t.platform = ? AND t.channel_id IN ({placeholders(channels)})",
            (ctx.platform, *channels),
        )
        if by:
            readable &= Filter("t.author_id = ?", (by,))
        return {stem for stem in stems if self.messages.has_word(words[stem][0], talk, readable)}


def _unreadable(ctx: RecallContext) -> Filter:
    """Messages this place cannot read: not of its guild's readable channels (of its DM, in a DM), and in a DM not
    the person's own words elsewhere (what a person says in a server is theirs to hear again in their DM, SEC-1)."""
    here = message_partition(ctx.guild_id, ctx.speaker_id)
    if ctx.is_dm:
        return Filter("NOT (t.partition_key = ? OR t.author_id = ?)", (here, ctx.speaker_id))
    channels = ctx.channels()
    readable = (
        f"t.partition_key = ? AND t.platform = ? AND t.channel_id IN ({placeholders(channels)})"
    )
    return Filter(f"NOT ({readable})", (here, ctx.platform, *channels))


def knower(key: str) -> str:
    """The one person who may know what a row of this partition holds: a DM's person, a person's
    DM-private memories' owner, the operator of owner memories; '' for a server's (anyone there)."""
    parts = key.split("|")
    if parts[0] == "dm" or parts[0] == "owner" or (parts[0] == "user" and parts[2] == "private"):
        return parts[1]
    return ""


def message_kind(key: str) -> str:
    """What kind of place a message was said in, for the log (no person or server id in it)."""
    return "dm-message" if key.startswith("dm|") else "server-message"


def partition_kind(key: str) -> str:
    """What kind of place a memory partition is, for the log (no person or server id in it)."""
    parts = key.split("|")
    if parts[0] == "owner":
        return "owner"
    if parts[0] == "guild":
        return "other-server-lore"
    if parts[2] == "private":
        return "dm-private"
    return "server" if len(parts) > 3 else "portable"


def _number_weight(raw: str, digits: int) -> int:
    """A code ("x4471q") or a long number ("4417", "123456") gives a fact away; a year ("1987") a little; a short
    number or a time ("3", "200", "10am") nothing."""
    if YEAR.fullmatch(raw):
        return 1
    if raw.isdigit():
        return 2 if digits >= 4 else 0
    return 2 if digits >= 3 else 0


def _weight(stems: set[str], words: dict[str, tuple[str, int]]) -> int:
    return sum(words[s][1] for s in stems)


@cache
def _vocabulary() -> dict[str, int]:
    """Whole words of the MiniLM (BERT uncased) vocabulary by id, which follows how common a word is."""
    vocab = json.loads((ASSETS / "minilm-tokenizer.json").read_text(encoding="utf-8"))["model"][
        "vocab"
    ]
    return {word: rank for word, rank in vocab.items() if not word.startswith(("##", "["))}

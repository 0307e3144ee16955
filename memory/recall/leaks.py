"""The leak check on the way out (SEC-6): defence in depth behind the partition filter (SEC-1).

Before a reply is posted in a shared place (a server channel, a group, a voice channel), the bot asks
``LeakCheck.check(ctx, reply, seen)`` which memories that place may not see the reply would reveal:

    reply words -> distinctive? -> held by a live memory outside the place's partitions? -> seen by the place? -> leak
                   (a weight)      (read off the word index: which rows hold the word)      (no)

A word's weight says how much it gives away. A code or a long number ("X4471Q", "4471") and a word rare in
English weigh 2; a less common word ("passport", "secretly") 1; a common one ("moving", "coffee"), and any
word held by more than 2% (or 200) of the store's memories, 0. Rarity in English is the word's rank in the MiniLM
vocabulary, whose whole words are ordered by how often they occur (``the`` is 1996, ``reykjavik`` 28559);
a word it lacks is rarer still. A memory leaks when the words it shares with the reply, none of them seen
by the place, weigh 2 or more: "Reykjavik" or "X4471Q" alone, "passport" with "secretly", never "moving to
the coffee place in the morning". Seen means: in ``seen`` (the turn, the names, the recent conversation the
caller showed the model), in a live memory the place may see, or in a message of a channel the asker may
read (the turn itself was stored before the model was asked, so it counts).

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

from ..scopes import RecallContext, message_partition, placeholders
from ..storage.corpus import Filter, MemoryCorpus, MessageCorpus, live_memories

ASSETS = Path(__file__).parents[1] / "assets"
MAX_REPLY_CHARS = 20_000  # a reply is capped long before this; past it nothing more is read
COMMON_RANK = 7_000  # vocabulary ids below this are the ~5,000 commonest words: they tell nothing
RARE_RANK = 17_000  # ids from here on (and words the vocabulary lacks) are rare in English
# A word held by more memories than 2% of them, or 200, is common in this store (but any word held by 20 or fewer
# is not); this also bounds the index walk of ``holders`` to a few hundred rows a word.
STORE_COMMON_SHARE, STORE_COMMON_ROWS, STORE_COMMON_FLOOR = 0.02, 200, 20
LEAK_WEIGHT = 2  # what the unseen words a memory shares with a reply must weigh together to count as a leak
MEMORY_COLUMNS = ("subject", "content", "tags")  # where a memory's words are (not its partition token)
YEAR = re.compile(r"(19|20)\d\d")


@dataclass(frozen=True, slots=True)
class Leak:
    """A memory the place may not see that a reply would reveal. ``words``: never log them."""

    memory_id: str
    kind: str  # dm-private | owner | other-server-lore | server | portable (partition_kind)
    words: tuple[str, ...]


class LeakCheck:
    """One per store; ``check`` runs on the memory thread, a few milliseconds a reply (see the README's figure)."""

    def __init__(self, memories: MemoryCorpus, messages: MessageCorpus, now: Callable[[], float]) -> None:
        self.memories, self.messages, self.now = memories, messages, now

    def check(self, ctx: RecallContext, reply: str, seen: str = "") -> tuple[Leak, ...]:
        """The memories outside ``ctx``'s partitions whose distinctive words ``reply`` repeats, unseen by the place.

        :param ctx: the place the reply is for (its partitions decide what is outside).
        :param reply: the text about to be posted.
        :param seen: text the place has seen that the store may not hold (names, the conversation shown).
        """
        words = self._telling(reply, seen)
        holders = self.memories.holders({stem: raw for stem, (raw, _) in words.items()}, MEMORY_COLUMNS)
        heavy = {rid for rid, stems in holders.items() if _weight(stems, words) >= LEAK_WEIGHT}
        if not heavy:
            return ()
        mine = ctx.memory_partitions()
        outside = {rid: found for rid, found in self.memories.keys(heavy, live_memories("t", self.now())).items() if found[1] not in mine}
        shown = self._shown(ctx, {stem for rid in outside for stem in holders[rid]}, words)
        suspects = {
            rid: (*found, holders[rid] - shown) for rid, found in outside.items() if _weight(holders[rid] - shown, words) >= LEAK_WEIGHT
        }
        said_here = self._said_here(ctx, {stem for *_, stems in suspects.values() for stem in stems}, words)
        leaks = (
            Leak(row_id, partition_kind(key), tuple(sorted(words[s][0] for s in stems - said_here)))
            for row_id, key, stems in suspects.values()
            if _weight(stems - said_here, words) >= LEAK_WEIGHT
        )
        return tuple(sorted(leaks, key=lambda leak: leak.memory_id))

    def _telling(self, reply: str, seen: str) -> dict[str, tuple[str, int]]:
        """stem -> (word, weight) for the reply's words that weigh something and are not in ``seen``."""
        said = {stem for _, stem in self.memories.fts.words(seen, MAX_REPLY_CHARS)}
        weighed = ((raw, stem, self.weight(raw, stem)) for raw, stem in self.memories.fts.words(reply, MAX_REPLY_CHARS) if stem not in said)
        return {stem: (raw, weight) for raw, stem, weight in weighed if weight}

    def weight(self, raw: str, stem: str) -> int:
        """How much one word of a reply gives away: 0 (common), 1 (uncommon) or 2 (a code, a rare word)."""
        digits = sum(c.isdigit() for c in raw)
        if digits:
            return _number_weight(raw, digits)
        rank = _vocabulary().get(raw, RARE_RANK)
        if rank < COMMON_RANK:
            return 0
        rows, total = self.memories.doc_freq(stem, raw)
        if rows > max(STORE_COMMON_FLOOR, min(STORE_COMMON_ROWS, STORE_COMMON_SHARE * total)):
            return 0
        return 1 if rank < RARE_RANK else 2

    def _shown(self, ctx: RecallContext, stems: set[str], words: dict[str, tuple[str, int]]) -> set[str]:
        """The words among ``stems`` held by a live memory the place may see."""
        mine, live = ctx.memory_partitions(), live_memories("t", self.now())
        return {stem for stem in stems if self.memories.has_word(words[stem][0], mine, live)}

    def _said_here(self, ctx: RecallContext, stems: set[str], words: dict[str, tuple[str, int]]) -> set[str]:
        """The words among ``stems`` said in a message the asker may read (this channel, readable ones of its guild)."""
        talk = (message_partition(ctx.guild_id, ctx.speaker_id),)
        channels = ctx.channels()
        readable = Filter(f"t.platform = ? AND t.channel_id IN ({placeholders(channels)})", (ctx.platform, *channels))
        return {stem for stem in stems if self.messages.has_word(words[stem][0], talk, readable)}


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
    vocab = json.loads((ASSETS / "minilm-tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return {word: rank for word, rank in vocab.items() if not word.startswith(("##", "["))}

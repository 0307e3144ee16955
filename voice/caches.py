"""Session caches for voice (VOICE-3): what a voice turn can take from memory without asking the store again.

    BehaviouralPool   per (guild, participant set): up to 64 behavioural + guidance memories, read once
                      from the store (most important first), re-ranked per turn by word overlap with the
                      turn, top N returned
    HistoryCache      one per session: recent conversation-history recalls, each kept 45 s; a new query
                      whose content words have Jaccard >= 0.6 with a cached query gets the cached result

Both are in-process and per session, like the warm memory: nothing here is persisted, and
``invalidate()`` drops every cached copy (forgetting must not leave forgotten text in a cache).

The lexical helpers (``tokens``, ``jaccard``, ``lexical_rerank``, ``FILLERS``) are shared with ``voice.warm``:
lower-cased words, the store's FTS stop words and spoken fillers removed, a plural ``s`` folded. No stemmer on purpose: a cache decision
must cost microseconds, and a rare miss only costs one ordinary recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from memory import STOP_WORDS, Clock, RecallContext, RecallFilters
from memory.models import FactKind, Memory

T = TypeVar("T")
WORD = re.compile(r"\w+")
# Spoken back-channel: acknowledges, asks nothing, says nothing about the topic (also used by voice.warm).
FILLERS = frozenset(
    [
        "yeah",
        "yea",
        "yes",
        "yep",
        "yup",
        "ya",
        "ok",
        "okay",
        "k",
        "kk",
        "mhm",
        "mm",
        "mmm",
        "hmm",
        "hm",
        "uh",
        "huh",
        "um",
        "umm",
        "ah",
        "oh",
        "ooh",
        "aha",
        "right",
        "sure",
        "cool",
        "nice",
        "great",
        "alright",
        "fine",
        "true",
        "totally",
        "exactly",
        "lol",
        "haha",
        "hah",
        "wow",
        "no",
        "nope",
        "nah",
        "thanks",
        "thank",
        "you",
        "got",
        "it",
        "i",
        "see",
        "gotcha",
        "and",
        "so",
        "well",
        "like",
    ]
)
NOISE = STOP_WORDS | FILLERS
PoolKey = tuple[str | None, frozenset[str]]  # (guild, the partitions its participant set may read)


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """VOICE-3 numbers. 64 and 45 s are Clanky's (seed 002); the Jaccard threshold is ours (see ``history_jaccard``)."""

    pool_size: int = 64
    pool_top_n: int = 8  # ORCH-2: "relevant behavioural memory (up to 8)"
    pool_kinds: tuple[FactKind, ...] = (FactKind.BEHAVIORAL, FactKind.GUIDANCE)
    history_ttl_s: float = 45.0
    # The seed names token Jaccard but no number. 0.6 after stop words: two short spoken queries that
    # share 3 of 4 content words (J = 3/5) still reuse; two differing content words (J <= 2/4 = 0.5) ask again.
    history_jaccard: float = 0.6
    history_entries: int = 8


# -- lexical helpers ------------------------------------------------------------------------------
def tokens(text: str) -> frozenset[str]:
    """Content words of a text: lower-cased, stop words, fillers and one-letter words dropped, plurals folded."""
    return frozenset(
        _fold(w) for w in WORD.findall((text or "").lower()) if w not in NOISE and len(w) > 1
    )


def _fold(word: str) -> str:
    # "tents" and "tent" should meet; "glass" and "bus" must stay whole.
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|; two empty sets are identical (1.0): neither says anything new."""
    return len(a & b) / len(a | b) if a or b else 1.0


def lexical_rerank(items: Sequence[T], text: str, content: Callable[[T], str]) -> list[T]:
    """Items ordered by how many of the turn's content words they share; ties keep the incoming order."""
    wanted = tokens(text)
    # sorted() is stable
    return sorted(items, key=lambda item: -len(wanted & tokens(content(item))))


# -- behavioural fact pool -------------------------------------------------------------------------
def pool_key(ctx: RecallContext) -> PoolKey:
    """The guild and its participant set, as the exact partitions they may read.

    Keyed by partitions rather than person ids: the same people can reach more (a participant's /share
    opt-in adds partitions), and a pool must never serve rows its context could not read (SEC-1).
    """
    return ctx.guild_id, frozenset(ctx.memory_partitions())


class Listing(Protocol):
    """What a pool reads its rules from: the store's listing of memories
    (``MemoryEngine.memory_rows``)."""

    def listing(
        self, partitions: tuple[str, ...] | None, filters: RecallFilters, order: str, limit: int
    ) -> list[Memory]: ...


class BehaviouralPool:
    """Behaviour rules for the people in a voice channel, loaded once per participant set, ranked per turn.

    A rule can matter without sharing a word with the turn ("keep voice answers short"), so rules that
    match no word are not dropped: they follow the matching ones in importance order, and ``top_n`` cuts.
    """

    def __init__(self, store: Listing, settings: CacheSettings = CacheSettings()) -> None:
        self.store, self.settings = store, settings
        self._pools: dict[PoolKey, tuple[Memory, ...]] = {}
        self.loads = 0  # store reads so far, for benchmarks and tests

    def facts(self, ctx: RecallContext, text: str, top_n: int | None = None) -> list[Memory]:
        """The pool's rules for this turn, best word match first."""
        ranked = lexical_rerank(self.pool(ctx), text, lambda m: f"{m.subject} {m.content}")
        return ranked[: top_n or self.settings.pool_top_n]

    def pool(self, ctx: RecallContext) -> tuple[Memory, ...]:
        key = pool_key(ctx)
        if (
            key not in self._pools
        ):  # someone joined or left: a new participant set reads its own pool
            self._pools[key] = self._load(ctx)
        return self._pools[key]

    def _load(self, ctx: RecallContext) -> tuple[Memory, ...]:
        self.loads += 1
        found = self.store.listing(
            ctx.memory_partitions(),
            RecallFilters(kinds=self.settings.pool_kinds),
            order="important",
            limit=self.settings.pool_size,
        )
        return tuple(found)

    def invalidate(self) -> None:
        """Drop every pool; the next turn reads the store again (after a forget, or a new rule was learned)."""
        self._pools.clear()


# -- conversation history cache --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    query: frozenset[str]
    value: T
    fetched_at: float
    scope: Hashable


class HistoryCache(Generic[T]):
    """Recent history recalls of one voice session, reused for a similar query within the TTL.

    An entry's age counts from its fetch, not its last reuse: a stream of similar questions would otherwise
    keep it alive forever and never see the turns said since. ``scope`` (e.g. the message partitions) must
    match too, so a result is never handed to a context that could not have read it.
    """

    def __init__(self, clock: Clock, settings: CacheSettings = CacheSettings()) -> None:
        self.clock, self.settings = clock, settings
        self._entries: list[_Entry[T]] = []
        self.hits = 0
        self.misses = 0

    def get_or_fetch(self, query: str, fetch: Callable[[str], T], *, scope: Hashable = None) -> T:
        cached = self.get(query, scope=scope)
        if cached is not None:
            return cached
        value = fetch(query)
        self.put(query, value, scope=scope)
        return value

    def get(self, query: str, *, scope: Hashable = None) -> T | None:
        """The most similar live entry's value, or None (and a miss is counted)."""
        self._expire()
        found = self._match(tokens(query), [e for e in self._entries if e.scope == scope])
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return found.value

    def _match(self, words: frozenset[str], live: list[_Entry[T]]) -> _Entry[T] | None:
        if (
            not words
        ):  # a filler ("yeah", "mhm") asks nothing new: the latest result stands (seed 002)
            return live[-1] if live else None
        scored = [(jaccard(words, e.query), i) for i, e in enumerate(live)]
        score, i = max(scored, default=(0.0, -1))  # on a tie the newer entry wins
        return live[i] if score >= self.settings.history_jaccard else None

    def put(self, query: str, value: T, *, scope: Hashable = None) -> None:
        self._entries.append(_Entry(tokens(query), value, self.clock.now(), scope))
        del self._entries[: -self.settings.history_entries]  # the oldest go first

    def _expire(self) -> None:
        cutoff = self.clock.now() - self.settings.history_ttl_s
        self._entries = [e for e in self._entries if e.fetched_at > cutoff]

    def invalidate(self) -> None:
        self._entries.clear()

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

"""Warm memory for a voice session (VOICE-2): skip retrieval while the topic holds.

Spoken conversation is many short turns on one topic; a full hybrid recall per turn costs latency the
speaker hears. A session keeps the last retrieval (the *warm snapshot*) and a topic fingerprint, an
exponential moving average of the turn embeddings, and decides per turn (the rule is Clanky's, seed 002,
and its thresholds are SPEC VOICE-2's):

    no snapshot, expired (300 s after its full retrieval) or another scope  ->  FULL
    low-signal turn ("yeah", "ok", "mhm", a word or two of filler)          ->  REUSE  (not even embedded)
    3/5 or more of its content words searched already in this topic         ->  REFRESH (not embedded either; REUSE if all)
    cosine(turn in context, fingerprint) >= 0.85                            ->  REUSE   (REFRESH if it has a word not yet searched)
    cosine < 0.65: the topic changed                                        ->  FULL   (fingerprint restarts at the turn)
    in between: the topic moved a little                                    ->  REFRESH (cheap lexical re-rank / BM25 top-up)

What a turn's embedding is: a spoken turn is short and leans on the turns before it ("we want to go next
weekend", "my old tent leaks"); embedded alone, MiniLM puts such on-topic turns at cosine 0.0-0.6 to the
fingerprint, so nearly every turn looked like a new topic. So the drift test lifts the turn by its context:
it compares the fingerprint with the turn's vector plus ``context_weight`` times the (normalised) sum of the
vectors of the topic's previous ``context_turns`` turns. Those vectors were made when their turns were
judged, so a turn costs ONE model run, the turn alone, which is also the vector a full retrieval searches
with. (Embedding the turn again after its context's text, as before, read follow-ups a little better but
doubled the model work: a two-text run cost ~4.3 ms against ~2.0 ms for one, which ate the warm path's
saving.) The weight bounds the lift: an unrelated turn (cosine ~0.1 alone) scores ~0.47-0.56 with an on-topic
context, under ``full_below`` (0.65); a follow-up at ~0.4 alone scores ~0.7. The context starts afresh at every full
retrieval (its turns belong to the old topic or to an expired snapshot), and fillers are not in it.

The thresholds are SPEC VOICE-2's (reuse at 0.85, full below 0.65); what the SPEC leaves free was tuned to them
on the bench's two scripted trips (``measure.bench_voice``: TOPICAL and NATURAL, 64 turns, a violin digression
and a return in each) and the tests' turns: a context weight of 0.6 over the topic's last three turns, and an
EMA factor of 0.4, keep every real change of topic at least 0.089 under 0.65, catch every return, and send the
fewest on-topic turns to a full retrieval (10, all NATURAL's: "we leave on friday morning"-like turns,
which MiniLM scores as unrelated whatever the context); docs/voice.md has the sweep. Between the two thresholds
a refresh costs only a BM25 top-up (~0.5 ms at 10,000 memories), so most on-topic turns take it and bring in
their new words' memories.

Known words: a turn at least three fifths of whose content words the topic's searches used already (its full
retrieval's and its refreshes' turns) is on that topic for any reader, so it is not embedded: it is refreshed,
BM25 searching only its new words. The SPEC has no such rule, so it may only take turns the SPEC would not send
to a full retrieval: with the earlier knobs, a share of 1/2 took two TOPICAL turns whose embedding scores under 0.65;
with these, every turn a share of 3/5 takes on the bench scripts and the tests' turns scores 0.74 or more by its
embedding (1/2: 0.68, too close) (``docs/voice.md``); a change of topic needs mostly new words
("my sister is learning the violin", "anyway, back to the camping trip" after the violin). The fingerprint
does not move on such turns: it is an average of what was embedded, and these agreed with it.

A turn said again (a repeated question, "what about the tent") is not embedded again: the session keeps the
vectors of its last ``vector_cache`` distinct turns, dropped with everything else by ``invalidate``.

The snapshot's type is the caller's (``S``): the two retrievals come in as callables in a ``Retrieval``, so
this module never needs the bot's assembler. ``memory_retrieval`` builds them over ``MemoryRecall``.
Each decision is logged, and ``stats`` counts them for the ``warm_hit_rate`` benchmark.

Known limit (the seed says so too): this is a deterministic gate. A topic shift that MiniLM scores in the
0.65-0.85 band gets only a lexical refresh until the snapshot expires; the TTL bounds how stale it gets.
So does one phrased mostly in the topic's own words (known words), though its new words are still searched.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

import numpy as np

from memory import Channel, Clock, Hit, MemoryRecall, RecallContext
from memory.models import Memory

from .caches import FILLERS, lexical_rerank, tokens

S = TypeVar("S")
Hits = tuple[Hit[Memory], ...]  # the memories found for a turn, best first
WORD = re.compile(r"[a-z']+")


class Decision(StrEnum):
    REUSE = "reuse"
    REFRESH = "refresh"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class WarmSettings:
    reuse_at: float = 0.85  # cosine at or above: same topic, the snapshot stands
    full_below: float = 0.65  # cosine below: new topic, retrieve from scratch (SPEC VOICE-2)
    # Weight of the newest turn in the fingerprint. The SPEC gives none; 0.4 averages over roughly the last
    # four turns (2 / alpha - 1), so one aside does not move the topic but two or three turns on a new one do.
    alpha: float = 0.4
    ttl_s: float = 300.0  # counted from the FULL retrieval: refreshes only re-rank what it found
    filler_max_words: int = (
        4  # a low-signal turn is at most this many words, all of them fillers...
    )
    min_chars: int = 3  # ...or fewer letters than this ("k", "ah")
    log_size: int = 256  # decisions kept for inspection; the counters cover the whole session
    context_turns: int = (
        3  # earlier turns of the topic whose vectors lift a turn (0: the turn alone)
    )
    context_weight: float = (
        0.6  # how much they lift it: bounded so context cannot carry an unrelated turn
    )
    # A turn with at least this share of its content words searched already in this topic is on it: refreshed
    # lexically without being embedded (None: every turn that is no filler is embedded). See "Known words" above.
    known_share: float | None = 0.6
    vector_cache: int = 64  # distinct turns whose vectors the session keeps, so a repeated turn is not embedded again


@dataclass(frozen=True, slots=True)
class Retrieval(Generic[S]):
    """How to fill a snapshot for one turn: ``full(text, vector)`` from scratch, ``lexical(text, warm, new_words)`` from
    the warm one (``new_words``: the turn's content words no search of this snapshot has used; may be empty).

    ``scope`` says whose memory the snapshot was read for (e.g. the recall partitions); a turn in another
    scope never gets the snapshot (SEC-1: a person who left the channel takes their memories along).
    """

    full: Callable[[str, np.ndarray | None], S]
    lexical: Callable[[str, S, frozenset[str]], S]
    scope: Hashable = None


@dataclass(frozen=True, slots=True)
class WarmRecord:
    at: float
    decision: Decision
    reason: str  # cold | expired | scope | low-signal | known-words | no-vector | similar | new-words | drift | moved
    similarity: float | None


@dataclass(frozen=True, slots=True)
class WarmResult(Generic[S]):
    snapshot: S
    record: WarmRecord


@dataclass(frozen=True, slots=True)
class WarmStats:
    """Counts over the session. A *hit* is a turn served without a full retrieval (reuse or refresh)."""

    reuse: int = 0
    refresh: int = 0
    full: int = 0

    @property
    def turns(self) -> int:
        return self.reuse + self.refresh + self.full

    @property
    def hits(self) -> int:
        return self.reuse + self.refresh

    @property
    def hit_rate(self) -> float:
        return self.hits / self.turns if self.turns else 0.0


@dataclass(frozen=True, slots=True)
class _Snapshot(Generic[S]):
    value: S
    taken_at: float
    scope: Hashable


def is_low_signal(text: str, settings: WarmSettings = WarmSettings()) -> bool:
    """Back-channel and fillers: nothing in them could change what memory is relevant."""
    words = WORD.findall((text or "").lower())
    if sum(len(w) for w in words) < settings.min_chars:
        return True
    return len(words) <= settings.filler_max_words and all(w in FILLERS for w in words)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / norm if norm else 0.0


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def in_context(vector: np.ndarray, context: Sequence[np.ndarray], weight: float) -> np.ndarray:
    """The turn's vector for the drift test: the turn plus ``weight`` times its context's direction (alone, with none)."""
    turn = np.asarray(vector, dtype=np.float32)
    if not context or not weight:
        return _unit(turn)
    direction = np.asarray(np.sum(context, axis=0), dtype=np.float32)
    return _unit(turn + weight * _unit(direction))


class WarmMemory(Generic[S]):
    """One voice session's warm snapshot and topic fingerprint. Not shared between sessions."""

    def __init__(
        self,
        embed: Callable[[Sequence[str]], np.ndarray | None],
        clock: Clock,
        settings: WarmSettings = WarmSettings(),
    ) -> None:
        """``embed``: query vectors for texts in one model run, or None when embeddings are off or failing."""
        self.embed, self.clock, self.settings = embed, clock, settings
        self._snapshot: _Snapshot[S] | None = None
        self._fingerprint: np.ndarray | None = None
        self._generation = 0  # bumped by invalidate(): a retrieval that raced a forget is not kept
        # the topic's latest turn vectors
        self._context: deque[np.ndarray] = deque(maxlen=max(1, settings.context_turns))
        # content words the snapshot's searches used (full and refreshes)
        self._searched: set[str] = set()
        self._vectors: dict[
            str, np.ndarray
        ] = {}  # turn text -> its vector, oldest first (``vector_cache``)
        self._counts = {d: 0 for d in Decision}
        self.log: deque[WarmRecord] = deque(maxlen=settings.log_size)

    def turn(self, text: str, retrieval: Retrieval[S]) -> WarmResult[S]:
        """The snapshot this turn should use, and why."""
        now = self.clock.now()
        warm, reason = self._live(now, retrieval.scope)
        if warm is None:  # even a filler needs a snapshot when nothing is warm
            return self._full(text, self._alone(text), retrieval, now, reason)
        if is_low_signal(
            text, self.settings
        ):  # not embedded: a filler must not pull the fingerprint
            return self._record(warm.value, Decision.REUSE, "low-signal", None, now)
        words = tokens(text)
        if self._mostly_searched(words):  # not embedded either: its words say it is on the topic
            if words <= self._searched:
                return self._record(warm.value, Decision.REUSE, "known-words", None, now)
            return self._refresh(text, words, warm, retrieval, now, None, "known-words")
        return self._judge(text, words, self._alone(text), warm, retrieval, now)

    def _mostly_searched(self, words: frozenset[str]) -> bool:
        share = self.settings.known_share
        return (
            share is not None and bool(words) and len(words & self._searched) >= share * len(words)
        )

    def _alone(self, text: str) -> np.ndarray | None:
        """The turn's own vector: one model run, or none for a turn the session embedded already."""
        vector = self._vectors.pop(text, None)
        if vector is None:
            vectors = self.embed([text])
            if vectors is None:
                return None
            vector = np.asarray(vectors[0], dtype=np.float32)
        self._vectors[text] = vector  # re-inserted: the newest stays, the oldest goes first
        if len(self._vectors) > self.settings.vector_cache:
            del self._vectors[next(iter(self._vectors))]
        return vector

    def _judge(
        self,
        text: str,
        words: frozenset[str],
        vector: np.ndarray | None,
        warm: _Snapshot[S],
        retrieval: Retrieval[S],
        now: float,
    ) -> WarmResult[S]:
        if vector is None or self._fingerprint is None:  # embeddings off or failing: be safe
            return self._full(text, vector, retrieval, now, "no-vector")
        context = (
            list(self._context)[-self.settings.context_turns :]
            if self.settings.context_turns
            else []
        )
        mixed = in_context(vector, context, self.settings.context_weight)
        similarity = cosine(mixed, self._fingerprint)
        if similarity < self.settings.full_below:
            return self._full(text, vector, retrieval, now, "drift", similarity)
        self._blend(mixed)
        self._context.append(vector)
        if similarity < self.settings.reuse_at:
            return self._refresh(text, words, warm, retrieval, now, similarity, "moved")
        if (
            words - self._searched
        ):  # same topic, but a word no search of it has seen: a top-up may find its memory
            return self._refresh(text, words, warm, retrieval, now, similarity, "new-words")
        return self._record(warm.value, Decision.REUSE, "similar", similarity, now)

    def _full(
        self,
        text,
        vector,
        retrieval: Retrieval[S],
        now: float,
        reason: str,
        similarity: float | None = None,
    ) -> WarmResult[S]:
        generation = self._generation
        value = retrieval.full(text, vector)
        if generation == self._generation:
            self._snapshot = _Snapshot(value, now, retrieval.scope)
            self._fingerprint = None if vector is None else np.asarray(vector, dtype=np.float32)
            self._context.clear()  # a new topic (or a fresh start): earlier turns are no context for it
            self._searched = set(tokens(text))
            if vector is not None and not is_low_signal(text, self.settings):
                self._context.append(np.asarray(vector, dtype=np.float32))
        return self._record(value, Decision.FULL, reason, similarity, now)

    def _refresh(
        self,
        text: str,
        words: frozenset[str],
        warm: _Snapshot[S],
        retrieval: Retrieval[S],
        now: float,
        similarity: float | None,
        reason: str,
    ) -> WarmResult[S]:
        generation = self._generation
        # searched words found their rows already
        value = retrieval.lexical(text, warm.value, frozenset(words - self._searched))
        if (
            generation == self._generation
        ):  # keeps taken_at: the TTL still counts from the last full retrieval
            self._snapshot = _Snapshot(value, warm.taken_at, warm.scope)
            self._searched |= words
        return self._record(value, Decision.REFRESH, reason, similarity, now)

    def _live(self, now: float, scope: Hashable) -> tuple[_Snapshot[S] | None, str]:
        warm = self._snapshot
        if warm is None:
            return None, "cold"
        if now - warm.taken_at >= self.settings.ttl_s:
            return None, "expired"
        if warm.scope != scope:
            return None, "scope"
        return warm, ""

    def _blend(self, vector: np.ndarray) -> None:
        assert self._fingerprint is not None
        mixed = (1 - self.settings.alpha) * self._fingerprint + self.settings.alpha * np.asarray(
            vector, dtype=np.float32
        )
        norm = float(np.linalg.norm(mixed))
        self._fingerprint = mixed / norm if norm else mixed

    def _record(
        self, value: S, decision: Decision, reason: str, similarity: float | None, now: float
    ) -> WarmResult[S]:
        record = WarmRecord(now, decision, reason, similarity)
        self._counts[decision] += 1
        self.log.append(record)
        return WarmResult(value, record)

    def invalidate(self) -> None:
        """Forget the snapshot and the fingerprint (after a forget/delete, or the session's people changed)."""
        self._generation += 1
        self._snapshot = None
        self._fingerprint = None
        self._context.clear()  # forgotten words must not stay in the next turn's context either
        self._vectors.clear()  # nor their vectors (SEC-3: no in-process copy of what was forgotten)
        self._searched = set()

    @property
    def stats(self) -> WarmStats:
        return WarmStats(
            self._counts[Decision.REUSE],
            self._counts[Decision.REFRESH],
            self._counts[Decision.FULL],
        )


# -- the default retrieval over memory rows ------------------------------------------------------------
BM25_ONLY = frozenset({Channel.FTS})


def memory_retrieval(
    recall: MemoryRecall, ctx: RecallContext, *, top_k: int | None = None, top_up: int = 4
) -> Retrieval[Hits]:
    """Full = the store's hybrid recall (reusing the turn vector); lexical = ``bm25_refresh``; scope = the partitions.

    ``top_k`` defaults to the knobs' top K + 8, like the text path's one recall that fills both the relevant
    and the behavioural (up to 8) sections.
    """
    top_k = top_k or recall.knobs.get("memories").top_k + 8

    def full(text: str, vector: np.ndarray | None) -> Hits:
        return tuple(recall.recall(ctx, text, top_k=top_k, query_vector=vector))

    def lexical(text: str, warm: Hits, new_words: frozenset[str]) -> Hits:
        return bm25_refresh(recall, ctx, text, warm, new_words, limit=top_k, top_up=top_up)

    # A set: the same people read the same partitions whoever of them speaks (the tuple starts with the speaker).
    return Retrieval(full, lexical, scope=frozenset(ctx.memory_partitions()))


def bm25_refresh(
    recall: MemoryRecall,
    ctx: RecallContext,
    text: str,
    warm: Hits,
    new_words: frozenset[str],
    *,
    limit: int,
    top_up: int,
) -> Hits:
    """The warm hits plus up to ``top_up`` BM25 hits for the turn's new words, re-ranked by word overlap with the turn.

    Only the words no search of this snapshot used are searched: the others found their rows already, and a shorter
    query is a cheaper one. With none, the refresh is the re-rank alone and reads nothing.

    BM25 alone needs no embedding and no vector scan; the warm hits keep their place on a tie, so the
    semantic order of the last full retrieval survives where the words say nothing. No score threshold on
    the top-up: BM25 is normalised to its best hit, which is usually a row already warm, so the store's
    threshold would drop exactly the rows that bring a new word; ``top_up`` bounds what comes in instead.
    """
    if not new_words:
        return tuple(lexical_rerank(warm, text, lambda h: h.item.content)[:limit])
    known = {h.item.rid for h in warm}
    query = " ".join(sorted(new_words))
    found = recall.recall(ctx, query, top_k=top_up + len(warm), channels=BM25_ONLY, threshold=0.0)
    fresh = [h for h in found if h.item.rid not in known][:top_up]
    return tuple(lexical_rerank([*warm, *fresh], text, lambda h: h.item.content)[:limit])

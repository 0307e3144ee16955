"""The one retrieval core (RET-1..7): candidates from four channels, filters, composite score, fusion, MMR.

candidates  vector KNN (top K x multiplier) | FTS5 BM25 (sanitised) | most recent | graph neighbours
            | BM25 of the words a thesaurus finds close to the query's (``expand_weight``)
filter      partitions the context may see (SEC-1) + live rows + the caller's filters
relevance   weighted: blend of cosine and normalised BM25     rrf: sum of 1/(k + rank) over channels
            normalised: blend of min-max scaled cosine and normalised BM25, both scaled over this query's pool
            (the text side: the query's own words, or ``expand_weight`` of the close words' match if more)
            + speaker named, then graph neighbours, then + the asker's own rows (first person), + a named date,
            + a share of the question a row answers, - a short question
final       w_sem * relevance + w_rec * temporal + w_imp * importance; with graph_head, the first places are
            ranked again with neighbours inheriting only graph_head_decay, the rest as before
            temporal = min(1, exp(-decay * days) * (1 + bonus * access_count)), 1 for exempt kinds
then        threshold, optional MMR (lambda 0.7), top K
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any, Generic

import numpy as np

from ..clock import DAY, Clock
from ..storage.corpus import Corpus, Filter, Found
from ..storage.embeddings import EmbeddingService
from ..storage.knobs import Fusion, RecallKnobs, Weights
from ..storage.ranking import ALL_CHANNELS, Channel, Hit
from ..unspaced import has_unspaced, spaced
from . import thesaurus, when

SHORT_QUESTION_WORDS = (
    25  # words, or pairs of characters in a script without spaces (``memory.unspaced``)
)
QUESTION_MARKS = ("?", "？", "؟", "\u037e")
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|me|mine|myself)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Ranked:
    """A candidate row as ranked, before it is kept: only the kept few become values (``Hit``)."""

    rid: int
    row: dict[str, Any]
    score: float
    relevance: float
    cosine: float | None
    text_score: float
    channels: tuple[str, ...]

    def hit(self, corpus: Corpus[Found]) -> Hit[Found]:
        return Hit(
            corpus.value(self.row),
            self.score,
            self.relevance,
            self.cosine,
            self.text_score,
            self.channels,
        )


@dataclass(slots=True)
class _Candidate:
    rid: int
    cosine: float | None = None
    bm25: float | None = None
    close_bm25: float | None = None  # BM25 of the words close in meaning to the query's (thesaurus)
    text_score: float = 0.0
    blended: bool = False
    ranks: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Scale:
    """One query's score ranges over its candidate pool, so every row of it (graph neighbours too) is scaled alike.

    BM25 is divided by the pool's best. A match on the words close to the query's counts ``close_weight`` of its
    BM25 over the same best (over the best of its own where no row holds a query word), when that is more.
    Cosines are spread from the pool's lowest to its highest (``normalised`` fusion): a small model's cosines crowd
    into a narrow band (MiniLM: most between 0.1 and 0.6) whose width changes with the query and the model, so a
    raw blend lets the wider BM25 scale decide almost alone.
    """

    best_bm25: float
    cos_low: float
    cos_high: float
    best_close: float = 0.0
    close_weight: float = 0.0

    @staticmethod
    def of(
        pool: dict[int, _Candidate], rows: dict[int, dict[str, Any]], close_weight: float = 0.0
    ) -> _Scale:
        bm25 = [abs(b) for rid in rows if (b := pool[rid].bm25) is not None]
        close = [abs(b) for rid in rows if (b := pool[rid].close_bm25) is not None]
        cosines = [c for rid in rows if (c := pool[rid].cosine) is not None]
        return _Scale(
            max(bm25, default=0.0),
            min(cosines, default=0.0),
            max(cosines, default=0.0),
            max(close, default=0.0),
            close_weight,
        )

    def text(self, cand: _Candidate) -> float:
        own = abs(cand.bm25) / self.best_bm25 if cand.bm25 is not None and self.best_bm25 else 0.0
        if cand.close_bm25 is None or not self.close_weight:
            return own
        close = min(1.0, abs(cand.close_bm25) / (self.best_bm25 or self.best_close))
        return max(own, self.close_weight * close)

    def cosine(self, cosine: float) -> float:
        if cosine <= 0:  # no likeness stays no likeness, however the rest of the pool looks
            return 0.0
        if (
            self.cos_high <= self.cos_low
        ):  # one candidate, or all alike: nothing to spread, the cosine counts as it is
            return cosine
        return min(1.0, max(0.0, (cosine - self.cos_low) / (self.cos_high - self.cos_low)))


class Retriever(Generic[Found]):
    def __init__(self, corpus: Corpus[Found], embeddings: EmbeddingService, clock: Clock) -> None:
        self.corpus = corpus
        self.embeddings = embeddings
        self.clock = clock

    def search(
        self,
        text: str,
        partitions: tuple[str, ...],
        knobs: RecallKnobs,
        *,
        where: Filter = Filter(),
        top_k: int | None = None,
        weights: Weights | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        threshold: float | None = None,
        query_vector: np.ndarray | None = None,
        asker: str | None = None,
        zone: tzinfo = UTC,
    ) -> list[Hit[Found]]:
        """The best ``top_k`` rows for ``text``; ``asker`` is who asks (a first-person question favours their rows),
        ``zone`` where the asker is in time (the dates a question names are theirs)."""
        k = top_k or knobs.top_k
        if knobs.unspaced_shift and has_unspaced(text):
            knobs = _shifted(knobs)
        now = self.clock.now()
        where = self.corpus.live(now) & where
        if query_vector is None and Channel.VECTOR in channels:
            query_vector = self.embeddings.embed_query(text)
        pool = self._candidates(text, partitions, knobs, k, channels, query_vector, where)
        rows = self.corpus.fetch(list(pool), partitions, where)
        self._fill_cosines(pool, rows, query_vector)
        self._blend_context(pool, rows, query_vector, knobs.context_weight)
        scale = _Scale.of(pool, rows, knobs.expand_weight)
        relevance = self._relevances(pool, rows, knobs, scale)
        self._boost_named_speakers(text, rows, relevance, knobs)
        pairs = (
            self._spread(pool, rows, relevance, partitions, where, knobs, query_vector, scale)
            if Channel.GRAPH in channels
            else []
        )

        # read once: the head ranks again below
        told = self._told_times(text, rows, knobs)
        dated = self._dated(text, rows, knobs, now, zone)

        def ranked(decay: float) -> list[_Ranked]:
            shared = _inherited(relevance, pairs, decay)
            self._boost_asker(text, asker, rows, shared, knobs)
            for rid in dated:
                shared[rid] += knobs.date_boost
            for rid in told:
                if shared.get(rid, 0.0) > 0:
                    shared[rid] += knobs.when_boost
            self._inherit_questions(rows, shared, knobs)
            self._demote_questions(rows, shared, knobs)
            return self._score(pool, rows, shared, weights or knobs.weights, knobs, now)

        hits = ranked(knobs.graph_decay)
        # A neighbour that inherits most of a strong hit's relevance crowds direct matches out of the first places
        # (docs/recall.md: graph_decay 0.65 gains R@5 on all three dev sets but loses R@10): the head is ranked with
        # the smaller share, the places below it as before, where neighbours bring in the context around a hit.
        if knobs.graph_head and pairs:
            hits = _lead_with(ranked(knobs.graph_head_decay)[: knobs.graph_head], hits)
        cutoff = knobs.score_threshold if threshold is None else threshold
        # A hit must match somehow (meaning, words or graph) unless it was brought in as recent context.
        hits = [
            h
            for h in hits
            if h.score >= cutoff and (h.relevance > 0 or Channel.RECENT in h.channels)
        ]
        kept = (
            self._mmr(hits, knobs.mmr_lambda, k)
            if knobs.mmr and query_vector is not None
            else hits[:k]
        )
        return [h.hit(self.corpus) for h in kept]

    # -- candidates --------------------------------------------------------------------------------
    def _candidates(
        self, text, partitions, knobs, k, channels, query_vector, where: Filter
    ) -> dict[int, _Candidate]:
        pool: dict[int, _Candidate] = {}
        width = k * knobs.candidate_multiplier

        def words() -> list[tuple[int, float]]:
            return (
                self._text_search(text, partitions, width)
                if Channel.FTS in channels and text
                else []
            )

        if query_vector is not None and Channel.VECTOR in channels:
            # both channels at once: a large vector scan runs on the other core while the words are searched
            nearest, found = self.corpus.vectors.search_alongside(
                query_vector, partitions, width, words
            )
            for rank, (rid, cos) in enumerate(nearest):
                cand = pool.setdefault(rid, _Candidate(rid))
                cand.cosine, cand.ranks[Channel.VECTOR] = cos, rank
        else:
            found = words()
        for rank, (rid, score) in enumerate(found):
            cand = pool.setdefault(rid, _Candidate(rid))
            cand.bm25, cand.ranks[Channel.FTS] = score, rank
        if (
            Channel.FTS in channels
            and knobs.expand_weight
            and (close := self._close_words(text, knobs))
        ):
            for rank, (rid, score) in enumerate(
                self._text_search(" ".join(close), partitions, width)
            ):
                cand = pool.setdefault(rid, _Candidate(rid))
                cand.close_bm25 = score
                cand.ranks.setdefault(Channel.FTS, len(found) + rank)
        if Channel.RECENT in channels and knobs.recent_candidates:
            for rank, rid in enumerate(
                self.corpus.newest(partitions, where, knobs.recent_candidates)
            ):
                pool.setdefault(rid, _Candidate(rid)).ranks[Channel.RECENT] = rank
        return pool

    def _close_words(self, text: str, knobs: RecallKnobs) -> list[str]:
        """Words close in meaning to the query's own, none of them a form of one of its words (``thesaurus``)."""
        fts = self.corpus.fts
        return thesaurus.expand(fts.terms(text), fts.stem, knobs.expand_likeness)

    def _text_search(
        self, text: str, partitions: tuple[str, ...], width: int
    ) -> list[tuple[int, float]]:
        try:
            return self.corpus.text_search(text, partitions, width)
        except Exception:  # RET-4: a broken FTS index degrades to vector-only, never a crash
            import logging

            logging.getLogger(__name__).exception("FTS search failed; using the other channels")
            return []

    def _spread(
        self,
        pool,
        rows,
        relevance,
        partitions,
        where,
        knobs: RecallKnobs,
        query_vector,
        scale: _Scale,
    ) -> list[tuple[int, int]]:
        """Graph neighbours of the strongest hits join the pool with their own relevance; returns the (seed,
        neighbour) pairs, by which a neighbour inherits part of its seed's (``_inherited``)."""
        if not knobs.graph_seeds or not relevance:
            return []
        seeds = sorted(relevance, key=lambda rid: -relevance[rid])[: knobs.graph_seeds]
        pairs = self.corpus.neighbours(seeds, partitions)
        found = self.corpus.fetch([n for _, n in pairs if n not in rows], partitions, where)
        for rank, rid in enumerate(found):
            pool.setdefault(rid, _Candidate(rid)).ranks[Channel.GRAPH] = rank
        rows.update(found)
        self._fill_cosines(pool, found, query_vector)
        self._blend_context(pool, found, query_vector, knobs.context_weight)
        relevance.update(self._relevances(pool, found, knobs, scale))
        kept = [(seed, rid) for seed, rid in pairs if rid in rows]
        for _, rid in kept:
            pool[rid].ranks.setdefault(Channel.GRAPH, len(found))
        return kept

    def _fill_cosines(self, pool, rows, query_vector) -> None:
        """Rows found only by text or graph still get their true cosine, so relevance is comparable."""
        if query_vector is None:
            return
        missing = [rid for rid in rows if pool[rid].cosine is None]
        for rid, vector in self.corpus.vectors.get(missing).items():
            pool[rid].cosine = float(np.dot(vector, query_vector))

    def _blend_context(self, pool, rows, query_vector, weight: float) -> None:
        """A turn's cosine takes a share of the turn it answers ("yes, since May" means little alone)."""
        if query_vector is None or not weight:
            return
        previous = self.corpus.previous(rows)
        vectors = self.corpus.vectors.get(sorted(set(previous.values())))
        for rid, prev in previous.items():
            if prev in vectors and pool[rid].cosine is not None and not pool[rid].blended:
                pool[rid].cosine = (1 - weight) * pool[rid].cosine + weight * float(
                    np.dot(vectors[prev], query_vector)
                )
                pool[rid].blended = True

    def _boost_named_speakers(
        self, text: str, rows, relevance: dict[int, float], knobs: RecallKnobs
    ) -> None:
        if not knobs.speaker_boost:
            return
        named = {stem for _, stem in self.corpus.fts.terms(text)}
        for rid, row in rows.items():
            speaker = self.corpus.speaker(row)
            if speaker and {stem for _, stem in self.corpus.fts.terms(speaker)} <= named:
                relevance[rid] += knobs.speaker_boost

    def _boost_asker(
        self, text: str, asker: str | None, rows, relevance: dict[int, float], knobs: RecallKnobs
    ) -> None:
        if not knobs.asker_boost or not asker or not FIRST_PERSON.search(text):
            return
        for rid, row in rows.items():
            if self.corpus.author(row) == asker:
                relevance[rid] += knobs.asker_boost

    def _dated(self, text: str, rows, knobs: RecallKnobs, now: float, zone: tzinfo) -> set[int]:
        """The rows from a span the question names, each of which gets ``date_boost``; a day's slack
        before, a week after (a turn may tell of it later). Not today: today's turns are the talk at
        hand, and "a show to watch tonight?" put the last chat above a recommendation asked for
        weeks before (LongMemEval dev)."""
        if not knobs.date_boost:
            return set()
        spans = when.spans(text, now, zone)
        # today's span is the one that runs past now ("yesterday" ends at now)
        named = [(start, end) for start, end in spans if not start < now < end <= start + 2 * DAY]
        return {
            rid
            for rid, row in rows.items()
            if (at := self.corpus.created(row)) is not None
            and any(start - DAY <= at < end + 7 * DAY for start, end in named)
        }

    def _told_times(self, text: str, rows, knobs: RecallKnobs) -> set[int]:
        """For a question asking when, the rows that say a time (``when.tells_time``): each gets
        ``when_boost`` where it matched at all."""
        if not knobs.when_boost or not when.asks_when(text):
            return set()
        return {rid for rid, row in rows.items() if when.tells_time(self.corpus.content(row))}

    def _inherit_questions(self, rows, relevance: dict[int, float], knobs: RecallKnobs) -> None:
        """A person's turn that answers a question takes a share of the question's relevance ("where did you go?"
        "Paris, with my sister"): the answer is what tells. The bot's own replies take none (they tell nothing of
        a person)."""
        if not knobs.answer_share:
            return
        asked = {
            rid: relevance[prev]
            for rid, prev in self.corpus.previous(rows).items()
            if prev in rows and self._asks(rows[prev])
        }
        for rid, share in asked.items():
            if not self.corpus.by_assistant(rows[rid]):
                relevance[rid] += knobs.answer_share * share

    def _demote_questions(self, rows, relevance: dict[int, float], knobs: RecallKnobs) -> None:
        """A short turn that ends in a question mark asks rather than tells; it never loses more than half."""
        if not knobs.question_penalty:
            return
        for rid, row in rows.items():
            if (
                self._asks(row)
                and len(spaced(self.corpus.content(row)).split()) <= SHORT_QUESTION_WORDS
            ):
                relevance[rid] = max(relevance[rid] / 2, relevance[rid] - knobs.question_penalty)

    # -- scoring -----------------------------------------------------------------------------------
    def _relevances(self, pool, rows, knobs: RecallKnobs, scale: _Scale) -> dict[int, float]:
        out = {}
        for rid in rows:
            cand = pool[rid]
            cand.text_score = scale.text(cand)
            out[rid] = self._relevance(cand, cand.text_score, knobs, scale)
        return out

    def _asks(self, row: dict[str, Any]) -> bool:
        """The turn ends in a question mark (of any script: "？" in Chinese and Japanese, "؟" in
        Arabic)."""
        return self.corpus.content(row).rstrip().endswith(QUESTION_MARKS)

    def _score(
        self, pool, rows, relevance, weights: Weights, knobs: RecallKnobs, now: float
    ) -> list[_Ranked]:
        total = weights.semantic + weights.recency + weights.importance
        hits = []
        for rid, row in rows.items():
            cand = pool[rid]
            score = (
                weights.semantic * relevance[rid]
                + weights.recency * self.temporal(row, knobs, now)
                + weights.importance * self.corpus.importance(row)
            ) / total
            hits.append(
                _Ranked(
                    rid,
                    row,
                    score,
                    relevance[rid],
                    cand.cosine,
                    cand.text_score,
                    tuple(sorted(cand.ranks)),
                )
            )
        hits.sort(key=lambda h: (-h.score, -h.rid))
        return hits

    def _relevance(self, cand: _Candidate, text: float, knobs: RecallKnobs, scale: _Scale) -> float:
        if knobs.fusion is Fusion.RRF:
            ranked = [
                cand.ranks[c]
                for c in (Channel.VECTOR, Channel.FTS, Channel.GRAPH)
                if c in cand.ranks
            ]
            return sum(1.0 / (knobs.rrf_k + r + 1) for r in ranked) * (knobs.rrf_k + 1) / 2.0
        cosine = max(0.0, cand.cosine) if cand.cosine is not None else None
        if cosine is None:  # no embeddings: BM25 carries relevance alone (RET-4)
            return text
        if knobs.fusion is Fusion.NORMALISED:
            cosine = scale.cosine(cosine)
        blend = knobs.vector_weight + knobs.text_weight
        return (knobs.vector_weight * cosine + knobs.text_weight * text) / blend

    def temporal(self, row: dict[str, Any], knobs: RecallKnobs, now: float) -> float:
        """Ebbinghaus decay with access reinforcement (Tiny Claw), 1 for kinds exempt from decay."""
        if self.corpus.decay_exempt(row):
            return 1.0
        days = max(0.0, (now - self.corpus.age_anchor(row)) / DAY)
        bonus = 1.0 + knobs.access_bonus * self.corpus.accesses(row)
        return min(1.0, math.exp(-knobs.decay_rate * days) * bonus)

    def _mmr(self, hits: list[_Ranked], lam: float, k: int) -> list[_Ranked]:
        """Maximal marginal relevance over the rows' own vectors: keeps near-duplicates from crowding out the rest."""
        vectors = self.corpus.vectors.get([h.rid for h in hits])
        chosen: list[_Ranked] = []
        rest = list(hits)
        while rest and len(chosen) < k:

            def gain(h: _Ranked) -> float:
                v = vectors.get(h.rid)
                sims = [
                    float(np.dot(v, vectors[c.rid]))
                    for c in chosen
                    if v is not None and c.rid in vectors
                ]
                return lam * h.score - (1 - lam) * max(sims, default=0.0)

            best = max(rest, key=gain)
            chosen.append(best)
            rest.remove(best)
        return chosen


def _inherited(
    relevance: dict[int, float], pairs: list[tuple[int, int]], decay: float
) -> dict[int, float]:
    """A copy of ``relevance`` in which each graph neighbour has at least ``decay`` of its seed's (in pair order: a
    seed that is also a neighbour passes on what it inherited)."""
    out = dict(relevance)
    for seed, rid in pairs:
        out[rid] = max(out[rid], decay * out[seed])
    return out


def _lead_with(head: list[_Ranked], hits: list[_Ranked]) -> list[_Ranked]:
    """``head`` first, then the rest of ``hits`` in their order, each row once, as many rows as ``hits`` holds."""
    taken = {h.rid for h in head}
    return head + [h for h in hits if h.rid not in taken][: len(hits) - len(head)]


def _shifted(knobs: RecallKnobs) -> RecallKnobs:
    """LANG-2: a question in an unspaced script leans on meaning a little more (Chinese dev set,
    messages: hybrid R@10 77.2 at 0.5/0.5, 78.1 at 0.6/0.4, 77.5 at 0.7/0.3; its English twin 82.8).
    """
    shift = min(knobs.unspaced_shift, knobs.text_weight)
    return knobs.model_copy(
        update={
            "vector_weight": knobs.vector_weight + shift,
            "text_weight": knobs.text_weight - shift,
        }
    )

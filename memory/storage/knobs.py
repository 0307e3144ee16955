"""Recall knobs (RET-3): validated, stored in the ``settings`` table, hot-reloadable.

Defaults for memories are ScalyClaw's (0.6/0.2/0.2, decay 0.05/day, topK 10, threshold 0.5) with
Clawdia's 0.7/0.3 vector/text blend. Conversation history uses Clanky's shape instead: relevance
dominates, recency is a small nudge with a 90-day half-life, and there is no threshold, because a
history search is asked for explicitly and should return the best matches it has. A turn is read
with the turn it answers (``context_weight`` of the previous turn's cosine; its text is indexed in
a low-weight FTS column), its neighbours in the channel share a strong hit's relevance
(``graph_decay``; in the first ``graph_head`` places only ``graph_head_decay``: there a neighbour does not push a
direct match down, below them it still comes in as context), and a query that names a speaker favours what that
speaker said (``speaker_boost``). Words close in meaning to the query's own (``memory.recall.thesaurus``) are
searched too, a row they find counting ``expand_weight`` of a match on the query's words (``expand_likeness``: how close).
Two nudges come after the graph step, so neighbours do not inherit them: a question in the first
person ("what did I say about...") favours the asker's own turns (``asker_boost``), and one that names
a time ("last week", "in May", "on 3 June 2023") favours turns from that span (``date_boost``,
``memory.recall.when``). A person's turn that answers a question takes ``answer_share`` of the question's relevance
(not the bot's own replies). Last, a short question loses ``question_penalty`` (at most half its relevance): a
turn that asks tells little, and what was asked about is in the turns that answer or tell.
History blends cosine and BM25 after scaling both over the query's candidates (``normalised`` fusion): a
small model's raw cosines sit in a narrow band, so the raw blend let BM25 decide almost alone and the
meaning channel could not lift a turn phrased in other words (measured on two dev sets in the README).
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .db import Database


class Fusion(StrEnum):
    WEIGHTED = "weighted"
    RRF = "rrf"
    NORMALISED = "normalised"


class Weights(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    semantic: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Share of the score from matching the query; higher favours relevance.",
    )
    recency: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Share of the score from how recent an item is; higher favours new items.",
    )
    importance: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Share of the score from importance; higher favours what matters most.",
    )

    @model_validator(mode="after")
    def _not_all_zero(self) -> Weights:
        if self.semantic + self.recency + self.importance <= 0:
            raise ValueError("at least one weight must be above 0")
        return self


class RecallKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    top_k: int = Field(
        default=10,
        ge=1,
        le=200,
        description="How many results recall gives the model at most; more context, longer prompts.",
    )
    score_threshold: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Results scoring below this are left out (0 keeps all); higher means fewer, surer results.",
    )
    weights: Weights = Field(
        default=Weights(),
        description="How the final score mixes relevance, recency and importance (relative shares).",
    )
    decay_rate: float = Field(
        default=0.05,
        ge=0,
        le=5,
        description="How fast recency fades per day (half-life 0.69/rate days); higher forgets old items sooner.",
    )
    access_bonus: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="Recency kept per time an item was recalled; higher keeps often-used items fresh.",
    )
    vector_weight: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="Share of relevance from meaning (embeddings); higher finds other words for the same thing.",
    )
    text_weight: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Share of relevance from exact words (BM25); higher favours literal matches and names.",
    )
    unspaced_shift: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Weight moved from words to meaning for a question without spaces "
        "(Chinese, Japanese).",
    )
    candidate_multiplier: int = Field(
        default=4,
        ge=1,
        le=50,
        description="How many candidates each search fetches, times top_k; higher finds more, costs time.",
    )
    recent_candidates: int = Field(
        default=10,
        ge=0,
        le=200,
        description="The newest items added as candidates whatever the query (0 = none).",
    )
    graph_seeds: int = Field(
        default=5,
        ge=0,
        le=50,
        description="How many top hits bring in their linked neighbours (0 turns the graph off).",
    )
    graph_decay: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of a hit's relevance its neighbours inherit; higher pulls in more context.",
    )
    graph_head: int = Field(
        default=0,
        ge=0,
        le=200,
        description="First places ranked with neighbours inheriting only graph_head_decay (0 = off).",
    )
    graph_head_decay: float = Field(
        default=0.65,
        ge=0,
        le=1,
        description="Share of a hit's relevance its neighbours inherit in the first graph_head places.",
    )
    expand_weight: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of a match on words close in meaning to the query's (a thesaurus) against its own words (0 = off).",
    )
    expand_likeness: float = (
        Field(  # ge: the least likeness the thesaurus file holds (thesaurus.MIN_STORED)
            default=0.6,
            ge=0.55,
            le=1,
            description="How close in meaning a word must be to a query word to be searched too.",
        )
    )
    context_weight: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Weight of the turn a message answers when judging its relevance (0 = off).",
    )
    speaker_boost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Extra score for what a speaker the query names said (0 = off).",
    )
    asker_boost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Extra score for the asker's own turns when asked in the first person (0 = off).",
    )
    when_boost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Extra score, for a question asking when, for turns that say a time (0 = off).",
    )
    date_boost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Extra score for turns from a time the query names, e.g. 'last week' (0 = off).",
    )
    question_penalty: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Score taken from short questions, which tell little (0 = off).",
    )
    answer_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of a question's relevance a person's answer to it takes (0 = off).",
    )
    fusion: Fusion = Field(
        default=Fusion.WEIGHTED,
        description="How meaning and words are combined: weighted, normalised (scaled first) or rrf (by rank).",
    )
    rrf_k: int = Field(
        default=60,
        ge=1,
        le=1000,
        description="Rank smoothing for rrf fusion; higher flattens the difference between ranks.",
    )
    mmr: bool = Field(
        default=False, description="Diversify results so near-duplicates do not crowd the list."
    )
    mmr_lambda: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="With mmr on, relevance against variety; lower gives more varied results.",
    )

    @model_validator(mode="after")
    def _blend(self) -> RecallKnobs:
        if self.vector_weight + self.text_weight <= 0:
            raise ValueError("vector_weight + text_weight must be above 0")
        return self


MEMORY_DEFAULTS = RecallKnobs()


def knob_help(model: type[BaseModel] = RecallKnobs, prefix: str = "") -> dict[str, str]:
    """One line per knob saying what it does ({"top_k": ..., "weights.semantic": ...}), from the field
    descriptions, so the help shown to an operator lives beside the knob it explains."""
    out: dict[str, str] = {}
    for name, field in model.model_fields.items():
        out[prefix + name] = field.description or ""
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out.update(knob_help(field.annotation, f"{prefix}{name}."))
    return out


MESSAGE_DEFAULTS = RecallKnobs(
    top_k=10,
    score_threshold=0.0,
    weights=Weights(semantic=0.95, recency=0.05, importance=0.0),
    decay_rate=math.log(2) / 90,
    access_bonus=0.0,
    vector_weight=0.5,
    text_weight=0.5,
    recent_candidates=0,
    graph_decay=0.8,
    graph_head=5,
    expand_weight=0.5,
    context_weight=0.25,
    speaker_boost=0.12,
    asker_boost=0.15,
    when_boost=0.15,
    date_boost=0.3,
    question_penalty=0.1,
    answer_share=0.1,
    fusion=Fusion.NORMALISED,
)

CorpusName = Literal["memories", "messages"]
_DEFAULTS: dict[str, RecallKnobs] = {"memories": MEMORY_DEFAULTS, "messages": MESSAGE_DEFAULTS}


class KnobStore:
    """Reads knobs from the settings table; a change made by any process shows on the next recall."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[str, tuple[str | None, RecallKnobs]] = {}

    def get(self, corpus: CorpusName) -> RecallKnobs:
        raw = self.db.get_setting(f"recall.{corpus}")
        cached = self._cache.get(corpus)
        if cached and cached[0] == raw:
            return cached[1]
        knobs = (
            _DEFAULTS[corpus] if raw is None else _DEFAULTS[corpus].model_validate(json.loads(raw))
        )
        self._cache[corpus] = (raw, knobs)
        return knobs

    def update(self, corpus: CorpusName, changes: dict) -> RecallKnobs:
        """Validate and store a partial change; raises pydantic.ValidationError naming the bad field."""
        merged = self.get(corpus).model_dump(mode="json")
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        knobs = RecallKnobs.model_validate(merged)
        self.db.set_setting(f"recall.{corpus}", knobs.model_dump_json())
        return knobs

    def reset(self, corpus: CorpusName) -> None:
        self.db.execute("DELETE FROM settings WHERE key = ?", (f"recall.{corpus}",))

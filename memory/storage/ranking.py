"""What a ranked search of a corpus returns (``Hit``), by which channels it may find candidates
(``Channel``), and the ranker the message log searches with (``MessageRanker``).

The ranking itself is recall's (``memory.recall.retrieval.Retriever``); storage only names its
results, so the message log is handed a ranker by the engine instead of importing the one above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, tzinfo
from enum import StrEnum
from typing import Generic, Protocol

import numpy as np

from ..models import StoredMessage
from .corpus import Filter, Found
from .knobs import RecallKnobs, Weights


class Channel(StrEnum):
    VECTOR = "vector"
    FTS = "fts"
    RECENT = "recent"
    GRAPH = "graph"


ALL_CHANNELS = frozenset(Channel)


@dataclass(frozen=True, slots=True)
class Hit(Generic[Found]):
    """A found memory or message (``item``, converted from its row once, when it is found) and how
    it ranked."""

    item: Found
    score: float
    relevance: float
    cosine: float | None
    # the BM25 score scaled to [0, 1] by the best in the pool (or the close words'), not the
    # memory's text
    text_score: float
    channels: tuple[str, ...]


class MessageRanker(Protocol):
    """Ranks the stored messages (``Retriever`` over the message corpus, built by the engine)."""

    def search(
        self,
        text: str,
        partitions: tuple[str, ...],
        knobs: RecallKnobs,
        *,
        where: Filter = ...,
        top_k: int | None = None,
        weights: Weights | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        threshold: float | None = None,
        query_vector: np.ndarray | None = None,
        asker: str | None = None,
        zone: tzinfo = UTC,
    ) -> list[Hit[StoredMessage]]: ...

"""Recall of memories: what a context may see, ranked by ``memory.recall.retrieval``, and the reinforcement of what
was recalled (RET-5: access counts are queued on the reply path and written off it, in one batch)."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from ..models import Memory
from ..scopes import RecallContext
from ..storage.corpus import MemoryCorpus
from ..storage.embeddings import EmbeddingService
from ..storage.knobs import KnobStore, Weights
from ..storage.memories import MemoryRepository, RecallFilters, filters_sql
from ..storage.ranking import ALL_CHANNELS, Channel, Hit
from .retrieval import Retriever

SEARCH_MODES = ("hybrid", "recent", "important", "typed")


class MemoryRecall:
    def __init__(
        self,
        rows: MemoryRepository,
        corpus: MemoryCorpus,
        embeddings: EmbeddingService,
        knobs: KnobStore,
    ) -> None:
        self.rows = rows
        self.knobs = knobs
        self.retriever = Retriever(corpus, embeddings, rows.clock)
        self._pending: dict[int, int] = {}  # rid -> recalls not yet written

    def recall(
        self,
        ctx: RecallContext,
        query: str,
        *,
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
        weights: Weights | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        threshold: float | None = None,
        reinforce: bool = True,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit[Memory]]:
        """Hybrid recall of what ``ctx`` may see (the one path the bot, the tools and the CLI use).

        :param filters: which memories to keep. :param top_k: how many (None: the ``memories`` knob).
        :param channels: which rankers take part (vector, full text, ...). :param threshold: a minimum score.
        :param reinforce: count the hits as accessed (queued; ``flush_access`` writes them).
        :param query_vector: the query's embedding when the caller already has it.
        """
        hits = self.retriever.search(
            query,
            ctx.memory_partitions(),
            self.knobs.get("memories"),
            where=filters_sql(filters),
            top_k=top_k,
            weights=weights,
            channels=channels,
            threshold=threshold,
            query_vector=query_vector,
            zone=ctx.tz,
        )
        if reinforce:
            self.note_access([h.item.rid for h in hits])
        return hits

    def recall_in(
        self,
        partitions: tuple[str, ...],
        query: str,
        *,
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        threshold: float | None = None,
    ) -> list[Hit[Memory]]:
        """The operator's recall over named partitions (no conversation scopes it); nothing is reinforced.
        Parameters as ``recall`` takes them."""
        knobs = self.knobs.get("memories")
        where = filters_sql(filters)
        return self.retriever.search(
            query,
            partitions,
            knobs,
            where=where,
            top_k=top_k,
            channels=channels,
            threshold=threshold,
        )

    def search(
        self,
        ctx: RecallContext,
        query: str = "",
        *,
        mode: str = "hybrid",
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
        order: str = "recent",
    ) -> list[Memory]:
        """RET-6 search modes: ``hybrid`` ranks by meaning and words; ``recent`` and ``important`` are plain
        orderings of what the context may see; ``typed`` needs ``filters.types`` and sorts by ``order``.

        :raises InvalidInput: an unknown mode, or ``typed`` without a type.
        """
        limit = top_k or self.knobs.get("memories").top_k
        if mode == "hybrid":
            return [h.item for h in self.recall(ctx, query, filters=filters, top_k=limit)]
        if mode == "typed" and not filters.types:
            raise InvalidInput("the typed search mode needs at least one memory type")
        if mode not in SEARCH_MODES:
            raise InvalidInput(
                f"search mode must be hybrid, recent, important or typed, not {mode!r}"
            )
        return self.rows.listing(
            ctx.memory_partitions(), filters, mode if mode != "typed" else order, limit, False
        )

    def note_access(self, rids: list[int]) -> None:
        """Queue one access for each row id (written by ``flush_access``)."""
        for rid in rids:
            self._pending[rid] = self._pending.get(rid, 0) + 1

    def flush_access(self) -> int:
        """Apply the queued access bumps in one statement batch; called off the reply path. Returns rows bumped."""
        pending, self._pending = self._pending, {}
        if pending:
            self.rows.add_access(pending)
        return len(pending)

"""Consolidation (MAINT-1) as a model-calling job, in ``memory.jobs.base``'s shape, for the bot's scheduler:

    gather   the clusters of near-duplicates, and the audit row opened
    ask      one merge per cluster; three failures in a row stop the run (the model is down)
    apply    each merge written, unless a member was forgotten or changed while the model wrote; audit closed

The memory thread is free while the model writes: replies wait for no merge. ``companion consolidate`` runs
the same steps in one go with a blocking model (``memory.upkeep.maintenance.consolidate``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..engine import MemoryEngine
from ..errors import MemoryStoreError, NotFound
from ..models import Memory, NewMemory
from ..protocols import AsyncCompleter
from ..upkeep.maintenance import (
    CONSOLIDATE_SYSTEM,
    STOP_AFTER_FAILURES,
    ConsolidationReport,
    clusters,
    consolidation_prompt,
    merged_memory,
    write_merge,
)
from ..write.extraction import BadAnswer
from .base import NoAnswer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Clusters:
    groups: tuple[tuple[Memory, ...], ...]
    audit: int


@dataclass(frozen=True, slots=True)
class Merges:
    merges: tuple[NewMemory | None, ...]  # per cluster asked; None: that merge failed
    left: int = 0  # clusters not asked: the run stopped after failures in a row


@dataclass(frozen=True, slots=True)
class Consolidation:
    engine: MemoryEngine
    threshold: float = 0.85
    max_cluster: int = 5

    def gather(self) -> Clusters:
        groups = tuple(tuple(c) for c in clusters(self.engine, self.threshold, self.max_cluster))
        return Clusters(
            groups, self.engine.reflections.start("consolidation", f"{len(groups)} clusters")
        )

    async def ask(self, plan: Clusters, model: AsyncCompleter) -> Merges:
        merges: list[NewMemory | None] = []
        in_a_row = 0
        for cluster in plan.groups:
            try:
                answer = await model(
                    CONSOLIDATE_SYSTEM, consolidation_prompt(list(cluster)), temperature=0.0
                )
                merges.append(merged_memory(list(cluster), answer))
                in_a_row = 0
            except (
                NoAnswer,
                BadAnswer,
            ):  # one bad cluster (or a failing model) must not stop the rest
                log.exception("could not merge %s", [m.id for m in cluster])
                merges.append(None)
                in_a_row += 1
            if in_a_row == STOP_AFTER_FAILURES and len(merges) < len(plan.groups):
                log.error(
                    "consolidation stopped: %d merges failed in a row (is the model reachable?)",
                    in_a_row,
                )
                break
        return Merges(tuple(merges), len(plan.groups) - len(merges))

    def apply(self, plan: Clusters, answer: Merges) -> ConsolidationReport:
        new_ids: list[str] = []
        merged = failures = 0
        for cluster, new in zip(plan.groups, answer.merges, strict=False):
            if new is None:
                failures += 1
            elif self._unchanged(cluster):
                try:
                    written = write_merge(self.engine, new, list(cluster))
                except (
                    MemoryStoreError
                ) as exc:  # the merge says what may not be stored (a secret, an injection)
                    log.warning("a merge of %d memories was not written: %s", len(cluster), exc)
                    failures += 1
                    continue
                new_ids += [written] if written else []
                merged += len(cluster) if written else 0
        error = f"{failures} clusters failed" + (
            f"; stopped with {answer.left} left" if answer.left else ""
        )
        self.engine.reflections.finish(
            plan.audit, stored=new_ids, error=error if failures else None
        )
        return ConsolidationReport(len(plan.groups), merged, tuple(new_ids), failures)

    def _unchanged(self, cluster: tuple[Memory, ...]) -> bool:
        """The model takes seconds: a member forgotten, merged or reworded meanwhile must not come back in a merge."""
        for old in cluster:
            try:
                now = self.engine.memory_rows.get(old.id)
            except NotFound:
                return False  # forgotten for good meanwhile
            if (
                now.forgotten
                or now.superseded_by
                or now.consolidated_into
                or now.content != old.content
            ):
                log.info(
                    "a merge of %d memories was not written: %s changed while the model wrote it",
                    len(cluster),
                    old.id,
                )
                return False
        return True

    def failed(self, plan: Clusters, error: Exception) -> ConsolidationReport:
        return self.apply(plan, Merges(()))  # ask never raises: each cluster's failure is its own

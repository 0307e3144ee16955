"""Scheduled upkeep as plain functions (MAINT-1..3); the bot's scheduler and the CLI call them.

consolidate   clusters (cosine >= 0.85, same partition and type, <= 5 rows) merged by prompts/consolidation
decay         importance x 0.95 for rows not accessed for 7+ days (guidance, behavioral, profile exempt)
prune         importance < 1 (of 10), never accessed, older than 30 days: soft-forgotten
prune_entities  mention_count <= 1 and unseen for 90 days
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import prompts

from ..engine import MemoryEngine
from ..models import Memory, NewMemory, Progress, Source
from ..protocols import Completer
from ..write.extraction import parse_object as parse_json_object
from ..write.tombstones import unforgotten

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    clusters: int
    merged_rows: int
    new_ids: tuple[str, ...]
    failures: int


CONSOLIDATE_SYSTEM = "You consolidate memories. Answer with JSON only."
STOP_AFTER_FAILURES = 3  # merges failing in a row: the model is down, so the rest would fail too


def consolidate(
    engine: MemoryEngine,
    complete: Completer,
    *,
    threshold: float = 0.85,
    max_cluster: int = 5,
    progress: Progress | None = None,
) -> ConsolidationReport:
    clusters = list(_clusters(engine, threshold, max_cluster))
    audit = engine.reflections.start("consolidation", f"{len(clusters)} clusters")
    new_ids, merged, failures, in_a_row, left = [], 0, 0, 0, 0
    for done, cluster in enumerate(clusters, start=1):
        try:
            merged_id = _merge(engine, complete, cluster)
            if merged_id is not None:
                new_ids.append(merged_id)
                merged += len(cluster)
            in_a_row = 0
        except (
            Exception
        ):  # a background-job edge: one bad cluster (or a failing LLM) must not stop the rest
            failures += 1
            in_a_row += 1
            log.exception("could not merge %s", [m.id for m in cluster])
        if progress:
            progress(done, len(clusters))
        if in_a_row == STOP_AFTER_FAILURES and done < len(clusters):
            left = len(clusters) - done
            log.error(
                "consolidation stopped: %d merges failed in a row (is the model reachable?)",
                in_a_row,
            )
            break
    error = f"{failures} clusters failed" + (f"; stopped with {left} left" if left else "")
    engine.reflections.finish(audit, stored=new_ids, error=error if failures else None)
    return ConsolidationReport(len(clusters), merged, tuple(new_ids), failures)


def clusters(
    engine: MemoryEngine, threshold: float = 0.85, max_cluster: int = 5
) -> list[list[Memory]]:
    """The groups of near-duplicate memories consolidation would merge (for the scheduler's job)."""
    return list(_clusters(engine, threshold, max_cluster))


def _clusters(engine: MemoryEngine, threshold: float, max_cluster: int) -> Iterator[list[Memory]]:
    for partition, mtype in engine.memory_rows.consolidation_groups():
        rows = engine.memory_rows.listing((partition,), order="oldest", limit=1_000_000)
        rows = [m for m in rows if m.type == mtype]
        vectors = engine.memory_rows.corpus.vectors.get([m.rid for m in rows])
        rows = [m for m in rows if m.rid in vectors]
        if len(rows) < 2:
            continue
        yield from _greedy(rows, np.vstack([vectors[m.rid] for m in rows]), threshold, max_cluster)


def _greedy(
    rows: list[Memory], mat: np.ndarray, threshold: float, max_cluster: int
) -> Iterator[list[Memory]]:
    """Each unclustered row, oldest first, takes its most similar unclustered peers above the threshold."""
    taken = np.zeros(len(rows), dtype=bool)
    for start in range(0, len(rows), 256):
        sims = mat[start : start + 256] @ mat.T
        for offset, row_sims in enumerate(sims):
            i = start + offset
            if taken[i]:
                continue
            peers = [
                j
                for j in np.argsort(-row_sims)
                if j != i and not taken[j] and row_sims[j] >= threshold
            ][: max_cluster - 1]
            if peers:
                taken[[i, *peers]] = True
                yield [rows[i], *(rows[j] for j in peers)]


def _merge(engine: MemoryEngine, complete: Completer, cluster: list[Memory]) -> str | None:
    """The merged memory's id; None when the merge would say a forgotten fact again (SEC-5: not written)."""
    return write_merge(
        engine,
        merged_memory(
            cluster, complete(CONSOLIDATE_SYSTEM, consolidation_prompt(cluster), temperature=0.0)
        ),
        cluster,
    )


def consolidation_prompt(cluster: list[Memory]) -> str:
    payload = json.dumps(
        [
            {
                "subject": m.subject,
                "content": m.content,
                "importance": m.importance,
                "tags": list(m.tags),
                "created_at": m.created_at,
            }
            for m in cluster
        ],
        ensure_ascii=False,
        indent=1,
    )
    return prompts.render(
        "consolidation", count=len(cluster), type=cluster[0].type.value, memories=payload
    )


def merged_memory(cluster: list[Memory], answer: str) -> NewMemory:
    """The model's merge as a new memory in the cluster's place; ``BadAnswer`` when it is not a JSON object."""
    merged = parse_json_object(answer)
    first = cluster[0]
    return NewMemory(
        content=str(merged.get("content", "")),
        subject=str(merged.get("subject") or first.subject),
        scope=first.scope,
        scope_id=first.scope_id,
        type=first.type,
        kind=first.kind,
        visibility=first.visibility,
        tags=tuple(merged.get("tags") or sorted({t for m in cluster for t in m.tags})),
        source=Source.CONSOLIDATION,
        importance=min(
            10.0, max([m.importance for m in cluster] + [_number(merged.get("importance"), 1.0)])
        ),
        provenance=first.provenance,
        # SEC-5: a merge is about a person only when every fact merged was about that same person
        subject_person_id=first.subject_person_id
        if len({m.subject_person_id for m in cluster}) == 1
        else None,
    )


def write_merge(engine: MemoryEngine, new: NewMemory, cluster: list[Memory]) -> str | None:
    """The merged memory's id; None when the merge would say a forgotten fact again (SEC-5: not written)."""
    if not unforgotten(engine, [new]):
        log.info(
            "a merge of %d memories was not written: it matches a forgotten fact", len(cluster)
        )
        return None
    return engine.memories.insert_merged(new, cluster).id


def _number(value: Any, default: float) -> float:
    try:
        return max(1.0, min(10.0, float(value)))
    except (TypeError, ValueError):
        return default


def decay(engine: MemoryEngine, *, unaccessed_days: float = 7.0, factor: float = 0.95) -> int:
    return engine.memory_rows.decay(unaccessed_days=unaccessed_days, factor=factor)


def prune(engine: MemoryEngine, *, below: float = 1.0, older_than_days: float = 30.0) -> int:
    """Soft-forget: the row stays for the audit trail but is never recalled again."""
    return engine.memory_rows.prune(below=below, older_than_days=older_than_days)


def prune_entities(engine: MemoryEngine, *, unseen_days: float = 90.0) -> int:
    with engine.db.transaction():
        pruned = engine.graph.prune(unseen_days)
    engine.db.optimize()  # the nightly job keeps the query planner's statistics fresh
    return pruned

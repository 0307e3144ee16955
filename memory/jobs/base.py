"""Model-calling jobs, in one shape, below the bot:

    gather   memory thread   what the model will be shown, as plain values; None: nothing to do
    ask      event loop      the model, through an ``AsyncCompleter``; never the store
    apply    memory thread   what the answer changes, in one transaction
    report   -               a frozen dataclass saying what was done

    failed   memory thread   instead of ``apply`` when ``ask`` raised ``NoAnswer`` or ``BadAnswer``

The bot's job runner (``bot.jobs.JobRunner``) owns the threads, the scheduling and the backoff: a job never
awaits the store and never calls the model from the memory thread, so no thread waits on another.

A job that learns facts (extraction, reflection, compaction's flush, the daily reflection) reports them as
``Facts``; ``WriteFacts`` is their one write path: the contradiction judge asked per related pair, then the
facts stored together with the job's own bookkeeping (buffer rows done, audit closed, day marked) in one
transaction, so a crash leaves both undone and the redo dedups.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import prompts

from ..engine import MemoryEngine
from ..errors import MemoryStoreError
from ..models import Memory, NewMemory
from ..protocols import AsyncCompleter, StructuredCompleter
from ..write.extraction import BadAnswer
from ..write.glosses import english_reading, foreign
from ..write.subjects import bound_all
from ..write.tombstones import learnable, unforgotten

log = logging.getLogger(__name__)
PlanT = TypeVar("PlanT")
AnswerT = TypeVar("AnswerT")
ReportT = TypeVar("ReportT", covariant=True)


class NoAnswer(Exception):
    """The model could not answer (down, timing out, refusing the request): the job is tried again later."""


# what ends a job in ``failed``; anything else is a bug, left to the runner's edge
FAILED = (
    NoAnswer,
    BadAnswer,
)


class Job(Protocol[PlanT, AnswerT, ReportT]):
    def gather(self) -> PlanT | None: ...

    async def ask(self, plan: PlanT, model: AsyncCompleter) -> AnswerT: ...

    def apply(self, plan: PlanT, answer: AnswerT) -> ReportT: ...

    def failed(self, plan: PlanT, error: Exception) -> ReportT: ...


def applied(
    engine: MemoryEngine, step: Callable[[PlanT, AnswerT], ReportT], plan: PlanT, answer: AnswerT
) -> ReportT:
    """A job's ``apply`` (or ``failed``) in one transaction: on the memory thread, for the runner."""
    with engine.transaction():
        return step(plan, answer)


def nothing(stored: int) -> None:
    """A job with no bookkeeping of its own once its facts are stored."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What a job learned, for ``WriteFacts``; ``finish(stored)`` is the job's own bookkeeping, run in the same
    transaction. ``failed`` marks a job that could not learn (the model failed; ``finish`` did the bookkeeping)."""

    memories: tuple[NewMemory, ...] = ()
    finish: Callable[[int], None] = nothing
    failed: bool = False


NONE_LEARNED = Facts(failed=True)


@dataclass(frozen=True, slots=True)
class Judged:
    """A fact to store and the stored facts on its subject the judge is asked about; ``foreign``:
    it is in another language and its person has tombstones, so the model reads it in English."""

    new: NewMemory
    related: tuple[Memory, ...] = ()
    foreign: bool = False


@dataclass(frozen=True, slots=True)
class FactVerdict:
    """What the model said of a fact to store: the related facts it contradicts, and its English
    reading (``Judged.foreign``; None: not asked, or no answer)."""

    contradicts: frozenset[str] = frozenset()
    reading: str | None = None


@dataclass(frozen=True, slots=True)
class Written:
    stored: int = 0
    contradicted: int = 0


@dataclass(frozen=True, slots=True)
class WriteFacts:
    """The one write path of learned facts: judge (WRITE-5), dedup and supersession (in ``MemoryStore.add``)."""

    engine: MemoryEngine
    facts: Facts = field(default_factory=Facts)

    def gather(self) -> tuple[Judged, ...]:
        # SEC-5: a forgotten fact read again in what remains (a day's turns, a batch) is not learned back
        # SEC-5: whom each is about
        kept = bound_all(self.engine, unforgotten(self.engine, list(self.facts.memories)))
        if len(kept) < len(self.facts.memories):
            log.info(
                "learned facts: %d dropped, forgotten before", len(self.facts.memories) - len(kept)
            )
        return tuple(Judged(new, self._related(new), self._foreign(new)) for new in kept)

    def _foreign(self, new: NewMemory) -> bool:
        """SEC-5: a fact in another language about someone who forgot something is read in English
        before it is stored (``memory.write.glosses``)."""
        if not self.engine.memories.tombstones.hold_any(new):
            return False
        return foreign(new.content, self.engine.people.own_names(new.scope_id))

    def _related(self, new: NewMemory) -> tuple[Memory, ...]:
        """The stored facts the judge compares ``new`` with; none for a fact the store will refuse (a secret the
        model copied): ``apply`` counts it, and the rest of the batch is still stored (it used to fail whole)."""
        try:
            return tuple(self.engine.memories.to_judge(new))
        except MemoryStoreError:
            return ()

    async def ask(self, plan: tuple[Judged, ...], model: AsyncCompleter) -> tuple[FactVerdict, ...]:
        return tuple(
            [FactVerdict(await _contradicted(model, j), await _reading(model, j)) for j in plan]
        )

    def apply(self, plan: tuple[Judged, ...], answer: tuple[FactVerdict, ...]) -> Written:
        stored, outcomes = 0, Counter[str]()
        # issue 33: a forget that landed while the model wrote (tombstone laid, sources gone) is
        # seen here, in the write transaction, so nothing forgotten meanwhile is learned back;
        # SEC-5: nor a forgotten fact in another language, known by its English reading
        readings = {
            j.new.content: v.reading for j, v in zip(plan, answer, strict=True) if v.reading
        }
        kept = {id(new) for new in learnable(self.engine, [j.new for j in plan], readings)}
        for judged, verdict in zip(plan, answer, strict=True):
            contradicts = verdict.contradicts
            if id(judged.new) not in kept:
                log.info(
                    "a learned fact was dropped: its words were forgotten while the model wrote"
                )
                continue
            try:
                status = self.engine.memories.add(judged.new, contradicts=contradicts).status
            except MemoryStoreError as exc:
                log.info("extracted fact not stored: %s", exc)
                status = "refused by the safety filter or invalid"
            stored += status == "stored"
            outcomes[status] += 1
        if plan and stored < len(
            plan
        ):  # one line saying what the facts became and why some were not kept
            dropped = ", ".join(
                f"{n} {status}" for status, n in sorted(outcomes.items()) if status != "stored"
            )
            log.info("learned facts: %d stored of %d; not stored: %s", stored, len(plan), dropped)
        self.facts.finish(stored)
        return Written(stored, sum(1 for verdict in answer if verdict.contradicts))

    def failed(self, plan: tuple[Judged, ...], error: Exception) -> Written:
        # ask never raises: a judge that fails says "no"
        return self.apply(plan, tuple(FactVerdict() for _ in plan))


async def ask_for_json(
    model: AsyncCompleter, system: str, user: str, schema: dict[str, Any]
) -> str:
    """An answer that must be JSON following ``schema``: asked with the schema where the completer can send one
    (``StructuredCompleter``: the bot's, as ``response_format``), in words only otherwise."""
    if isinstance(model, StructuredCompleter):
        return await model.structured(system, user, schema, temperature=0.0)
    return await model(system, user, temperature=0.0)


async def _reading(model: AsyncCompleter, judged: Judged) -> str | None:
    """SEC-5: the model's English reading of a fact in another language (None: not foreign, or no
    answer: the fact is judged by its own words)."""
    if not judged.foreign:
        return None
    try:
        return english_reading(await model(prompts.render("gloss"), judged.new.content))
    except NoAnswer:
        return None


async def _contradicted(model: AsyncCompleter, judged: Judged) -> frozenset[str]:
    """WRITE-5: the extraction model judges whether the new fact contradicts each related one on its subject."""
    found = set()
    for old in judged.related:
        pair = json.dumps({"old": old.content, "new": judged.new.content}, ensure_ascii=False)
        try:
            answer = await model("", prompts.render("contradiction", pair=pair), temperature=0.0)
        except NoAnswer:
            continue  # no verdict: the facts are only linked as related
        if answer.strip().lower().startswith("yes"):
            found.add(old.id)
    return frozenset(found)

"""The one runner of model-calling jobs (``memory.jobs.base``): gather on the memory thread, ask the model on the event
loop, apply on the memory thread in one transaction. When a job runs, and its claim key, is ``bot.schedule``'s; backoff
stays with the callers (``bot.background``, ``bot.daily``); what a job means stays in ``memory/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memory import (
    FAILED,
    AsyncCompleter,
    AsyncRunner,
    Facts,
    Job,
    MemoryEngine,
    NoAnswer,
    WriteFacts,
    Written,
    applied,
    job_charge,
    process_holder,
)

from .model.client import ChatClient, LLMError
from .model.gate import ModelGate
from .spending.attribution import charging

_ReportT = TypeVar("_ReportT")
_AnswerT = TypeVar("_AnswerT")
log = logging.getLogger(__name__)


class ModelCompleter:
    """A ``ChatClient`` as the ``AsyncCompleter`` jobs ask: one system and one user message (no system message when
    it is empty, as the judge and the compaction prompts are sent), and the client's failure as ``NoAnswer``."""

    def __init__(self, llm: ChatClient, gate: ModelGate | None = None) -> None:
        self.llm = llm
        self.gate = gate  # issue 45: background calls give way to replies on a shared local model

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        return await self._ask(system, user, temperature, None)

    async def structured(
        self, system: str, user: str, schema: dict[str, Any], *, temperature: float = 0.0
    ) -> str:
        """ORCH-9: the answer asked with ``response_format`` (a JSON schema) where the server takes it."""
        return await self._ask(system, user, temperature, schema)

    async def _ask(
        self, system: str, user: str, temperature: float, schema: dict[str, Any] | None
    ) -> str:
        messages = [{"role": "system", "content": system}] if system else []

        def ask() -> Awaitable[str]:
            asked = [*messages, {"role": "user", "content": user}]
            return self.llm.complete(asked, temperature=temperature, schema=schema)

        try:
            return await (ask() if self.gate is None else self.gate.background(ask))
        except LLMError as exc:
            raise NoAnswer(str(exc)) from exc


LEASE_S = 300.0  # COMPANION_JOB_LEASE_S: how long a process that died mid-job keeps others from redoing it


class ClaimLost(Exception):
    """This process's claim expired while the model wrote, and another process took the job: the write is dropped."""


@dataclass(slots=True)
class _Lease:
    """A claim on one job's key: ``taken`` when this runner holds it, ``open`` until released with the job's last write."""

    key: str
    taken: bool = True
    open: bool = True


Last = Callable[[Any], bool]  # whether a step's report ends the job (its write releases the claim)


def _always(report: object) -> bool:
    return True


def _failed(facts: Facts | None) -> bool:
    return facts is None or facts.failed


class JobRunner:
    """Runs jobs; a job given a ``claim`` key runs in one process at a time across every process on the store
    (SCALE-1, ``memory.storage.claims``): taken before gather, renewed while the model writes, released in the
    job's last write transaction. Another live holder's job is skipped (None); one whose holder died is redone
    once its lease ran out. ``holder`` is this process's id (``process_holder()``), ``lease_s`` the lease."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        model: AsyncCompleter,
        *,
        holder: str | None = None,
        lease_s: float = LEASE_S,
    ) -> None:
        self.engine, self.runner, self.model = engine, runner, model
        self.holder, self.lease_s = holder or process_holder(), lease_s

    async def run(self, job: Job[Any, Any, _ReportT], claim: str | None = None) -> _ReportT | None:
        """The job's report; None when it found nothing to do, or another process holds ``claim``."""
        async with self._claimed(claim) as lease:
            if lease is not None and not lease.taken:
                return None
            return await self._steps(job, lease, _always)
        return None  # ClaimLost: another process did it

    async def learn(self, job: Job[Any, Any, Facts], claim: str | None = None) -> int | None:
        """A job that learns facts, then their write (``WriteFacts``): the facts stored, None when the job failed.
        With ``claim``, the claim spans both, and goes with the facts' write (or with the failed step's)."""
        async with self._claimed(claim) as lease:
            if lease is not None and not lease.taken:
                return 0
            facts = await self._steps(job, lease, _failed)
            if facts is None:
                return 0
            if facts.failed:
                return None
            written: Written | None = await self._steps(
                WriteFacts(self.engine, facts), lease, _always
            )
            return written.stored if written is not None else 0
        return 0  # ClaimLost: another process did it

    async def _steps(
        self, job: Job[Any, Any, _ReportT], lease: _Lease | None, last: Last
    ) -> _ReportT | None:
        plan = await self.runner.run(job.gather)
        if plan is None:
            return None
        try:
            with charging(job_charge(job, plan)):  # ORCH-14: whose call the ledger files it under
                answer = await self._asked(job, plan, lease)
        except FAILED as exc:
            return await self.runner.run(self._applied, job.failed, plan, exc, lease, last)
        return await self.runner.run(self._applied, job.apply, plan, answer, lease, last)

    async def _asked(
        self, job: Job[Any, _AnswerT, Any], plan: Any, lease: _Lease | None
    ) -> _AnswerT:
        """The ask step; a held claim is renewed every third of its lease meanwhile (a slow model keeps its job)."""
        if lease is None:
            return await job.ask(plan, self.model)
        keeper = asyncio.create_task(self._keep(lease.key), name=f"lease {lease.key}")
        try:
            return await job.ask(plan, self.model)
        finally:
            keeper.cancel()

    async def _keep(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not await self.runner.run(self.engine.claims.renew, key, self.holder, self.lease_s):
                log.warning(
                    "the claim on %s was lost while the model wrote (this process stalled past its lease)",
                    key,
                )
                return

    def _applied(
        self,
        step: Callable[[Any, Any], _ReportT],
        plan: Any,
        answer: Any,
        lease: _Lease | None,
        last: Last,
    ) -> _ReportT:
        """A step's write in one transaction (memory thread); a held claim is checked first and released with the
        job's last write, so a crash before the commit leaves both undone and the job to be redone."""
        if lease is None:
            return applied(self.engine, step, plan, answer)
        claims = self.engine.claims
        with self.engine.transaction():
            if not claims.renew(lease.key, self.holder, self.lease_s):
                raise ClaimLost(lease.key)
            report = step(plan, answer)
            if last(report):
                lease.open = not claims.release(lease.key, self.holder)
            return report

    @contextlib.asynccontextmanager
    async def held(self, key: str, lease_s: float) -> AsyncIterator[bool]:
        """A run that is no job (the retention run) held in one process at a time: True when this
        process holds ``key`` for the run (released on the way out), False when another does."""
        claims = self.engine.claims
        if not await self.runner.run(claims.claim, key, self.holder, lease_s):
            yield False
            return
        try:
            yield True
        finally:
            await self.runner.run(claims.release, key, self.holder)

    @contextlib.asynccontextmanager
    async def _claimed(self, key: str | None) -> AsyncIterator[_Lease | None]:
        """None without a key; a lease not ``taken`` when another live holder has it; else the lease, released on
        the way out if the job ended without a last write (nothing to do, or a bug: another process may try now)."""
        if key is None:
            yield None
            return
        if not await self.runner.run(self.engine.claims.claim, key, self.holder, self.lease_s):
            log.debug("job %s is claimed by another process; skipped", key)
            yield _Lease(key, taken=False, open=False)
            return
        lease = _Lease(key)
        try:
            yield lease
        except ClaimLost:
            lease.open = False  # another process holds it now
            log.warning(
                "job %s was taken over by another process after this one's lease ran out; its write is dropped",
                key,
            )
        finally:
            if lease.open:
                await self.runner.run(self.engine.claims.release, key, self.holder)

"""The one runner of model-calling jobs (``memory.jobs.base``): gather on the memory thread, ask the model on the event
loop, apply on the memory thread in one transaction. Scheduling and backoff stay with the callers
(``bot.background``, ``bot.daily``); what a job means stays in ``memory/``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memory.engine import MemoryEngine
from memory.jobs.base import FAILED, Facts, Job, NoAnswer, WriteFacts, Written, applied
from memory.protocols import AsyncCompleter
from memory.storage.db import AsyncRunner

from .llm import ChatClient, LLMError

ReportT = TypeVar("ReportT")


class ModelCompleter:
    """A ``ChatClient`` as the ``AsyncCompleter`` jobs ask: one system and one user message (no system message when
    it is empty, as the judge and the compaction prompts are sent), and the client's failure as ``NoAnswer``."""

    def __init__(self, llm: ChatClient) -> None:
        self.llm = llm

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        messages = [{"role": "system", "content": system}] if system else []
        try:
            return await self.llm.complete([*messages, {"role": "user", "content": user}], temperature=temperature)
        except LLMError as exc:
            raise NoAnswer(str(exc)) from exc


class JobRunner:
    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, model: AsyncCompleter) -> None:
        self.engine, self.runner, self.model = engine, runner, model

    async def run(self, job: Job[Any, Any, ReportT]) -> ReportT | None:
        """The job's report; None when it found nothing to do."""
        plan = await self.runner.run(job.gather)
        if plan is None:
            return None
        try:
            answer = await job.ask(plan, self.model)
        except FAILED as exc:
            return await self.runner.run(applied, self.engine, job.failed, plan, exc)
        return await self.runner.run(applied, self.engine, job.apply, plan, answer)

    async def learn(self, job: Job[Any, Any, Facts]) -> int | None:
        """A job that learns facts, then their write (``WriteFacts``): the facts stored, None when the job failed."""
        facts = await self.run(job)
        if facts is None:
            return 0
        if facts.failed:
            return None
        written: Written | None = await self.run(WriteFacts(self.engine, facts))
        return written.stored if written is not None else 0

"""Model-calling jobs (``memory.jobs.base``) through the bot's one runner: gather on the memory thread, ask on the loop,
apply in one transaction; what changes while the model writes is not written back."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from conftest import ScriptedCompleter, count, remember

from bot.jobs import JobRunner
from memory.jobs.base import NoAnswer
from memory.jobs.upkeep import Consolidation
from memory.storage.db import AsyncRunner
from memory.upkeep.forgetting import forget_memory
from memory.write.extraction import BadAnswer
from tests.memory.test_memory_maintenance import MERGED, PETS


class AsyncScripted:
    """A scripted model, awaited as the jobs await theirs."""

    def __init__(self, *answers: str | BaseException, before=None):
        self.scripted, self.before = ScriptedCompleter(*answers), before
        self.calls = self.scripted.calls

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        if self.before is not None:
            await self.before()  # what happens elsewhere while the model writes
        return self.scripted(system, user, temperature=temperature)


@pytest.fixture
async def runner():
    runner = AsyncRunner()
    yield runner
    runner.shutdown()


@pytest.fixture
def cluster(engine):
    return [
        remember(engine, text, subject=f"pet {i}", scope_id="alice") for i, text in enumerate(PETS)
    ]


async def test_a_scheduled_consolidation_merges_a_cluster_with_the_model_awaited_off_the_memory_thread(
    engine, runner, cluster
):
    model = AsyncScripted(json.dumps(MERGED))
    report = await JobRunner(engine, runner, model).run(Consolidation(engine))
    assert report is not None and (report.clusters, report.merged_rows, report.failures) == (
        1,
        3,
        0,
    )
    assert engine.memory_rows.get(report.new_ids[0]).content == MERGED["content"]
    assert all(engine.memory_rows.get(m.id).consolidated_into == report.new_ids[0] for m in cluster)
    assert model.calls[0]["temperature"] == 0.0


async def test_a_memory_forgotten_while_the_model_writes_the_merge_is_not_merged_back(
    engine, runner, cluster
):
    async def forget_one() -> None:
        await runner.run(forget_memory, engine, cluster[1].id)

    report = await JobRunner(
        engine, runner, AsyncScripted(json.dumps(MERGED), before=forget_one)
    ).run(Consolidation(engine))
    assert report is not None and report.new_ids == () and report.merged_rows == 0
    assert count(engine, "memories", "content = ?", (MERGED["content"],)) == 0
    assert all(
        engine.memory_rows.get(m.id).consolidated_into is None for m in (cluster[0], cluster[2])
    )


async def test_a_model_that_is_down_stops_consolidation_and_merges_nothing(engine, runner, cluster):
    report = await JobRunner(engine, runner, AsyncScripted(NoAnswer("down"))).run(
        Consolidation(engine)
    )
    assert report is not None and (report.merged_rows, report.failures) == (0, 1)
    assert all(engine.memory_rows.get(m.id).consolidated_into is None for m in cluster)


@dataclass(frozen=True)
class Recording:
    """A job that records which steps ran, and on which thread."""

    steps: list[str]
    fails_with: Exception | None = None

    def gather(self) -> str:
        self.steps.append("gather")
        return "plan"

    async def ask(self, plan: str, model) -> str:
        self.steps.append("ask")
        if self.fails_with is not None:
            raise self.fails_with
        return "answer"

    def apply(self, plan: str, answer: str) -> str:
        self.steps.append(f"apply {plan} {answer}")
        return "applied"

    def failed(self, plan: str, error: Exception) -> str:
        self.steps.append(f"failed {plan} {type(error).__name__}")
        return "failed"


@pytest.mark.parametrize("error", [NoAnswer("the model is down"), BadAnswer("not JSON")])
async def test_a_job_whose_model_fails_runs_its_failed_step_instead_of_apply(engine, runner, error):
    steps: list[str] = []
    assert await JobRunner(engine, runner, AsyncScripted()).run(Recording(steps, error)) == "failed"
    assert steps == ["gather", "ask", f"failed plan {type(error).__name__}"]


async def test_a_bug_in_a_job_is_not_taken_for_a_model_failure(engine, runner):
    steps: list[str] = []
    with pytest.raises(KeyError):
        await JobRunner(engine, runner, AsyncScripted()).run(Recording(steps, KeyError("bug")))
    # left to the caller's edge (backoff), never recorded as the model's failure
    assert steps == [
        "gather",
        "ask",
    ]

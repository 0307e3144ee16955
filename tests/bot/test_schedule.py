"""One schedule (``bot.schedule``): every periodic job with its cadence and its claim key, in one table; the runtime
puts on its scheduler exactly the table's cron jobs, and no other module writes a claim key or adds a job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger

from bot.schedule import CRONS, PERIODIC, TICK, TICKED, Periodic
from memory.clock import FakeClock
from tests.pipeline_support import build_runtime

ROOT = Path(__file__).resolve().parents[2]
CRONS_SET = {
    "consolidation_cron": "7 2 * * *",
    "maintenance_cron": "8 2 * * *",
    "daily_reflection_cron": "9 2 * * *",
    "bulletin_cron": "*/7 * * * *",
    "checkin_cron": "*/9 * * * *",
    "retention_cron": "11 * * * *",
}


async def test_the_runtime_schedules_each_cron_job_of_the_table_on_its_own_cron_and_no_other(
    tmp_path, srv
):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), **CRONS_SET)
    try:
        jobs = {job.id: job for job in runtime._scheduler().get_jobs()}
        # the full bot has every part: each cron job is on
        assert set(jobs) == {job.name for job in CRONS}
        for periodic in CRONS:
            expected = CronTrigger.from_crontab(periodic.cron(runtime.schedule), timezone="UTC")
            assert str(jobs[periodic.name].trigger) == str(expected), periodic.name
            assert (
                getattr(jobs[periodic.name], "next_run_time", None) is not None
            ) is periodic.at_start, periodic.name
        # the settings reach it
        assert {periodic.cron(runtime.schedule) for periodic in CRONS} >= set(CRONS_SET.values())
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()


def test_the_table_names_each_job_once_and_makes_its_claim_keys():
    assert len({job.name for job in PERIODIC}) == len(PERIODIC)
    assert [job.name for job in TICKED] == [
        "extraction",
        "reflection",
        "compaction",
        "summary-expiry",
        "journals",
    ]
    assert all(job.cadence == TICK for job in TICKED) and not any(
        job.cadence == TICK for job in CRONS
    )
    extraction = next(job for job in PERIODIC if job.name == "extraction")
    assert extraction.key(chat="telegram:42") == "extract:telegram:42"
    with pytest.raises(ValueError):
        Periodic(
            "decay-prune", "maintenance_cron"
        ).key()  # a job without a claim has no key to make
    with pytest.raises(KeyError):
        extraction.key(channel="telegram:42")  # a key missing its part is refused, never half made
    with pytest.raises(ValueError):
        extraction.cron(build_schedule())  # a ticked job has no cron


def build_schedule():
    from bot.schedule import Schedule

    return Schedule(True, "0 3 * * *", "30 3 * * *")


# -- nothing else decides: no claim key written outside the table, no job added outside the runtime --------------
def _claim_keys_and_jobs(source: str, path: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "claim" and _written_out(kw.value):
                found.append(f"{path}:{node.lineno} claim={ast.unparse(kw.value)}")
        called = (
            node.func.attr
            if isinstance(node.func, ast.Attribute)
            else getattr(node.func, "id", None)
        )
        if called == "add_job" and path != "bot/runtime.py":
            found.append(f"{path}:{node.lineno} add_job")
        keyed = (
            called == "run"
            and len(node.args) > 1
            and ast.unparse(node.args[0]).endswith("claims.claim")
        )
        if keyed and _written_out(node.args[1]):
            found.append(f"{path}:{node.lineno} claims.claim({ast.unparse(node.args[1])})")
    return found


def _written_out(node: ast.expr) -> bool:
    """A key written in place: a string, an f-string, or a module's own constant (``CLAIM = "retention"``)."""
    return isinstance(node, (ast.Constant, ast.JoinedStr)) or (
        isinstance(node, ast.Name) and node.id.isupper()
    )


def decided_elsewhere(root: Path = ROOT) -> list[str]:
    return [
        hit
        for package in ("bot", "memory", "voice")
        for path in sorted((root / package).rglob("*.py"))
        if path.relative_to(root).as_posix() != "bot/schedule.py"
        for hit in _claim_keys_and_jobs(
            path.read_text(encoding="utf-8"), path.relative_to(root).as_posix()
        )
    ]


def test_no_module_but_the_schedule_writes_a_claim_key_and_none_but_the_runtime_adds_a_job():
    assert decided_elsewhere() == []


def test_the_check_finds_a_claim_key_or_a_job_planted_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "memory").mkdir()
    (tmp_path / "voice").mkdir()
    (tmp_path / "bot" / "daily.py").write_text(
        "async def run(jobs, job, chat, runner, claims):\n"
        "    await jobs.learn(job, claim=f'daily:{chat}')\n"
        "    await runner.run(claims.claim, CLAIM, 'me', 60)\n"
        "    await jobs.run(job, claim=DAILY.key(chat=chat))\n"
    )
    (tmp_path / "bot" / "health.py").write_text(
        "def later(scheduler, f):\n    scheduler.add_job(f, 'interval', seconds=5)\n"
    )
    assert decided_elsewhere(tmp_path) == [
        "bot/daily.py:2 claim=f'daily:{chat}'",
        "bot/daily.py:3 claims.claim(CLAIM)",
        "bot/health.py:2 add_job",
    ]

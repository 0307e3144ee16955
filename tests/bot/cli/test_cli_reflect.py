"""``companion reflect daily`` (issue 22): the daily reflection on demand, and a dry run that shows what it
would store and stores nothing. Yesterday's talk is seeded through the real runtime; the CLI runs on it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pipeline_support import build_runtime, facts, group

from memory.clock import FakeClock
from tests.bot.test_daily_reflection import MARK
from tests.cli_support import Cli
from tests.fakes import FakeOpenAI

FACT = {"speaker": "P1", "subject": "work", "content": "Alice works at the Elm Street bakery"}


def yesterday_noon() -> float:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (today - timedelta(hours=12)).timestamp()


async def seed(cli: Cli, srv: FakeOpenAI) -> str:
    runtime = build_runtime(cli.db, srv, FakeClock(yesterday_noon()))
    await runtime.orchestrator.observe(
        group("discord", "g1", "alice", "I work at the Elm Street bakery now", name="Alice")
    )
    runtime.engine.close()
    runtime.runner.shutdown()
    return datetime.fromtimestamp(yesterday_noon(), UTC).date().isoformat()


def reflections(srv: FakeOpenAI) -> int:
    return sum(MARK in b["messages"][-1]["content"] for b in srv.chat_requests)


@pytest.fixture
async def srv(monkeypatch: pytest.MonkeyPatch):
    async with FakeOpenAI() as server:
        server.default = lambda body: (
            facts(FACT) if MARK in body["messages"][-1]["content"] else "no"
        )
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        yield server


async def test_a_dry_run_shows_the_facts_and_stores_nothing_then_the_real_run_stores_them(
    cli: Cli, srv: FakeOpenAI
) -> None:
    day = await seed(cli, srv)
    dry = await asyncio.to_thread(cli, "reflect", "daily", "--dry-run", "--day", day)
    assert dry.code == 0, dry.err
    assert (
        f"{day}: would store 1 fact" in dry.out
        and "Alice works at the Elm Street bakery" in dry.out
    )
    assert cli("memory", "list", "--json").json() == []  # nothing stored, and the day is still due
    real = await asyncio.to_thread(cli, "reflect", "daily", "--json")
    assert real.code == 0 and [(c["day"], c["stored"]) for c in real.json()["chats"]] == [(day, 1)]
    again = await asyncio.to_thread(cli, "reflect", "daily")
    assert again.code == 0 and "nothing to reflect" in again.out and reflections(srv) == 2


async def test_a_day_with_nothing_to_reflect_says_so(cli: Cli, srv: FakeOpenAI) -> None:
    await seed(cli, srv)
    result = await asyncio.to_thread(cli, "reflect", "daily", "--day", "2020-01-01")
    assert (
        result.code == 0
        and "nothing to reflect on 2020-01-01" in result.out
        and reflections(srv) == 0
    )


def test_a_malformed_day_is_refused(cli: Cli) -> None:
    result = cli("reflect", "daily", "--day", "yesterday")
    assert result.code == 2 and "expected a date like" in result.error_line()


def test_on_the_first_day_a_dry_run_says_today_is_not_over_rather_than_every_day_is_done(
    cli: Cli,
) -> None:
    result = cli("reflect", "daily", "--dry-run")
    assert (
        result.code == 0
        and "today is reflected once it is over" in result.out
        and "every day is done" not in result.out
    )

"""Running it for a community (OPS-5): /healthz and /metrics, the per-person rate limit, a model without tool
calling, the extraction model on its own server. The real runtime against the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request

import pytest

from bot.composition import build_health, extraction_server, front_door_of
from bot.config import load_settings
from bot.ratelimit import SLOW_DOWN, MessageLimit, Window, front_door
from memory.clock import FakeClock
from tests.fakes import FakeOpenAI, HTTPError
from tests.pipeline_support import build_runtime, dm, facts


async def get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    return await asyncio.to_thread(fetch)


class Ticking:
    """A clock for the rate limit that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_healthz_and_metrics_answer_on_loopback_and_count_turns_errors_and_queues(
    tmp_path, srv
) -> None:
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), health_port=0)
    await runtime.start(background_loop=False)
    health = build_health(load_settings(_env_file=None, health_port=0, embeddings="none"), runtime)
    await health.start()
    try:
        assert health.host == "127.0.0.1" and health.port > 0
        status, body = await get(f"http://127.0.0.1:{health.port}/healthz")
        assert status == 200 and json.loads(body)["ok"] is True
        door = front_door_of(load_settings(_env_file=None, embeddings="none"), runtime)
        srv.script("Hi Alice!")
        assert (await door.reply(dm("telegram", "7", "hello", mid="1"))).text == "Hi Alice!"
        srv.script(HTTPError(500), HTTPError(500), HTTPError(500))
        assert (await door.reply(dm("telegram", "7", "still there?", mid="2"))).failed
        status, text = await get(f"http://127.0.0.1:{health.port}/metrics")
        metrics = dict(line.split(" ", 1) for line in text.splitlines() if not line.startswith("#"))
        assert (
            status == 200
            and metrics["companion_turns_total"] == "2"
            and metrics["companion_turn_errors_total"] == "1"
        )
        assert (
            metrics["companion_model_calls_total"] == "4"
            and metrics["companion_model_errors_total"] == "3"
        )
        assert float(metrics["companion_model_seconds_total"]) > 0
        assert (
            metrics["companion_extraction_queue"] == "2"
            and metrics["companion_dead_letters"] == "0"
        )
        assert (await get(f"http://127.0.0.1:{health.port}/nope"))[0] == 404
        # a store that no longer answers is the finding
        await runtime.runner.run(runtime.engine.close)
        status, body = await get(f"http://127.0.0.1:{health.port}/healthz")
        assert status == 503 and json.loads(body)["problem"] == "store unavailable"
    finally:
        await health.stop()
        runtime.runner.shutdown()


async def test_a_flooding_member_gets_one_polite_line_and_never_reaches_the_model(rt, srv) -> None:
    clock = Ticking()
    door = front_door(
        rt.orchestrator,
        Window(MessageLimit(3, 60.0), rt.engine.rate_windows, rt.runner, now=clock),
        rt.metrics,
    )
    # (replies that differ: the same "sure" a third time in a row is asked again)
    said = {"spam 0": "sure", "spam 1": "ok", "spam 2": "fine"}

    def reply(body):
        asked = str(body["messages"][-1]["content"])
        return next((answer for line, answer in said.items() if line in asked), "yes")

    srv.default = reply
    answers = [
        (await door.reply(dm("discord", "9", f"spam {i}", mid=f"s{i}"))).text for i in range(8)
    ]
    # told once, then silence: no flood of apologies
    assert answers == ["sure", "ok", "fine", SLOW_DOWN] + [""] * 4
    assert len(srv.chat_requests) == 3 and rt.metrics.rate_limited == 5
    assert (
        await door.reply(dm("telegram", "5", "hi", mid="o1"))
    ).text == "yes"  # someone else is not held back
    # commands are never limited
    assert "forget" in await door.command("forget", "", dm("discord", "9", "/forget"))
    clock.now += 61
    assert (await door.reply(dm("discord", "9", "better now?", mid="later"))).text == "yes"


def test_the_rate_limit_is_a_setting_and_zero_turns_it_off() -> None:
    assert load_settings(_env_file=None).rate_limit_messages == 10
    with pytest.raises(Exception, match="COMPANION_RATE_LIMIT_MESSAGES"):
        load_settings(_env_file=None, rate_limit_messages=-1)
    inner = object()
    off = Window(MessageLimit(0, 60.0), None, None)  # type: ignore[arg-type]  # never asked: a limit of 0 is no limit
    assert front_door(inner, off, None) is inner  # type: ignore[arg-type]


async def test_a_model_that_rejects_tools_still_chats_remembers_and_forgets(
    tmp_path, caplog
) -> None:
    def no_tools(body):
        if body.get("tools"):
            return HTTPError(
                400,
                {
                    "error": {
                        "message": "registry.ollama.ai/library/gemma:2b does not support tools"
                    }
                },
            )
        if "extract" in json.dumps(body["messages"][0]).lower():
            return facts(
                {"about": "Alice", "subject": "cat", "content": "Alice has a cat called Biscuit"}
            )
        return "Biscuit is a lovely name."

    async with FakeOpenAI() as srv:
        srv.default = no_tools
        runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
        await runtime.start(background_loop=False)
        try:
            with caplog.at_level(logging.WARNING):
                first = await runtime.orchestrator.reply(
                    dm("telegram", "7", "my cat is called Biscuit", mid="1")
                )
                second = await runtime.orchestrator.reply(
                    dm("telegram", "7", "isn't that a nice name?", mid="2")
                )
            assert first.text == second.text == "Biscuit is a lovely name." and not first.failed
            off = [r for r in caplog.records if "tools are off" in r.getMessage()]
            assert len(off) == 1 and "gemma" in off[0].getMessage()  # one line, naming why
            # asked once, then never offered
            assert ["tools" in body for body in srv.chat_requests] == [
                True,
                False,
                False,
            ]
            runtime.engine.clock.advance(31)
            assert (await runtime.background.tick())[
                "extracted"
            ] == 1  # remembered through extraction
            said = await runtime.orchestrator.command(
                "forget", "Biscuit", dm("telegram", "7", "/forget Biscuit")
            )
            assert (
                "Biscuit" in said and runtime.engine.db.scalar("SELECT COUNT(*) FROM memories") == 0
            )
        finally:
            srv.default = lambda body: "[]"
            await runtime.stop()


async def test_the_extraction_model_can_live_on_its_own_server(tmp_path) -> None:
    async with FakeOpenAI() as chat, FakeOpenAI() as local:
        local.default = lambda body: facts(
            {"about": "Alice", "subject": "job", "content": "Alice bakes at Acme"}
        )
        runtime = build_runtime(
            tmp_path / "bot.db",
            chat,
            FakeClock(),
            extraction_base_url=local.base_url,
            extraction_api_key="local-key",
        )
        await runtime.start(background_loop=False)
        try:
            chat.script("Nice!")
            await runtime.orchestrator.reply(dm("telegram", "7", "I bake at Acme", mid="1"))
            runtime.engine.clock.advance(31)
            assert (await runtime.background.tick())["extracted"] == 1
            assert len(chat.chat_requests) == 1 and len(local.chat_requests) == 1
        finally:
            local.default = lambda body: "[]"
            await runtime.stop()


async def test_stop_closes_both_model_clients_connection_pools(tmp_path) -> None:
    """The SDK closes a dropped client's pool only on a running loop: ``stop`` closes both."""
    async with FakeOpenAI() as chat, FakeOpenAI() as local:
        local.default = lambda body: "[]"
        runtime = build_runtime(
            tmp_path / "bot.db", chat, FakeClock(), extraction_base_url=local.base_url
        )
        await runtime.start(background_loop=False)
        chat.script("Nice!")
        await runtime.orchestrator.reply(dm("telegram", "7", "I bake at Acme", mid="1"))
        runtime.engine.clock.advance(31)
        await runtime.background.tick()
        assert len(chat.chat_requests) == 1 and len(local.chat_requests) == 1
        pools = [model._client for model in runtime.models]
        assert sorted(str(pool.base_url) for pool in pools) == sorted(
            [chat.base_url + "/", local.base_url + "/"]
        )
        assert not any(pool.is_closed() for pool in pools)
        await runtime.stop()
        assert all(pool.is_closed() for pool in pools)


def test_the_extraction_server_never_gets_the_chat_servers_key() -> None:
    settings = load_settings(
        _env_file=None, llm_api_key="hosted-secret", extraction_base_url="http://127.0.0.1:11434/v1"
    )
    assert extraction_server(settings) == ("http://127.0.0.1:11434/v1", "")
    assert extraction_server(load_settings(_env_file=None, llm_api_key="k"))[1] == "k"

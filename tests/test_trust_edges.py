"""Issue 31 item 12: the edges, each kept by a test named after its promise (healthz, store copy, two writers,
persona texts, the persona's audit rows, the login throttle, the rate limit per person)."""

from __future__ import annotations

import json
import logging

from bot.composition import build_health
from bot.config import load_settings
from memory.clock import FakeClock
from tests.pipeline_support import build_runtime
from tests.test_operations import get


# -- (c) /healthz says what, never why ----------------------------------------------------------------------
async def test_healthz_says_only_store_unavailable_and_the_log_says_why(tmp_path, srv, caplog) -> None:
    runtime = build_runtime(tmp_path / "secret-folder" / "bot.db", srv, FakeClock(), health_port=0)
    await runtime.start(background_loop=False)
    health = build_health(load_settings(_env_file=None, health_port=0, embeddings="none"), runtime)
    await health.start()
    try:
        await runtime.runner.run(runtime.engine.close)
        caplog.set_level(logging.WARNING, logger="bot.health")
        status, body = await get(f"http://127.0.0.1:{health.port}/healthz")
    finally:
        await health.stop()
        runtime.runner.shutdown()
    assert (status, json.loads(body)) == (503, {"ok": False, "problem": "store unavailable"})
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records) + str([r.exc_info for r in caplog.records])
    assert "store does not answer" in logged and "closed" in logged.lower()  # the detail, for the operator

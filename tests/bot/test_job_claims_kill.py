"""A bot process killed mid-extraction (SIGKILL) leaves its claim to expire, and another process on the same store
then extracts that batch exactly once (SCALE-1). The first process is the real runtime with its real background
loop (what ``companion run`` starts) in a child interpreter, asking the fake OpenAI server, which holds the
extraction answer until the child is killed; the second is the runtime again, in this process, on a fake clock
that passes the lease without waiting for it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import HashEmbedder, dm_ctx, say
from pipeline_support import build_runtime, facts

from memory.clock import FakeClock, SystemClock
from memory.engine import MemoryEngine
from tests.fakes import Delay

ROOT = Path(__file__).resolve().parents[2]
LEASE = 60.0
KEY = "discord:dm-alice"

CHILD = """
import asyncio, sys
sys.path.insert(0, {root!r})
from bot.composition import build_runtime as compose
from bot.config import load_settings
from tests.conftest import HashEmbedder

async def main():
    settings = load_settings(llm_base_url={url!r}, llm_api_key="k", embeddings="none", scheduler_enabled=False,
                             llm_max_retries=0, job_lease_s={lease!r}, **{store!r})
    runtime = compose(settings, embedder=HashEmbedder())
    await runtime.start()  # the background loop, ticking every second
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def where(store_url: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """(db_path, settings) that open ``store_url``: the SQLite file itself, or COMPANION_DATABASE_URL."""
    if store_url.startswith("postgresql"):
        return tmp_path / "unused.db", {"database_url": store_url}
    return Path(store_url), {"db_path": store_url}


def buffered(store_url: str) -> None:
    """Alice said something worth remembering; it waits in the extraction buffer, due now."""
    with MemoryEngine(store_url, HashEmbedder(), SystemClock(), extraction_debounce_s=0) as engine:
        mid = say(engine, "my pet is called Zorb0", author="alice", dm_person="alice")
        engine.buffer.push(
            KEY, dm_ctx("alice"), "my pet is called Zorb0", author_name="Alice", message_id=mid
        )


async def test_a_process_killed_mid_extraction_has_its_batch_extracted_once_by_another_after_the_lease(
    tmp_path, srv, store_url
):
    buffered(store_url)
    db_path, store = where(store_url, tmp_path)
    srv.script(Delay(30.0, "[]"))  # the child's extraction: still being written when the child dies
    source = CHILD.format(root=str(ROOT), url=srv.base_url, lease=LEASE, store=store)
    child = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    try:
        await srv.wait_until(lambda: len(srv.chat_requests) == 1, timeout=60)
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        child.kill()

    clock = FakeClock(time.time())
    runtime = build_runtime(
        db_path, srv, clock, job_lease_s=LEASE, **{k: v for k, v in store.items() if k != "db_path"}
    )
    await runtime.start(background_loop=False)
    try:
        holder = runtime.engine.claims.holder_of(f"extract:{KEY}")
        # the dead child's claim, still live
        assert holder is not None and f":{child.pid}:" in holder[0]
        assert (await runtime.background.tick())["extracted"] == 0 and len(srv.chat_requests) == 1
        clock.advance(LEASE + 1)
        srv.script(
            facts({"speaker": "P1", "subject": "pet", "content": "Alice has a pet called Zorb0"})
        )
        assert (await runtime.background.tick())["extracted"] == 1
        assert len(srv.chat_requests) == 2  # the batch asked about once more, and only once
        assert [m.content for m in runtime.engine.memory_rows.listing(None)] == [
            "Alice has a pet called Zorb0"
        ]
        assert (
            runtime.background.buffer.pending() == 0
            and runtime.engine.claims.holder_of(f"extract:{KEY}") is None
        )
        assert (await runtime.background.tick())["extracted"] == 0 and len(srv.chat_requests) == 2
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()

"""Check-ins survive a SIGKILL at each step (ORCH-8): never sent twice, and still sent when the kill came before
the sending began. The bot runs in a child process against a scripted model and a fake Telegram (python-telegram-bot
talks to it for real); the test kills it at a step, restarts the bot in this process on the same store, and counts
what Telegram received.

    before claim   killed while the model writes the message: the row is pending, so the restart sends it (once the
                   dead process's claim on the job expired)
    after claim    killed between the committed claim and the network call: never sent (the line, memory.storage.checkins)
    after send     killed after Telegram got it, before it was marked sent: never sent again
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.jobs import LEASE_S
from bot.types import IncomingMessage
from memory.clock import DAY, FakeClock
from memory.models import FactKind, MemoryType, NewMemory, Scope, Visibility
from tests.fakes import Delay, FakeTelegram
from tests.pipeline_support import build_runtime

ROOT = Path(__file__).resolve().parents[2]
USER = "7"  # a private Telegram chat's id is its user's id

CHILD = """
import asyncio, sys
sys.path.insert(0, {root!r})
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.composition import build_runtime as compose
from bot.config import load_settings
from tests.conftest import HashEmbedder

def stalled(send, step):
    # The real delivery, with the process left hanging at the step the test kills it in.
    async def deliver(channel_id, text):
        if step == "after-claim":
            print("claimed", flush=True)
            await asyncio.sleep(3600)
        await send(channel_id, text)
        print("sent", flush=True)
        await asyncio.sleep(3600)
    return deliver

async def main():
    settings = load_settings(db_path={db!r}, llm_base_url={url!r}, llm_api_key="k", embeddings="none", scheduler_enabled=False,
                             llm_max_retries=0, checkin_quiet_hours="off")
    runtime = compose(settings, embedder=HashEmbedder())
    await runtime.start(background_loop=False)
    telegram = TelegramAdapter(runtime.orchestrator, "123:abc", base_url={tg!r} + "/bot", base_file_url={tg!r} + "/file/bot")
    await telegram.app.initialize()
    step = {step!r}
    runtime.checkins.deliveries["telegram"] = telegram.send_direct if step == "before-claim" else stalled(telegram.send_direct, step)
    await runtime.checkins.run()
    print("done", flush=True)

asyncio.run(main())
"""


async def prepare(db: Path, srv) -> None:
    """Alice (Telegram) turned check-ins on three days ago and said she runs a race yesterday: it is due now."""
    now = time.time()
    runtime = build_runtime(db, srv, FakeClock(now - 3 * DAY))
    await runtime.start(background_loop=False)
    try:
        hello = IncomingMessage(
            platform="telegram",
            channel_id=USER,
            author_id=USER,
            author_name="Alice",
            text="/checkins on",
        )
        await runtime.orchestrator.command("checkins", "on", hello)
        yesterday = datetime.fromtimestamp(now - DAY, UTC).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        memory = NewMemory(
            content="Alice runs the harbour 10k race",
            subject="race",
            scope=Scope.USER,
            scope_id=f"telegram:{USER}",
            visibility=Visibility.PRIVATE,
            type=MemoryType.EPISODIC,
            kind=FactKind.EVENT,
            valid_from=yesterday.timestamp(),
        )
        assert runtime.engine.memories.add(memory).status == "stored"
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()


async def restart(db: Path, srv, tg: FakeTelegram) -> tuple[int, list[str]]:
    """The bot again, in this process, on the same store, once the killed child's claim on the check-in it was
    writing has expired (SCALE-1): one check-in run; returns (sent now, the rows' states)."""
    runtime = build_runtime(
        db, srv, FakeClock(time.time() + LEASE_S + 1), checkin_quiet_hours="off"
    )
    telegram = TelegramAdapter(
        runtime.orchestrator,
        "123:abc",
        base_url=f"{tg.url}/bot",
        base_file_url=f"{tg.url}/file/bot",
    )
    await runtime.start(background_loop=False)
    await telegram.app.initialize()
    try:
        runtime.checkins.deliveries["telegram"] = telegram.send_direct
        report = await runtime.checkins.run()
        return report.sent, [s for (s,) in runtime.engine.db.execute("SELECT state FROM checkins")]
    finally:
        await telegram.app.shutdown()
        srv.default = lambda body: "[]"
        await runtime.stop()


async def line_from(child: subprocess.Popen, wanted: str, timeout: float = 30.0) -> None:
    """Wait (off the event loop, which serves the fakes) until the child prints ``wanted``."""

    def read() -> None:
        assert child.stdout is not None
        while (line := child.stdout.readline().decode().strip()) != wanted:
            assert line, (
                f"the child ended before {wanted!r}: {child.stderr.read().decode()[-2000:] if child.stderr else ''}"
            )

    await asyncio.wait_for(asyncio.to_thread(read), timeout)


@pytest.mark.parametrize("step", ["before-claim", "after-claim", "after-send"])
async def test_a_checkin_killed_at_any_step_is_never_sent_twice_and_still_sent_if_sending_had_not_begun(
    tmp_path, srv, step
):
    db = tmp_path / "bot.db"
    await prepare(db, srv)
    async with FakeTelegram() as tg:
        srv.script(
            Delay(30.0, "too late") if step == "before-claim" else "How did the harbour 10k go?"
        )
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD.format(root=str(ROOT), db=str(db), url=srv.base_url, tg=tg.url, step=step),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            if step == "before-claim":
                # the model is writing it...
                await srv.wait_until(lambda: len(srv.chat_requests) == 1, timeout=30)
            else:
                await line_from(child, "claimed" if step == "after-claim" else "sent")
            child.send_signal(signal.SIGKILL)
            assert child.wait(10) == -signal.SIGKILL
        finally:
            child.kill()
        before = len(tg.sent)
        srv.script("How did the harbour 10k go?")
        sent, states = await restart(db, srv, tg)
    expected = {
        "before-claim": (0, 1, ["sent"]),
        "after-claim": (0, 0, ["sending"]),
        "after-send": (1, 0, ["sending"]),
    }[step]
    assert (before, sent, states) == expected
    # at most once, and exactly once unless killed past the line
    assert len(tg.sent) == 1 - (step == "after-claim")
    assert all(m["chat_id"] == int(USER) for m in tg.sent)

"""Two processes writing and forgetting on one store at once: no write fails, every forget is complete.

A second writer is ordinary (the dashboard, a CLI command, a second bot). Write transactions take the
write lock when they begin (``BEGIN IMMEDIATE``), so the busy timeout can wait for the other process
instead of failing at once with "database is locked" when a read-then-write transaction must upgrade.

COMPANION_TEST_WRITERS_S sets how long both write (15 s by default; 60 s for a longer soak).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import HashEmbedder

from memory.engine import MemoryEngine
from memory.storage.db import Patience

SECONDS = float(os.environ.get("COMPANION_TEST_WRITERS_S", "15"))
ROOT = Path(__file__).resolve().parents[2]


def _writers(store: Path, names: tuple[str, ...]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tests.store_writer", str(store)]
    procs = [
        subprocess.Popen([*argv, name, str(SECONDS)], stdout=subprocess.PIPE, env=env, cwd=ROOT)
        for name in names
    ]
    outs = [p.communicate(timeout=SECONDS + 120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    return [json.loads(out) for out in outs]


def _traces(engine: MemoryEngine, word: str) -> int:
    """Rows anywhere the word could still be: memories, messages and both full-text indexes."""
    like = f"%{word}%"
    return sum(
        int(engine.db.scalar(sql, (param,)))
        for sql, param in (
            ("SELECT count(*) FROM memories WHERE content LIKE ?1 OR subject LIKE ?1", like),
            ("SELECT count(*) FROM messages WHERE content LIKE ?", like),
            ("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?", f'"{word}"'),
            ("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?", f'"{word}"'),
        )
    )


def test_two_processes_writing_and_forgetting_on_one_store_never_fail_and_every_forget_is_complete(
    tmp_path,
):
    store = tmp_path / "m.db"
    MemoryEngine(
        store, HashEmbedder(), vector_mirror=False
    ).close()  # migrated once, before both start

    results = _writers(store, ("ann", "bob"))

    assert [r["failures"] for r in results] == [[], []]
    assert all(r["forgets"] >= 3 for r in results), results
    engine = MemoryEngine(store, HashEmbedder(), vector_mirror=False)
    try:
        left = {word: n for r in results for word in r["forgotten"] if (n := _traces(engine, word))}
    finally:
        engine.close()
    assert left == {}
    print(
        f"\ntwo writers, {SECONDS:.0f} s: "
        + ", ".join(f"{r['rounds']} rounds, {r['forgets']} forgets" for r in results)
    )


def test_a_waiting_write_looks_at_the_lock_often_and_each_wait_gets_its_full_patience():
    """The busy handler polls every few ms (SQLite's own backs off to 100 ms and missed every sub-millisecond gap
    between another process's back-to-back writes); a wait whose call count does not restart at 0 (a
    checkpoint's) is still a new wait, not one that gave up at once."""
    patience = Patience(0.05)
    assert patience(0) and patience(1)  # waiting
    time.sleep(0.06)
    assert patience(7)  # long after the last call: a new wait, whatever SQLite's count says
    started = time.monotonic()
    tries = 8
    while patience(tries):
        tries += 1
    waited = time.monotonic() - started
    assert 0.04 < waited < 0.5 and tries > 8  # it gave up at its limit, having looked many times

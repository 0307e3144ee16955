"""``companion bench``: latency and throughput of the memory engine on synthetic data (PERF-1).

Each size runs in its own process, so ``peak_rss_mb`` is that size's own peak; ``steady_rss_mb`` is
what the process holds after the load and the queries (the vector mirror, the model, SQLite's page
cache), ``steady_rss_anon_mb`` the part of it that is not file pages, ``load_rss_mb`` what it held
right after the bulk load (the bench's own generator and SQLite's writes, before any recall). Texts
are drawn from an English word list with a Zipf distribution (so FTS posting lists look like real
ones); stored vectors are random unit vectors (latency does not depend on what they mean), and the
query embedding is timed separately with the real offline models: the multilingual default and the
English MiniLM (``_english``).

Placement ``spread`` (the default): rows are spread over guilds of 100k (90k guild memories each, the rest
the facts 20 people said in that guild); the recall is made in one guild with five of those people present.
Up to 100k that guild is almost the whole store (the worst case for a store of that size); at 1M it is one
guild of ten. Placement ``one``: every row is in one guild, one large community (at 1M, 925k rows visible).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import NewMemory, Scope, Visibility
from memory.recall.retrieval import ALL_CHANNELS, Channel
from memory.scopes import RecallContext
from memory.storage.db import AsyncRunner
from memory.storage.embeddings import OnnxMiniLM
from memory.storage.multilingual import MultilingualE5

from .samples import DIM, TextGen, percentiles
from .stores import scratch_store
from .throughput import (
    PASSAGES,
    embed_passage_ms,
    ingest_passages_per_s,
    machine_reference,
    passages,
)
from .turn import make_turn

GUILD_SIZE = 100_000
USERS = 20
BATCH = 5_000
PLACEMENTS = ("spread", "one")
CONCURRENT_TURNS = 50
DB_VARIABLE = "COMPANION_BENCH_DB"  # how run_bench hands --db to the process measuring one size
ProgressLine = Callable[[str], None]
# Given (engine, ctx, text), run everything a turn does before the LLM call (``measure.turn``).
TurnFn = Callable[[MemoryEngine, RecallContext, str], Any]


def _placement(i: int, placement: str) -> tuple[Scope, str, str]:
    """Which partition row i goes to: every tenth a fact one of 20 people said in the guild, the rest that
    guild's lore; ``spread`` gives each block of 100k rows its own guild (ceil(N / 100k) guilds), ``one`` a
    single guild."""
    guild = "bench:g0" if placement == "one" else f"bench:g{i // GUILD_SIZE}"
    if i % 10 == 0:
        return Scope.USER, f"bench:u{(i // 10) % USERS}", guild
    return Scope.GUILD, guild, guild


def _load(engine: MemoryEngine, size: int, gen: TextGen, placement: str) -> float:
    """Bulk-load ``size`` memories; returns rows per second of the store's insert (generation not timed)."""
    spent = 0.0
    for lo in range(0, size, BATCH):
        n = min(BATCH, size - lo)
        vectors, contents, subjects = (
            gen.vectors(n),
            gen.sentences(n, 8, 20),
            gen.sentences(n, 2, 3),
        )
        items = []
        for j in range(n):
            scope, scope_id, guild = _placement(lo + j, placement)
            new = NewMemory(
                content=contents[j],
                subject=subjects[j],
                scope=scope,
                scope_id=scope_id,
                guild_id=guild,
                visibility=Visibility.PUBLIC,
                importance=float(1 + (lo + j) % 10),
            )
            items.append((new, vectors[j]))
        start = time.perf_counter()
        engine.memories.insert_batch(items)
        spent += time.perf_counter() - start
    return size / spent


def _guild_for_query(size: int, placement: str) -> str:
    return "bench:g0" if size <= GUILD_SIZE or placement == "one" else "bench:g3"


def _timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return percentiles(samples) | {"max": round(max(samples), 2)}


def _concurrent(
    turn: TurnFn, engine: MemoryEngine, ctx: RecallContext, texts: list[str]
) -> dict[str, dict[str, float]]:
    """Latency of each of ``CONCURRENT_TURNS`` turns that arrive at once, queued on one ``AsyncRunner`` as the
    bot queues its store calls (so a turn's time includes its wait behind the others), and each turn's own
    work once the runner took it up (``service``)."""
    runner = AsyncRunner()
    service: list[float] = []

    def timed(text: str) -> str:
        start = time.perf_counter()
        try:
            return turn(engine, ctx, text)
        finally:
            service.append((time.perf_counter() - start) * 1000)

    async def one(text: str) -> float:
        start = time.perf_counter()
        await runner.run(timed, text)
        return (time.perf_counter() - start) * 1000

    async def burst() -> list[float]:
        return await asyncio.gather(*(one(texts[i % len(texts)]) for i in range(CONCURRENT_TURNS)))

    try:
        waited = asyncio.run(burst())
    finally:
        runner.shutdown()
    return {"arrival": percentiles(waited), "service": percentiles(service)}


def _rss_mb(kind: str = "") -> float:
    """Resident memory now, all of it or one ``kind`` (``Anon``, ``File``), from Linux ``/proc``."""
    with open("/proc/self/status") as f:
        kb = next(
            int(line.split()[1])
            for line in f
            if line.startswith(f"Rss{kind}:" if kind else "VmRSS:")
        )
    return round(kb / 1024, 1)


ADDS = 200  # memories written through the full write path for ``add_per_s``


def bench_size(
    size: int,
    queries: int,
    turn: TurnFn | None = None,
    placement: str = "spread",
    db: str | None = None,
) -> dict[str, Any]:
    """One size's figures; ``db`` a PostgreSQL server URL to measure there (in a database of its own), else SQLite."""
    gen = TextGen(seed=size)
    # the bundled default (LANG-2), and the English-only MiniLM it replaced, measured side by side
    model, english = MultilingualE5(), OnnxMiniLM()
    with (
        tempfile.TemporaryDirectory(prefix="companion-bench-") as tmp,
        scratch_store(db, Path(tmp), "bench") as where,
    ):
        engine = MemoryEngine(where, model, FakeClock())
        insert_per_s = _load(engine, size, gen, placement)
        # the bulk load itself (the bench's generator, SQLite's writes), before any recall
        load_rss = _rss_mb()
        engine.optimize()  # what the nightly maintenance job does
        ctx = RecallContext(
            platform="bench",
            speaker_id="bench:u0",
            channel_id="c0",
            guild_id=_guild_for_query(size, placement),
            participants=tuple(f"bench:u{i}" for i in range(1, 5)),
        )
        texts = [gen.sentence(3, 6) for _ in range(queries)]
        qvecs = gen.vectors(queries)
        parts = ctx.memory_partitions()
        visible = engine.memory_rows.count_in(parts)

        def run(channels):
            it = iter(range(10**9))
            return lambda: engine.recall.recall(
                ctx,
                texts[(i := next(it)) % queries],
                channels=channels,
                threshold=0.0,
                reinforce=False,
                query_vector=qvecs[i % queries],
            )

        for warm in (ALL_CHANNELS, frozenset({Channel.FTS})):
            _timed(run(warm), 10)
        embed_texts = itertools.cycle(texts)
        result = {
            "size": size,
            "placement": placement,
            "engine": "postgresql" if db else "sqlite",
            "visible": visible,
            "hybrid_ms": _timed(run(ALL_CHANNELS), queries),
            "fts_ms": _timed(run(frozenset({Channel.FTS})), queries),
            "vector_ms": _timed(run(frozenset({Channel.VECTOR})), queries),
            "embed_query_ms": _timed(lambda: model.embed_queries([next(embed_texts)]), queries),
            "embed_query_ms_english": _timed(lambda: english.embed([next(embed_texts)]), queries),
            "insert_per_s": round(insert_per_s),
            "add_per_s": round(_add_rate(engine, gen, _samples(ADDS, queries))),
            "embed_passage_ms": embed_passage_ms(model, passages(gen, _samples(30, queries))),
            "embed_passage_ms_english": embed_passage_ms(
                english, passages(gen, _samples(30, queries))
            ),
            "ingest_passages_per_s": round(
                ingest_passages_per_s(
                    engine, passages(gen, _samples(PASSAGES, queries)), Path(tmp)
                ),
                1,
            ),
        }
        if turn is not None:
            turn_texts = itertools.cycle(texts)
            result["turn_ms"] = _timed(lambda: turn(engine, ctx, next(turn_texts)), queries)
            burst = _concurrent(turn, engine, ctx, texts)
            result["concurrent_turn_ms"], result["concurrent_turn_service_ms"] = (
                burst["arrival"],
                burst["service"],
            )
        result["load_rss_mb"] = load_rss
        result["steady_rss_mb"] = _rss_mb()
        # the rest is file pages (the libraries' code; the store is not memory-mapped), clean and reclaimable
        result["steady_rss_anon_mb"] = _rss_mb("Anon")
        result["mirror_mb"] = round(engine.mirror_budget.used / 2**20, 1)
        engine.close()
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _samples(count: int, queries: int) -> int:
    """A write figure's sample count: its own ``count`` at the default queries, fewer when fewer
    queries were asked for (a quick run, as the tests make: at 3 queries the multilingual
    model's 300 passages took 17 s)."""
    return min(count, max(queries, 5))


def _add_rate(engine: MemoryEngine, gen: TextGen, n: int = ADDS) -> float:
    """The full write path: safety filters, real embedding, dedup search, links."""
    start = time.perf_counter()
    for _ in range(n):
        engine.memories.add(
            NewMemory(
                content=gen.sentence(8, 20),
                subject=gen.sentence(2, 3),
                scope=Scope.USER,
                scope_id="bench:u0",
                guild_id="bench:g0",
            )
        )
    return n / (time.perf_counter() - start)


def reference() -> dict[str, Any]:
    """The machine reference every bench prints beside its figures (fixed numpy and ONNX work)."""
    return machine_reference(OnnxMiniLM())


def run_bench(
    sizes: list[int],
    queries: int = 200,
    progress: ProgressLine | None = None,
    placement: str = "spread",
    db: str | None = None,
) -> dict[str, Any]:
    """Benchmark each size in a fresh interpreter, so each size's ``peak_rss_mb`` is its own; with ``db`` (a
    PostgreSQL URL) each size is loaded into a new database on that server, dropped after."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    if db:  # the server and the role's right to make a database, checked once here rather than in each size's process
        with tempfile.TemporaryDirectory() as tmp, scratch_store(db, Path(tmp), "check"):
            pass
    if progress:
        progress("measuring the machine reference")
    reference = machine_reference(OnnxMiniLM())
    results = []
    for size in sizes:
        if progress:
            progress(f"benchmarking {size:,} memories ({placement}{', PostgreSQL' if db else ''})")
        argv = [sys.executable, "-m", "measure.bench", str(size), str(queries), placement]
        # the URL goes by the environment, not argv: a password in argv is visible to every user's ps
        env = {k: v for k, v in os.environ.items() if k != DB_VARIABLE} | (
            {DB_VARIABLE: db} if db else {}
        )
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"benchmark of {size} memories failed:\n{done.stderr[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        "results": results,
        "queries_per_size": queries,
        "dim": DIM,
        "cpu_count": os.cpu_count(),
        "machine": reference,
    }


if __name__ == "__main__":
    print(
        json.dumps(
            bench_size(
                int(sys.argv[1]),
                int(sys.argv[2]),
                make_turn(),
                sys.argv[3],
                os.environ.get(DB_VARIABLE),
            )
        )
    )

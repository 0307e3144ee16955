"""What keeps the process small (memory.storage.footprint, memory.storage.db): no memory map of the store, a bounded page
cache, the embedding runtime without an arena, freed heap handed back."""

from __future__ import annotations

import sys

import pytest

from memory.storage.db import Database, read_only
from memory.storage.footprint import lean_session, trim_heap


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def test_the_store_is_not_memory_mapped_and_its_page_cache_is_bounded(tmp_path):
    db = Database(tmp_path / "m.db")
    try:
        assert db.scalar("PRAGMA mmap_size") == 0
        assert db.scalar("PRAGMA cache_size") == -32768  # KiB: 32 MB
    finally:
        db.close()
    reader = Database(read_only(tmp_path / "m.db"))  # a reader gets the same settings
    try:
        assert reader.scalar("PRAGMA mmap_size") == 0
    finally:
        reader.close()


def test_the_embedding_session_reuses_one_arena_and_plans_no_blocks_per_shape(minilm):
    options = minilm._session.get_session_options()
    # bounded: no run passes BATCH_TOKENS (memory.storage.embeddings)
    assert options.enable_cpu_mem_arena is True
    assert options.enable_mem_pattern is False
    assert minilm.embed(["a turn after the arena change", ""]).shape == (2, minilm.dim)


def test_lean_session_sets_what_it_says_on_any_options_object():
    import onnxruntime as ort

    options = lean_session(ort.SessionOptions())
    assert (options.enable_cpu_mem_arena, options.enable_mem_pattern) == (True, False)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RSS from /proc, malloc_trim from glibc"
)
def test_freed_heap_goes_back_to_the_os():
    # ~60 MB of small blocks: heap, not separate mappings
    held = [bytearray(1000) for _ in range(60_000)]
    # above them, so freeing them leaves a hole glibc does not give back by itself
    pin = bytearray(1000)
    del held
    before = _rss_mb()
    trim_heap()
    assert _rss_mb() < before - 20
    assert len(pin) == 1000


def test_trim_heap_is_harmless_to_call_again_and_again():
    for _ in range(3):
        trim_heap()

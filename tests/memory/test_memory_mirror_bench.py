"""``companion bench`` says where its rows were placed and what memory the process holds at rest."""

from __future__ import annotations

import pytest

bench = pytest.importorskip("measure.bench")


def test_placement_one_puts_every_row_in_one_guild_and_spread_a_guild_per_100k():
    assert [bench._placement(i, "one")[2] for i in (0, 150_000, 999_999)] == ["bench:g0"] * 3
    assert [bench._placement(i, "spread")[2] for i in (0, 150_000, 999_999)] == [
        "bench:g0",
        "bench:g1",
        "bench:g9",
    ]
    assert bench._guild_for_query(1_000_000, "one") == "bench:g0"


def test_a_bench_run_reports_its_placement_and_its_steady_memory():
    result = bench.run_bench([200], queries=3, placement="one")["results"][0]
    # 180 guild rows, a fact of each of the 5 present
    assert result["placement"] == "one" and result["visible"] == 185
    assert 0 < result["steady_rss_anon_mb"] < result["steady_rss_mb"] and result["peak_rss_mb"] > 0
    burst, own = result["concurrent_turn_ms"], result["concurrent_turn_service_ms"]
    assert burst["p50"] <= burst["p95"] and own["p50"] <= own["p95"]
    # a turn's own work is part of its time from arrival, never more
    assert own["p95"] <= burst["p95"]
    assert "hybrid_ms" in result and "turn_ms" in result and result["mirror_mb"] > 0
    with pytest.raises(ValueError, match="placement"):
        bench.run_bench([200], placement="everywhere")

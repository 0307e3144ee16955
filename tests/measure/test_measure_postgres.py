"""``companion bench`` and ``companion eval locomo`` on PostgreSQL (``--db postgresql://...``, SCALE-1): the same
figures as on SQLite, each measured store in a database of its own on that server, dropped after.

The server is the tests' own (``tests/pg_support.py``); ``pg_url`` names an empty database on it, which the
measurements must leave as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest
from conftest import HashEmbedder

from bot.cli import main
from measure.bench import run_bench
from measure.evaluation import evaluate_locomo
from measure.stores import MeasureStoreError, scratch_store
from tests.measure.test_measure_eval import SAMPLES, write


def _databases(url: str) -> set[str]:
    with psycopg.connect(url) as con:
        return {name for (name,) in con.execute("SELECT datname FROM pg_database")}


def _tables(url: str) -> int:
    with psycopg.connect(url) as con:
        return int(
            con.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
        )


# what `companion bench` reports for a size on SQLite (read from a real run; a bench run costs ~30 s, so this test
# does not make a second one on SQLite: tests/memory/test_memory_mirror_bench.py runs that engine)
SQLITE_FIELDS = {
    "size", "placement", "engine", "visible", "hybrid_ms", "fts_ms", "vector_ms", "embed_query_ms",
    "embed_query_ms_english", "insert_per_s", "add_per_s", "embed_passage_ms", "embed_passage_ms_english",
    "ingest_passages_per_s", "turn_ms", "concurrent_turn_ms", "concurrent_turn_service_ms", "load_rss_mb",
    "steady_rss_mb", "steady_rss_anon_mb", "mirror_mb", "peak_rss_mb",
}  # fmt: skip


def test_bench_on_postgresql_reports_the_same_fields_as_on_sqlite_and_leaves_the_server_as_it_was(
    pg_url: str,
) -> None:
    before = _databases(pg_url)
    on_pg = run_bench([200], queries=3, db=pg_url)["results"][0]
    assert set(on_pg) == SQLITE_FIELDS and on_pg["engine"] == "postgresql"
    # the rows placed as on SQLite: 180 guild rows, a fact of each of the 5 present
    assert on_pg["visible"] == 185
    assert (
        set(on_pg["hybrid_ms"]) == {"p50", "p95", "max"}
        and on_pg["turn_ms"]["p50"] > 0
        and on_pg["mirror_mb"] > 0
    )
    # its database dropped; the named one untouched
    assert _databases(pg_url) == before and _tables(pg_url) == 0


def test_eval_on_postgresql_measures_every_conversation_each_in_a_database_dropped_after(
    pg_url: str, tmp_path: Path
) -> None:
    before = _databases(pg_url)
    data = write(tmp_path / "d.json", SAMPLES)
    on_pg = evaluate_locomo(data, HashEmbedder(), db=pg_url)
    on_sqlite = evaluate_locomo(data, HashEmbedder())
    assert (
        on_pg["engine"] == "postgresql"
        and on_pg["samples"] == 3
        and on_pg["questions"] == on_sqlite["questions"]
    )
    # three short turns a conversation: the evidence turn shares words with its question on either engine
    assert (
        on_pg["methods"]["bm25"]["cat1-4"]["R@5"]
        == on_sqlite["methods"]["bm25"]["cat1-4"]["R@5"]
        == 100.0
    )
    assert _databases(pg_url) == before


def test_a_store_that_fails_midway_still_has_its_database_dropped(
    pg_url: str, tmp_path: Path
) -> None:
    before = _databases(pg_url)
    with (
        pytest.raises(RuntimeError, match="midway"),
        scratch_store(pg_url, tmp_path, "sample/with odd:id") as where,
    ):
        assert str(where) != pg_url and "companion_sample_with_odd_id_" in str(where)
        raise RuntimeError("midway")
    assert _databases(pg_url) == before


def test_a_db_that_is_not_a_postgresql_url_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(MeasureStoreError, match="postgresql://"):
        run_bench([200], db=str(tmp_path / "x.db"))
    with pytest.raises(MeasureStoreError, match="postgresql://"):
        evaluate_locomo(write(tmp_path / "d.json", SAMPLES), None, db="sqlite:///x.db")


def test_a_server_that_refuses_is_one_error_line_naming_no_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("COMPANION_")]:
        monkeypatch.delenv(name)
    unreachable = "postgresql://bench:s3cret@127.0.0.1:9/x?connect_timeout=2"
    code = main(
        [
            "--embeddings",
            "none",
            "eval",
            "locomo",
            str(write(tmp_path / "d.json", SAMPLES)),
            "--db",
            unreachable,
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and "companion: error:" in err and "Traceback" not in err and "s3cret" not in err
    )


def test_eval_from_the_command_line_measures_the_server_given_by_db(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("COMPANION_")]:
        monkeypatch.delenv(name)
    code = main(
        [
            "--embeddings",
            "none",
            "eval",
            "locomo",
            str(write(tmp_path / "d.json", SAMPLES)),
            "--db",
            pg_url,
            "--json",
        ]
    )
    assert code == 0 and '"engine": "postgresql"' in capsys.readouterr().out

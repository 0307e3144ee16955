"""``companion bench`` and ``companion eval locomo`` on PostgreSQL (``--db postgresql://...``, SCALE-1): the same
figures as on SQLite, each measured store in a database of its own on that server, dropped after.

The server is the tests' own (``tests/pg_support.py``); ``pg_url`` names an empty database on it, which the
measurements must leave as it was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bot.cli import main
from measure.bench import run_bench
from measure.evaluation import evaluate_locomo
from measure.stores import MeasureStoreError, scratch_store
from tests.conftest import HashEmbedder
from tests.measure.test_measure_eval import SAMPLES, write


def _databases(url: str) -> set[str]:
    with psycopg.connect(url) as con:
        return {name for (name,) in con.execute("SELECT datname FROM pg_database")}


def _tables(url: str) -> int:
    with psycopg.connect(url) as con:
        return int(con.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0])


def _fields(record: dict[str, Any], prefix: str = "") -> set[str]:
    """Every key of a (nested) bench record, as ``hybrid_ms.p95``."""
    out: set[str] = set()
    for key, value in record.items():
        out |= _fields(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key}
    return out


def test_bench_on_postgresql_reports_the_same_fields_as_on_sqlite_and_leaves_the_server_as_it_was(pg_url: str) -> None:
    before = _databases(pg_url)
    on_pg = run_bench([200], queries=3, db=pg_url)["results"][0]
    on_sqlite = run_bench([200], queries=3)["results"][0]
    assert on_pg["engine"] == "postgresql" and on_sqlite["engine"] == "sqlite"
    assert _fields(on_pg) == _fields(on_sqlite)
    assert on_pg["visible"] == on_sqlite["visible"] == 185  # the same rows placed the same way
    assert on_pg["turn_ms"]["p50"] > 0 and on_pg["mirror_mb"] > 0
    assert _databases(pg_url) == before and _tables(pg_url) == 0  # its database dropped; the named one untouched


def test_eval_on_postgresql_measures_every_conversation_each_in_a_database_dropped_after(pg_url: str, tmp_path: Path) -> None:
    before = _databases(pg_url)
    data = write(tmp_path / "d.json", SAMPLES)
    on_pg = evaluate_locomo(data, HashEmbedder(), db=pg_url)
    on_sqlite = evaluate_locomo(data, HashEmbedder())
    assert on_pg["engine"] == "postgresql" and on_pg["samples"] == 3 and on_pg["questions"] == on_sqlite["questions"]
    # three short turns a conversation: the evidence turn shares words with its question on either engine
    assert on_pg["methods"]["bm25"]["cat1-4"]["R@5"] == on_sqlite["methods"]["bm25"]["cat1-4"]["R@5"] == 100.0
    assert _databases(pg_url) == before


def test_a_store_that_fails_midway_still_has_its_database_dropped(pg_url: str, tmp_path: Path) -> None:
    before = _databases(pg_url)
    with pytest.raises(RuntimeError, match="midway"), scratch_store(pg_url, tmp_path, "sample/with odd:id") as where:
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
    code = main(["--embeddings", "none", "eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)), "--db", unreachable])
    err = capsys.readouterr().err
    assert code == 2 and "companion: error:" in err and "Traceback" not in err and "s3cret" not in err


def test_eval_from_the_command_line_measures_the_server_given_by_db(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("COMPANION_")]:
        monkeypatch.delenv(name)
    code = main(["--embeddings", "none", "eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)), "--db", pg_url, "--json"])
    assert code == 0 and '"engine": "postgresql"' in capsys.readouterr().out

"""``companion store copy SRC DST`` at the command line: a table of counts and exit 0 when every table agrees, exit 1
when one does not, and a refusal as one error line with exit 2 and nothing written."""

from __future__ import annotations

import numpy as np
from conftest import HashEmbedder, remember

from memory.engine import MemoryEngine
from tests.cli_support import Cli


def _store(path, clock) -> None:
    with MemoryEngine(path, HashEmbedder(), clock) as eng:
        remember(eng, "Alice keeps bees on her roof")
        remember(eng, "Alice sells honey at the market")


def test_a_copy_to_postgresql_prints_every_tables_count_and_exits_0(
    cli: Cli, tmp_path, pg_url, clock
) -> None:
    _store(tmp_path / "src.db", clock)
    result = cli("store", "copy", str(tmp_path / "src.db"), pg_url, "--batch", "1")
    assert result.code == 0, result.err
    assert "every table counts the same on both sides" in result.out and "memory_vec" in result.out
    again = cli("store", "copy", str(tmp_path / "src.db"), pg_url, "--json")
    assert again.code == 2 and again.out == "" and '"error": "DST is not empty' in again.err


def test_counts_that_differ_are_shown_and_exit_1(cli: Cli, tmp_path, clock) -> None:
    """A vector whose memory is gone (an old bug's leftover) is not copied: the count check says so."""
    _store(tmp_path / "src.db", clock)
    with MemoryEngine(tmp_path / "src.db", HashEmbedder(), clock) as eng:
        eng.memory_rows.corpus.vectors.write(
            9999, "user|alice|public", np.ones(HashEmbedder().dim, dtype=np.float32)
        )
    result = cli("store", "copy", str(tmp_path / "src.db"), str(tmp_path / "dst.db"), "--json")
    assert result.code == 1
    assert (
        result.json()["counts"]["memory_vec"] == {"source": 3, "copied": 2}
        and not result.json()["ok"]
    )
    # the marker kept: counted again
    shown = cli("store", "copy", str(tmp_path / "src.db"), str(tmp_path / "dst.db"))
    assert shown.code == 1 and "DIFFERS" in shown.out and "memory_vec" in shown.error_line()


def test_a_refused_copy_is_one_line_naming_the_reason_and_makes_no_file(cli: Cli, tmp_path) -> None:
    result = cli("store", "copy", str(tmp_path / "nothing.db"), str(tmp_path / "dst.db"))
    assert result.code == 2 and "no store exists there" in result.error_line()
    assert not (tmp_path / "dst.db").exists()

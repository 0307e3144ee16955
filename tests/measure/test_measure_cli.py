"""``companion eval locomo`` from the command line: progress per conversation, ``--resume``, gzip input.

In-process through ``bot.cli.main`` with ``--embeddings none`` (BM25 only, fast).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest

from bot.cli import main
from tests.measure.test_measure_eval import SAMPLES, write


@pytest.fixture
def companion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)  # no stray .env is read
    for name in [n for n in os.environ if n.startswith("COMPANION_")]:
        monkeypatch.delenv(name)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--db", str(tmp_path / "store.db"), "--embeddings", "none", *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_eval_shows_each_conversation_and_resumes(companion, tmp_path: Path) -> None:
    data, ledger = write(tmp_path / "d.json", SAMPLES), tmp_path / "partial.jsonl"
    code, out, err = companion(
        "eval", "locomo", str(data), "--limit", "1", "--resume", str(ledger), "--json"
    )
    assert code == 0 and json.loads(out)["samples"] == 1
    assert "[1/1] s1: 2 questions, empty turns skipped: 1 (" in err

    code, out, err = companion("eval", "locomo", str(data), "--resume", str(ledger), "--json")
    assert code == 0 and json.loads(out)["samples"] == 3 and json.loads(out)["skipped_turns"] == 3
    assert "[1/3] s1: 2 questions, empty turns skipped: 1 (from the resume file)" in err
    assert "[3/3] s3" in err and "applied migration" not in err


def test_eval_reads_gzip_and_says_what_it_skipped(companion, tmp_path: Path) -> None:
    packed = tmp_path / "d.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(SAMPLES).encode()))
    code, out, err = companion("eval", "locomo", str(packed))
    assert code == 0 and "bm25" in out
    assert "turns with no text, not stored (the store refuses empty messages): 3" in err


def test_a_resume_file_from_another_model_is_one_error_line(companion, tmp_path: Path) -> None:
    ledger = tmp_path / "p.jsonl"
    ledger.write_text(
        json.dumps(
            {"sample_id": "s1", "embedding": "onnx:other", "skipped_turns": 0, "questions": []}
        )
        + "\n"
    )
    code, _, err = companion(
        "eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)), "--resume", str(ledger)
    )
    assert (
        code == 2
        and "companion: error:" in err
        and "'onnx:other'" in err
        and "Traceback" not in err
    )


def test_an_install_without_the_measuring_tools_says_so(
    companion, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # what importing an absent module does
    monkeypatch.setitem(sys.modules, "measure.evaluation", None)
    code, _, err = companion("eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)))
    assert (
        code == 1 and "the measuring tools (measure.evaluation) are not part of this install" in err
    )


def test_eval_with_user_turns_indexed_says_so_and_reports_session_recall(
    companion, tmp_path: Path
) -> None:
    from tests.memory.test_recall_throughput import assistant_sample

    data = write(tmp_path / "lme.json", [assistant_sample()])
    code, out, _ = companion("eval", "locomo", str(data), "--index", "user", "--json")
    result = json.loads(out)
    assert code == 0 and result["index"] == "user" and result["questions"] == {"4": 1}
    assert "any@5" in result["methods"]["hybrid"]["sessions cat1-4"]
    code, out, _ = companion("eval", "locomo", str(data), "--index", "user")
    assert code == 0 and "user turns indexed" in out and "Session recall" in out and "any@5" in out


def test_eval_says_what_one_search_of_each_method_cost(companion, tmp_path: Path) -> None:
    code, out, _ = companion("eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)))
    assert code == 0 and "One search (ms)" in out
    # the rows: method, p50, p95
    shown = {line.split()[1] for line in out.splitlines() if line.count("│") == 4}
    assert {"bm25", "vector", "hybrid"} <= shown


def test_eval_progress_tells_the_rate_and_the_time_left(companion, tmp_path: Path) -> None:
    code, _, err = companion("eval", "locomo", str(write(tmp_path / "d.json", SAMPLES)))
    assert code == 0 and "conversations/min, about" in err and "left" in err

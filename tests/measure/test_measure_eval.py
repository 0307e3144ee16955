"""``measure.evaluation`` on small LoCoMo-format files built here: empty turns, gzip, and resuming a run.

BM25 only (no embedder), so each run takes a fraction of a second; every sample still goes through a
real, freshly migrated SQLite store.
"""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from measure.evaluation import SampleDone, evaluate_locomo, evaluate_sample
from measure.ledger import Ledger, LedgerError
from measure.locomo import load_samples

ZERO_WIDTH_SPACE = "\u200b"


def sample(sample_id: str, pet: str, *, date: str = "10:00 am on 3 March, 2023") -> dict[str, Any]:
    """A two-session conversation with one turn that is only a zero-width space (as LongMemEval has)."""
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Maya",
            "speaker_b": "Tom",
            "session_1_date_time": date,
            "session_1": [
                {
                    "speaker": "Maya",
                    "dia_id": "D1:1",
                    "text": f"I just adopted a greyhound, her name is {pet}!",
                },
                {"speaker": "Tom", "dia_id": "D1:2", "text": ZERO_WIDTH_SPACE},
                {
                    "speaker": "Tom",
                    "dia_id": "D1:3",
                    "text": "Lately I have been practising scales every night.",
                },
            ],
            "session_2_date_time": "7:30 pm on 20 April, 2023",
            "session_2": [
                {
                    "speaker": "Tom",
                    "dia_id": "D2:1",
                    "text": "My cello recital is next Saturday in Leeds.",
                },
                {
                    "speaker": "Maya",
                    "dia_id": "D2:2",
                    "text": "I started volunteering at a rescue shelter on Sundays.",
                },
            ],
        },
        "qa": [
            {
                "question": "What is the name of Maya's greyhound?",
                "answer": pet,
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where is Tom's cello recital?",
                "answer": "Leeds",
                "evidence": ["D2:1; D1:2"],
                "category": 1,
            },
            {
                "question": "What did Tom say with no words?",
                "answer": "-",
                "evidence": ["D1:2"],
                "category": 3,
            },
        ],
    }


SAMPLES = [sample("s1", "Biscuit"), sample("s2", "Pepper"), sample("s3", "Mango")]


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


class Seen:
    """A progress callback that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[SampleDone] = []

    def __call__(self, done: SampleDone) -> None:
        self.calls.append(done)

    def resumed(self) -> list[str]:
        return [d.sample_id for d in self.calls if d.resumed]


def untimed(result: dict) -> dict:
    """The summary without the search times, which differ from run to run."""
    return result | {
        "methods": {
            m: {k: v for k, v in s.items() if k != "search_ms"}
            for m, s in result["methods"].items()
        }
    }


def test_every_method_reports_what_one_search_cost(tmp_path: Path) -> None:
    result = evaluate_locomo(write(tmp_path / "d.json", SAMPLES), None)
    for method in ("bm25", "vector", "hybrid"):
        spent = result["methods"][method]["search_ms"]
        assert 0 < spent["p50"] <= spent["p95"] < 10_000


def test_a_turn_that_normalises_to_nothing_is_skipped_and_counted(tmp_path: Path) -> None:
    seen = Seen()
    result = evaluate_locomo(write(tmp_path / "d.json", SAMPLES[:1]), None, progress=seen)
    assert result["skipped_turns"] == 1 and result["samples"] == 1
    # The question whose only evidence is the skipped turn measures nothing; the other keeps its stored evidence.
    assert result["questions"] == {"1": 1, "4": 1}
    assert result["methods"]["bm25"]["cat1-4"]["R@5"] == 100.0
    assert [
        (d.index, d.total, d.sample_id, d.questions, d.skipped_turns, d.resumed) for d in seen.calls
    ] == [(1, 1, "s1", 2, 1, False)]


def test_gzipped_data_reads_like_plain_json(tmp_path: Path) -> None:
    packed = tmp_path / "d.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(SAMPLES).encode()))
    assert load_samples(packed) == SAMPLES
    assert untimed(evaluate_locomo(packed, None)) == untimed(
        evaluate_locomo(write(tmp_path / "d.json", SAMPLES), None)
    )


def test_a_broken_gzip_file_is_bad_data(tmp_path: Path) -> None:
    broken = tmp_path / "d.json.gz"
    broken.write_bytes(gzip.compress(json.dumps(SAMPLES).encode())[:40])
    with pytest.raises(ValueError, match="not a readable gzip file"):
        load_samples(broken)


def test_samples_must_have_distinct_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not unique"):
        load_samples(write(tmp_path / "d.json", [SAMPLES[0], SAMPLES[0]]))


def test_a_resumed_run_measures_only_what_is_missing_and_reports_everything(tmp_path: Path) -> None:
    data, ledger = write(tmp_path / "d.json", SAMPLES), tmp_path / "partial.jsonl"
    evaluate_locomo(data, None, limit=1, resume=ledger)  # the first run stops after one sample
    assert [json.loads(line)["sample_id"] for line in ledger.read_text().splitlines()] == ["s1"]

    # Proof that s1 is read back, not measured again: the input's s1 is now unusable.
    write(data, [sample("s1", "Biscuit", date="sometime")] + SAMPLES[1:])
    seen = Seen()
    resumed = evaluate_locomo(data, None, resume=ledger, progress=seen)
    assert seen.resumed() == ["s1"] and [d.sample_id for d in seen.calls] == ["s1", "s2", "s3"]
    assert untimed(resumed) == untimed(
        evaluate_locomo(write(tmp_path / "fresh.json", SAMPLES), None)
    )
    assert resumed["samples"] == 3 and resumed["skipped_turns"] == 3
    assert len(ledger.read_text().splitlines()) == 3


def test_a_run_that_dies_keeps_the_samples_it_finished(tmp_path: Path) -> None:
    broken = [SAMPLES[0], sample("s2", "Pepper", date="sometime"), SAMPLES[2]]
    data, ledger = write(tmp_path / "d.json", broken), tmp_path / "p.jsonl"
    with pytest.raises(ValueError, match="unrecognised LoCoMo date"):
        evaluate_locomo(data, None, resume=ledger)
    assert list(Ledger(ledger, None).finished()) == ["s1"]

    write(data, SAMPLES)  # the data fixed, the rerun picks up where the first one died
    seen = Seen()
    assert evaluate_locomo(data, None, resume=ledger, progress=seen)["samples"] == 3
    assert seen.resumed() == ["s1"]


def test_a_line_torn_by_a_kill_is_measured_again(tmp_path: Path) -> None:
    data, ledger = write(tmp_path / "d.json", SAMPLES[:2]), tmp_path / "p.jsonl"
    evaluate_locomo(data, None, resume=ledger)
    first, second = ledger.read_text().splitlines()
    ledger.write_text(first + "\n" + second[: len(second) // 2])

    seen = Seen()
    assert untimed(evaluate_locomo(data, None, resume=ledger, progress=seen)) == untimed(
        evaluate_locomo(data, None)
    )
    assert seen.resumed() == ["s1"]
    assert [json.loads(line)["sample_id"] for line in ledger.read_text().splitlines()] == [
        "s1",
        "s2",
    ]


def test_a_ledger_from_another_embedding_model_is_refused(tmp_path: Path) -> None:
    data, ledger = write(tmp_path / "d.json", SAMPLES[:1]), tmp_path / "p.jsonl"
    Ledger(ledger, "onnx:all-MiniLM-L6-v2-int8").append(
        {"sample_id": "s1", "skipped_turns": 1, "questions": []}
    )
    with pytest.raises(LedgerError, match="another file"):
        evaluate_locomo(data, None, resume=ledger)


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "notes.txt"
    ledger.write_text("shopping list\n")
    with pytest.raises(LedgerError, match="line 1"):
        evaluate_locomo(write(tmp_path / "d.json", SAMPLES[:1]), None, resume=ledger)


def test_the_stores_migrations_are_not_logged_per_sample(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = logging.getLogger("memory.storage.db").level
    evaluate_locomo(write(tmp_path / "d.json", SAMPLES), None)
    assert [r.getMessage() for r in caplog.records if r.name == "memory.storage.db"] == []
    assert logging.getLogger("memory.storage.db").level == before  # quiet for the run only


def test_a_chat_assistants_turns_are_stored_as_the_bots_own_replies(tmp_path: Path) -> None:
    """LongMemEval's speakers are ``user`` and ``assistant``: the assistant's turns are stored as the bot stores its own."""
    chat = sample("lme", "Biscuit")
    for turn in chat["conversation"]["session_1"] + chat["conversation"]["session_2"]:
        turn["speaker"] = {"Maya": "user", "Tom": "assistant"}[turn["speaker"]]
    evaluate_sample(chat, None, tmp_path)
    with sqlite3.connect(tmp_path / "lme.db") as con:
        roles = dict(con.execute("SELECT author_id, role FROM messages").fetchall())
    assert roles == {"user": "user", "assistant": "assistant"}

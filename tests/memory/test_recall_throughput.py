"""Issue 24: long text learnt in length-sorted batches, session recall beside turn recall, the bench's new figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from measure.evaluation import evaluate_locomo, session_recall
from measure.ledger import LedgerError
from measure.samples import TextGen
from measure.throughput import ingest_passages_per_s, machine_reference, passages
from memory.engine import MemoryEngine
from memory.storage.embeddings import token_batches
from memory.write.passages import PASSAGE_CHARS
from tests.measure.test_measure_eval import SAMPLES, write


def test_batches_group_texts_shortest_first_and_stay_within_the_token_budget() -> None:
    lengths = [200, 10, 250, 12, 11, 40, 300]
    batches = token_batches(lengths, budget=512, most=32)
    # every text, once
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert [lengths[i] for batch in batches for i in batch] == sorted(lengths)
    assert all(
        len(batch) * max(lengths[i] for i in batch) <= 512 for batch in batches if len(batch) > 1
    )


def test_a_text_longer_than_the_budget_runs_alone_and_a_batch_never_passes_its_count() -> None:
    assert token_batches([900, 5, 5], budget=512, most=32) == [[1, 2], [0]]
    assert [len(b) for b in token_batches([3] * 70, budget=512, most=32)] == [32, 32, 6]
    assert token_batches([]) == []


def test_texts_of_mixed_lengths_come_back_in_their_order_and_mean_what_they_mean_alone(
    minilm,
) -> None:
    texts = [
        "ok",
        "My cello recital is next Saturday in Leeds. " * 12,
        "hi",
        "I adopted a greyhound called Biscuit.",
        "",
    ]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    # int8 graphs quantise each run's activations over the whole batch: near, not bit-equal
    assert together.shape == (5, 384) and np.all(np.sum(together * alone, axis=1) > 0.99)


def test_truncation_keeps_a_long_passage_embeddable_at_either_length() -> None:
    from memory.storage.embeddings import OnnxMiniLM

    short = OnnxMiniLM(max_tokens=128)
    long_text = "The handbook says the fire door on the third floor stays closed. " * 40
    vector = short.embed([long_text])
    assert vector.shape == (1, 384) and abs(float(np.linalg.norm(vector)) - 1) < 1e-4


def test_session_recall_counts_any_and_all_gold_sessions_among_the_first_distinct_sessions() -> (
    None
):
    ranked = ["D3:1", "D3:4", "D1:2", "D7:1", "D2:5", "D4:1", "D9:9"]
    # another turn of a ranked session still finds the session
    one = session_recall(ranked, ["D1:9"])
    assert one["any@1"] == 0 and one["any@5"] == 1 and one["all@5"] == 1
    two = session_recall(ranked, ["D3:2", "D9:1"])
    # D9 is 6th
    assert two["any@1"] == 1 and two["all@1"] == 0 and two["all@5"] == 0 and two["all@10"] == 1


def assistant_sample() -> dict[str, Any]:
    """LongMemEval's shape: the user and the chat assistant; one answer lies in an assistant turn."""
    return {
        "sample_id": "lme1",
        "conversation": {
            "session_1_date_time": "10:00 am on 3 March, 2023",
            "session_1": [
                {
                    "speaker": "user",
                    "dia_id": "D1:1",
                    "text": "I moved my pottery class to Thursdays.",
                },
                {
                    "speaker": "assistant",
                    "dia_id": "D1:2",
                    "text": "Kiln temperatures for stoneware reach 1,280 degrees.",
                },
            ],
            "session_2_date_time": "10:00 am on 9 March, 2023",
            "session_2": [
                {"speaker": "user", "dia_id": "D2:1", "text": "My sister Ines visits in May."}
            ],
        },
        "qa": [
            {
                "question": "Which day is my pottery class?",
                "answer": "Thursday",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "How hot does a stoneware kiln get?",
                "answer": "1,280",
                "evidence": ["D1:2"],
                "category": 4,
            },
        ],
    }


def test_indexing_user_turns_leaves_out_the_assistants_turns_and_the_questions_only_they_answer(
    tmp_path: Path,
) -> None:
    data = write(tmp_path / "lme.json", [assistant_sample()])
    every = evaluate_locomo(data, None)
    users = evaluate_locomo(data, None, index="user")
    assert (
        every["questions"] == {"4": 2}
        and users["questions"] == {"4": 1}
        and users["index"] == "user"
    )
    assert users["methods"]["bm25"]["sessions cat1-4"]["any@1"] == 100.0


def test_an_unknown_index_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="index must be one of"):
        evaluate_locomo(write(tmp_path / "d.json", SAMPLES), None, index="assistant")


def test_a_resume_file_measured_with_all_turns_is_not_merged_into_a_user_turns_run(
    tmp_path: Path,
) -> None:
    data, ledger = write(tmp_path / "d.json", [assistant_sample()]), tmp_path / "partial.jsonl"
    evaluate_locomo(data, None, resume=ledger)
    with pytest.raises(LedgerError, match="another file"):
        evaluate_locomo(data, None, resume=ledger, index="user")


def test_a_ledger_written_before_session_recall_still_summarises(tmp_path: Path) -> None:
    data, ledger = write(tmp_path / "d.json", SAMPLES), tmp_path / "old.jsonl"
    evaluate_locomo(data, None, resume=ledger)
    old = [json.loads(line) for line in ledger.read_text().splitlines()]
    for record in old:
        for question in record["questions"]:
            del question["sessions"]
    ledger.write_text("".join(json.dumps(r) + "\n" for r in old))
    result = evaluate_locomo(data, None, resume=ledger)
    assert (
        result["methods"]["bm25"]["cat1-4"]["R@1"] > 0
        and result["methods"]["bm25"]["sessions cat1-4"]["any@1"] == 0.0
    )


def test_bench_passages_are_about_a_passage_long_and_all_different() -> None:
    texts = passages(TextGen(seed=1), 10)
    assert len(set(texts)) == 10 and all(
        PASSAGE_CHARS - 120 <= len(t) < PASSAGE_CHARS for t in texts
    )


def test_ingest_throughput_goes_through_the_real_ingest_path(
    minilm_engine: MemoryEngine, tmp_path: Path
) -> None:
    texts = passages(TextGen(seed=2), 6)
    rate = ingest_passages_per_s(minilm_engine, texts, tmp_path)
    stored = minilm_engine.db.scalar("SELECT COUNT(*) FROM memories WHERE scope_id = 'bench:u0'")
    assert rate > 0 and stored == 6


def test_the_machine_reference_is_two_fixed_timings(minilm) -> None:
    reference = machine_reference(minilm)
    assert set(reference) == {"numpy_scan_100k_ms", "onnx_8x128_ms"} and all(
        v > 0 for v in reference.values()
    )

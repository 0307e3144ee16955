"""The voice benchmark's smoke test: three utterances through the whole offline path, a few sentences of the
round-trip WER and one barge-in (the full run is ``companion bench voice --json``, kept out of the test run)."""

from __future__ import annotations

import logging

from measure.bench_voice import run_voice_bench
from measure.voice_quality import edit_distance, sentences, words
from tests.voice_support import whisper


def test_the_voice_bench_times_a_short_spoken_session_end_to_end(caplog):
    whisper()  # loaded (and logged) before the bench
    caplog.set_level(logging.INFO)
    caplog.clear()
    figures = run_voice_bench(3, end_pause_ms=300, stt=whisper(), store_size=2_000, providers=("espeak",), wer_sentences=3, barge_in_runs=1)
    voice = figures["voice"]
    assert voice["utterances"] == 3 and 300 < voice["first_audio_ms"]["p50"] <= voice["first_audio_ms"]["p95"] < 10_000
    assert 0 < voice["stt_rtf"] < 2
    assert voice["warm_hit_rate"] == 0.667  # a full recall, then the same trip again (reused), then "yeah"
    warm, cold, full = voice["warm_recall_ms"], voice["cold_recall_ms"], voice["warm_full_ms"]
    # each pass (3 by default) replays the three turns: the served two are timed warm AND cold, the first is a full recall
    assert warm["turns"] == cold["turns"] == 6 and full["turns"] == 3
    assert 0 < warm["p50"] <= warm["p95"] and 0 < cold["p50"] <= cold["p95"]
    # the second turn says the first one's words again: not even embedded; "yeah" neither
    assert {reason: figures["turns"] for reason, figures in warm["by_reason"].items()} == {"known-words": 3, "low-signal": 3}
    assert set(voice["recall_includes"]) == {"warm", "cold"} and voice["store_memories"] == 2_005
    assert voice["tts"] == "espeak" and 0 <= voice["tts_wer"]["espeak"] < 0.5
    assert 0 < voice["barge_in_ms"]["max"] < 1_000  # loose: the machine is shared; the bench reports it exactly
    assert not [r for r in caplog.records if r.levelno < logging.WARNING]  # no transcripts, no request lines


def test_the_round_trip_set_has_at_least_fifty_reply_like_sentences_of_words_only():
    texts = sentences()
    assert len(texts) >= 50 and not any(ch.isdigit() for text in texts for ch in text)


def test_word_error_counts_substitutions_deletions_and_insertions():
    assert edit_distance(words("I like green apples."), words("i like red apples")) == 1
    assert edit_distance(words("Thank you."), []) == 2
    assert edit_distance([], words("thanks for watching")) == 3


def test_the_voice_table_shows_each_provider_and_what_warm_and_cold_recall_include():
    from rich.console import Console

    from bot.cli.output import voice_bench_table

    voice = run_voice_bench(1, end_pause_ms=300, stt=whisper(), store_size=0, providers=("espeak",), wer_sentences=1, barge_in_runs=1)
    console = Console(width=200, record=True)
    console.print(voice_bench_table(voice["voice"]))
    text = console.export_text()
    rows = ("first audio p50 / p95, espeak", "round-trip WER, espeak", "warm recall p50 / p95", "cold recall p50 / p95", "no vector scan")
    for row in (*rows, "barge-in p50 / max"):
        assert row in text, row

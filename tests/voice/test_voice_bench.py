"""The voice benchmark's smoke test: three utterances through the whole offline path, a few sentences of the
round-trip WER and one barge-in (the full run is ``companion bench voice --json``, kept out of the test run)."""

from __future__ import annotations

import logging

import numpy as np

from measure.bench_voice import run_voice_bench
from measure.turn_set import _cached, judge, lines, pause_lengths
from measure.voice_quality import edit_distance, sentences, spoken_words
from tests.voice_support import whisper
from voice.tts import EspeakTTS
from voice.vad import VadSettings


def test_the_voice_bench_times_a_short_spoken_session_end_to_end(caplog):
    whisper()  # loaded (and logged) before the bench
    caplog.set_level(logging.INFO)
    caplog.clear()
    figures = run_voice_bench(
        3,
        end_pause_ms=300,
        stt=whisper(),
        store_size=2_000,
        providers=("espeak",),
        wer_sentences=3,
        barge_in_runs=1,
        turn_set=False,
    )
    voice = figures["voice"]
    assert (
        voice["utterances"] == 3
        and 300 < voice["first_audio_ms"]["p50"] <= voice["first_audio_ms"]["p95"] < 10_000
    )
    assert voice["end_of_turn"] == "300 ms pause"
    # the paced model: 300 ms to its first token, then 40 tokens/s; "That sounds good." is three of them
    assert voice["first_audio_ms_streaming"]["p50"] > 300 + 300 + 2 * 25
    assert voice["streaming_model"] == {"ttft_ms": 300, "tokens_per_s": 40.0}
    assert voice["machine"]["onnx_8x128_ms"] > 0 and len(voice["machine"]["load_average"]) == 3
    assert 0 < voice["stt_rtf"] < 2
    # a full recall, then the same trip again (reused), then "yeah"
    assert voice["warm_hit_rate"] == 0.667
    warm, cold, full = voice["warm_recall_ms"], voice["cold_recall_ms"], voice["warm_full_ms"]
    # each pass (3 by default) replays the three turns: the served two are timed warm AND cold, the first is a full recall
    assert warm["turns"] == cold["turns"] == 6 and full["turns"] == 3
    assert 0 < warm["p50"] <= warm["p95"] and 0 < cold["p50"] <= cold["p95"]
    # the second turn says the first one's words again: not even embedded; "yeah" neither
    assert {reason: figures["turns"] for reason, figures in warm["by_reason"].items()} == {
        "known-words": 3,
        "low-signal": 3,
    }
    assert set(voice["recall_includes"]) == {"warm", "cold"} and voice["store_memories"] == 2_005
    assert voice["tts"] == "espeak" and 0 <= voice["tts_wer"]["espeak"] < 0.5
    # loose: the machine is shared; the bench reports it exactly
    assert 0 < voice["barge_in_ms"]["max"] < 1_000
    # no transcripts, no request lines
    assert not [r for r in caplog.records if r.levelno < logging.WARNING]


def test_the_round_trip_set_has_at_least_fifty_reply_like_sentences_of_words_only():
    texts = sentences()
    assert len(texts) >= 50 and not any(ch.isdigit() for text in texts for ch in text)


def test_word_error_counts_substitutions_deletions_and_insertions():
    assert (
        edit_distance(spoken_words("I like green apples."), spoken_words("i like red apples")) == 1
    )
    assert edit_distance(spoken_words("Thank you."), []) == 2
    assert edit_distance([], spoken_words("thanks for watching")) == 3


def test_the_voice_table_shows_each_provider_and_what_warm_and_cold_recall_include():
    from rich.console import Console

    from bot.cli.output import voice_bench_table

    voice = run_voice_bench(
        1,
        end_pause_ms=300,
        stt=whisper(),
        store_size=0,
        providers=("espeak",),
        wer_sentences=1,
        barge_in_runs=1,
        streaming=None,
        turn_set=False,
    )
    console = Console(width=200, record=True)
    console.print(voice_bench_table(voice["voice"]))
    text = console.export_text()
    rows = (
        "first audio p50 / p95, espeak",
        "round-trip WER, espeak",
        "warm recall p50 / p95",
        "cold recall p50 / p95",
        "no vector scan",
    )
    for row in (*rows, "barge-in p50 / max"):
        assert row in text, row


def test_the_turn_taking_set_has_thirty_pauses_for_thought_of_400_to_900_ms_and_thirty_finished_turns():
    pairs = lines()
    assert (
        sum(1 for _, tail in pairs if tail) == 30 and sum(1 for _, tail in pairs if not tail) == 30
    )
    pauses = pause_lengths(30)
    assert min(pauses) == 0.4 and max(pauses) == 0.9 and len(set(pauses)) == 30


def test_a_paused_turn_is_spoken_with_silence_exactly_where_and_as_long_as_the_set_says(tmp_path):
    tts = EspeakTTS(words_per_minute=150)
    paused, finished = build_set_of(
        tts,
        tmp_path,
        ("I was thinking", "maybe we could go on Sunday."),
        ("What do you think?", None),
    )
    assert paused.pause is not None and round(paused.pause[1] - paused.pause[0], 3) == 0.9
    audio = np.frombuffer(paused.pcm16, "<i2")
    start, stop = (int(t * 16_000) for t in paused.pause)
    assert (
        not audio[start:stop].any()
        and audio[stop : stop + 1600].any()
        and audio[start - 1600 : start].any()
    )
    # then only silence
    assert finished.pause is None and not audio[int(paused.end_s * 16_000) + 1 :].any()
    # the fixed 700 ms pause ends the turn inside a 900 ms pause for thought; and once at the end of each turn
    fixed = judge([paused, finished], VadSettings(), None)
    assert fixed["false_end_pct"] == 100.0 and 700 <= fixed["end_delay_ms"]["p50"] <= 900
    # from the cache
    assert build_set_of(tts, tmp_path, ("What do you think?", None))[0].pcm16 == finished.pcm16


def build_set_of(tts, cache, *pairs):
    return [_cached(tts, "espeak", head, tail, 0.9 if tail else 0.0, cache) for head, tail in pairs]


def test_the_voice_table_puts_the_fixed_pause_and_the_turn_model_side_by_side():
    from bot.cli.output import _turn_rows

    figures = {"false_end_pct": 33.3, "end_delay_ms": {"p50": 760.0, "p95": 791.0}}
    taking = {
        "voice": "piper",
        "turns": 60,
        "paused": 30,
        "fixed_pause_ms": 700,
        "fixed_pause": figures,
        "turn_model": None,
    }
    what = "30 of 60 turns (piper) pause 400-900 ms mid-sentence"
    assert _turn_rows(taking) == [
        ("false ends / end delay p50 / p95, fixed 700 ms pause", "33.3% / 760.0 / 791.0 ms", what)
    ]
    assert len(_turn_rows(taking | {"turn_model": figures})) == 2 and _turn_rows(None) == []

"""The voice benchmark's smoke test: three utterances through the whole offline path (the full run is
``companion bench voice --json``, kept out of the test run)."""

from __future__ import annotations

from measure.bench_voice import run_voice_bench
from tests.voice_support import whisper


def test_the_voice_bench_times_a_short_spoken_session_end_to_end():
    figures = run_voice_bench(3, end_pause_ms=300, stt=whisper())["voice"]
    assert figures["utterances"] == 3 and 300 < figures["first_audio_ms"]["p50"] <= figures["first_audio_ms"]["p95"] < 10_000
    assert 0 < figures["stt_rtf"] < 2
    assert figures["warm_hit_rate"] == 0.667  # a full recall, then the same trip again (reused), then "yeah"
    assert figures["cold_recall_ms"]["p50"] > 0 and figures["warm_recall_ms"]["p50"] is not None

"""What the benchmarks are made of: synthetic text and vectors (``TextGen``) and how their timings are summed up
(``percentiles``). Shared by ``bench``, ``bench_voice`` and ``throughput``, so none of them imports another."""

from __future__ import annotations

import json
import statistics

import numpy as np

from memory.storage.embeddings import ASSETS

DIM = 384


# Words that would make a random sentence read as a directive or a secret to the safety filters.
_AVOID = {
    "always",
    "never",
    "from",
    "you",
    "don",
    "make",
    "respond",
    "reply",
    "stop",
    "system",
    "ignore",
    "disregard",
    "forget",
    "password",
    "passwd",
    "passphrase",
    "api",
    "secret",
    "access",
    "jailbreak",
    "developer",
    "new",
}


def vocab_words() -> list[str]:
    vocab = json.loads((ASSETS / "minilm-tokenizer.json").read_text())["model"]["vocab"]
    return [w for w in vocab if w.isalpha() and w.isascii() and len(w) >= 3 and w not in _AVOID]


class TextGen:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab = np.array(vocab_words())
        ranks = np.arange(1, len(self.vocab) + 1)
        self.p = ranks**-1.07 / np.sum(ranks**-1.07)

    def sentence(self, lo: int, hi: int) -> str:
        return self.sentences(1, lo, hi)[0]

    def sentences(self, n: int, lo: int, hi: int) -> list[str]:
        lengths = self.rng.integers(lo, hi + 1, size=n)
        picks = self.vocab[
            self.rng.choice(len(self.vocab), size=int(lengths.sum()), p=self.p)
        ].tolist()
        out, at = [], 0
        for length in lengths.tolist():
            out.append(" ".join(picks[at : at + length]))
            at += length
        return out

    def vectors(self, n: int) -> np.ndarray:
        v = self.rng.standard_normal((n, DIM), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def percentiles(samples: list[float], digits: int = 2) -> dict[str, float]:
    """p50 and p95 (the nearest rank below) of latency samples, rounded."""
    samples = sorted(samples)
    return {
        "p50": round(statistics.median(samples), digits),
        "p95": round(samples[int(0.95 * (len(samples) - 1))], digits),
    }

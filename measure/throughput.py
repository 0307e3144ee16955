"""How fast long text is learnt (``embed_passage_ms``, ``ingest_passages_per_s``) and a machine reference.

``companion bench`` reports these beside its latencies. Passages are ~1,000 characters, the size ``companion
ingest`` cuts files into (``memory.write.passages.PASSAGE_CHARS``). The machine reference is two fixed pieces of
work timed in the same run, so that figures from two machines (or one machine busy and idle) can be set side
by side: a brute-force scan of 100,000 x 384 float32 vectors, and one ONNX pass of the embedding model over a
fixed batch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.models import Scope
from memory.write.ingest import Ingester, IngestTarget
from memory.write.passages import PASSAGE_CHARS

from .samples import TextGen, percentiles

if TYPE_CHECKING:
    from memory.engine import MemoryEngine
    from memory.protocols import Embedder
    from memory.storage.embeddings import OnnxMiniLM


PASSAGES = 64  # passages ingested per size (each a fresh text, so none is a duplicate of another)
REFERENCE_ROWS = 100_000
REFERENCE_RUNS = 15


def passages(gen: TextGen, n: int) -> list[str]:
    """``n`` texts of about ``PASSAGE_CHARS`` characters, each of whole words."""
    out = []
    for _ in range(n):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < PASSAGE_CHARS - 20:
            words.extend(gen.sentence(8, 20).split())
        out.append(" ".join(words)[: PASSAGE_CHARS - 1].rsplit(" ", 1)[0] + ".")
    return out


def embed_passage_ms(model: Embedder, texts: list[str]) -> dict[str, float]:
    """Each passage embedded alone, as a file's last few passages or a long message are."""
    model.embed(texts[:1])  # the first run of a session pays for its own set-up
    samples = []
    for text in texts:
        start = time.perf_counter()
        model.embed([text])
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def ingest_passages_per_s(engine: MemoryEngine, texts: list[str], folder: Path) -> float:
    """Passages per second through ``companion ingest``'s own path (no model: one memory per passage): reading
    the file, the safety filters, embedding in batches, the duplicate search and the store's write."""
    path = folder / "bench-handbook.md"
    path.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    start = time.perf_counter()
    report = Ingester(engine, IngestTarget(Scope.USER, "bench:u0")).ingest(path)
    seconds = time.perf_counter() - start
    if report.status != "ingested":
        raise RuntimeError(f"the bench's ingest failed: {report.status} {report.error}")
    return report.passages / seconds


def machine_reference(model: OnnxMiniLM) -> dict[str, Any]:
    """Fixed work, p50 of a few runs: a 100k x 384 numpy scan and one ONNX pass over 8 fixed texts of 128 tokens."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((REFERENCE_ROWS, 384), dtype=np.float32)
    query = matrix[0].copy()
    scan = []
    for _ in range(REFERENCE_RUNS):
        start = time.perf_counter()
        np.argpartition(matrix @ query, -30)[-30:]
        scan.append((time.perf_counter() - start) * 1000)
    del matrix
    texts = [" ".join(["memory"] * 126)] * 8  # 126 words + [CLS] + [SEP]: 8 x 128 tokens
    model.embed(texts)
    onnx = []
    for _ in range(REFERENCE_RUNS):
        start = time.perf_counter()
        model.embed(texts)
        onnx.append((time.perf_counter() - start) * 1000)
    return {
        "numpy_scan_100k_ms": percentiles(scan)["p50"],
        "onnx_8x128_ms": percentiles(onnx)["p50"],
    }

"""Finished eval samples, one JSON object per line, so a long run that dies keeps what it measured.

A line is written (and synced) the moment its sample finishes; a rerun with the same file reads the
lines back and measures only what is missing. A line is ``{"sample_id", "embedding", "skipped_turns",
"questions": [{"category", "recall": {method: {"R@k": share}}, "sessions": {method: {"any@k" | "all@k": 0 or 1}}}]}``.
``embedding`` is the embedder's fingerprint (None for BM25 only): figures made with another model must not be merged into these.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FIELDS = ("sample_id", "embedding", "skipped_turns", "questions")


class LedgerError(ValueError):
    """The resume file cannot be used: not written by this eval, or measured with another embedding model."""


class Ledger:
    def __init__(self, path: Path, embedding: str | None) -> None:
        self.path = Path(path)
        self.embedding = embedding

    def finished(self) -> dict[str, dict[str, Any]]:
        """Records already in the file, by sample id. Creates the file if missing, so a path that cannot be
        written fails now, not after the first sample's minutes of work."""
        self.path.touch()
        records = [self._check(record, n) for n, record in enumerate(self._records(), start=1)]
        return {r["sample_id"]: r for r in records}

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({**record, "embedding": self.embedding}, ensure_ascii=False) + "\n")
            f.flush()
            # a killed or crashed machine still finds every sample it was told is done
            os.fsync(f.fileno())

    def _records(self) -> list[dict[str, Any]]:
        text = self.path.read_text(encoding="utf-8")
        lines = text.split("\n")
        if lines[-1]:
            # The run was killed mid-write: that sample is measured again, and the torn line is cut off
            # so the next append starts on a line of its own.
            self._cut_at(len(text.encode("utf-8")) - len(lines[-1].encode("utf-8")))
        records = []
        for n, line in enumerate(lines[:-1], start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                raise LedgerError(
                    f"{self.path}, line {n}: not a record of a finished sample"
                ) from None
        return records

    def _cut_at(self, size: int) -> None:
        with self.path.open("r+b") as f:
            f.truncate(size)

    def _check(self, record: Any, n: int) -> dict[str, Any]:
        if not isinstance(record, dict) or any(field not in record for field in FIELDS):
            raise LedgerError(f"{self.path}, record {n}: not a record of a finished sample")
        if record["embedding"] != self.embedding:
            raise LedgerError(
                f"{self.path} holds results measured with embedding {record['embedding']!r}, "
                f"not {self.embedding!r}: resume with another file"
            )
        return record

"""Evidence recall on LoCoMo-format data (EVAL-1), through the same message search the bot uses.

Each sample goes into a fresh store: one turn is one stored message, carrying its speaker as author
and its session's date as time (the clock is set to just after the last session). Every question is
asked through ``MessageLog.search_partitions`` with the default knobs; a method is the set of
candidate channels: ``bm25`` (FTS only), ``vector`` (vectors only) or ``hybrid`` (everything, the default).
Recall@k is the share of a question's evidence turns found in the top k, averaged, in percent.
"""
from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .clock import DAY, FakeClock
from .engine import MemoryEngine
from .messages import NewMessage
from .protocols import Embedder
from .retrieval import ALL_CHANNELS, Channel
from .scopes import message_partition

KS = (1, 5, 10, 25)
METHODS: dict[str, frozenset[Channel]] = {
    "bm25": frozenset({Channel.FTS}),
    "vector": frozenset({Channel.VECTOR}),
    "hybrid": ALL_CHANNELS,
}
Progress = Callable[[int, int], None]


def parse_session_date(text: str) -> float:
    """LoCoMo dates look like '1:56 pm on 8 May, 2023'."""
    clean = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y", "%d %B %Y"):
        try:
            return datetime.strptime(clean, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date {text!r}")


def evidence_ids(raw: list[Any], known: set[str]) -> list[str]:
    """Repair the few malformed ids ('D8:6; D9:17', 'D:11:26') and drop ids that name no turn."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            match = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if match and (dia := f"D{match.group(1)}:{match.group(2)}") in known and dia not in out:
                out.append(dia)
    return out


def turns(sample: dict[str, Any]) -> list[dict[str, Any]]:
    conv = sample["conversation"]
    found = []
    for key, value in conv.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if not match or not isinstance(value, list):
            continue
        start = parse_session_date(conv[f"{key}_date_time"])
        for i, turn in enumerate(value):
            text = turn.get("text", "")
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            found.append({"dia_id": turn["dia_id"], "speaker": turn["speaker"], "text": text, "at": start + 30.0 * i,
                          "session": int(match.group(1))})
    return found


def _ingest(engine: MemoryEngine, sample_id: str, sample_turns: list[dict[str, Any]]) -> dict[str, str]:
    messages = [NewMessage(platform="locomo", guild_id=sample_id, channel_id=f"session-{t['session']}", author_id=t["speaker"],
                           author_name=t["speaker"], content=t["text"] or "(no text)", created_at=t["at"]) for t in sample_turns]
    ids = engine.messages.add_many(messages)
    return dict(zip(ids, (t["dia_id"] for t in sample_turns)))


def evaluate_sample(sample: dict[str, Any], embedder: Embedder | None, workdir: Path) -> list[dict[str, Any]]:
    """Per question: category and, for each method, the evidence recall at each k."""
    sample_turns = turns(sample)
    clock = FakeClock(max(t["at"] for t in sample_turns) + DAY)
    results = []
    with MemoryEngine(workdir / f"{sample['sample_id']}.db", embedder, clock) as engine:
        by_id = _ingest(engine, sample["sample_id"], sample_turns)
        partitions = (message_partition(sample["sample_id"], ""),)
        known = {t["dia_id"] for t in sample_turns}
        for qa in sample["qa"]:
            evidence = evidence_ids(qa.get("evidence", []), known)
            if not evidence:
                continue
            vector = engine.embeddings.embed_query(qa["question"])  # embedded once, shared by the methods that use it
            row = {"category": int(qa["category"]), "recall": {}}
            for method, channels in METHODS.items():
                hits = engine.messages.search_partitions(partitions, qa["question"], top_k=max(KS), channels=channels,
                                                          query_vector=vector if Channel.VECTOR in channels else None)
                ranked = [by_id[h.row["id"]] for h in hits]
                row["recall"][method] = {k: len(set(ranked[:k]) & set(evidence)) / len(evidence) for k in KS}
            results.append(row)
    return results


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(selected: list[dict[str, Any]], method: str) -> dict[str, float]:
        if not selected:
            return {f"R@{k}": 0.0 for k in KS}
        return {f"R@{k}": round(100 * sum(r["recall"][method][k] for r in selected) / len(selected), 1) for k in KS}

    categories = sorted({r["category"] for r in rows})
    out = {}
    for method in METHODS:
        by_cat = {str(c): mean([r for r in rows if r["category"] == c], method) for c in categories}
        out[method] = {"cat1-4": mean([r for r in rows if r["category"] in (1, 2, 3, 4)], method),
                       "cat5": mean([r for r in rows if r["category"] == 5], method), "by_category": by_cat}
    counts = defaultdict(int)
    for r in rows:
        counts[str(r["category"])] += 1
    return {"methods": out, "questions": dict(sorted(counts.items()))}


def evaluate_locomo(path: str | Path, embedder: Embedder | None, *, limit: int | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(isinstance(s, dict) and "conversation" in s and "qa" in s for s in data):
        raise ValueError(f"{path} is not LoCoMo-format data (a list of samples with 'conversation' and 'qa')")
    samples = data[:limit] if limit else data
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="companion-eval-") as tmp:
        for i, sample in enumerate(samples, start=1):
            rows.extend(evaluate_sample(sample, embedder, Path(tmp)))
            if progress:
                progress(i, len(samples))
    return summarise(rows)

"""Evidence recall on LoCoMo-format data (EVAL-1), through the same message search the bot uses.

Each sample goes into a fresh store: one turn is one stored message, carrying its speaker as author
(a chat assistant's turns are stored as the bot's own replies) and its session's date as time (the clock
is set to just after the last session). Every question is asked through ``MessageLog.search_partitions`` with
the default knobs; a method is the set of candidate channels: ``bm25`` (FTS only), ``vector`` (vectors only)
or ``hybrid`` (everything, the default).
Recall@k is the share of a question's evidence turns found in the top k, averaged, in percent; ``search_ms`` the
p50 / p95 time of one search of the method (the cost a ranking change adds).

Beside it, the figure the field reports (LongMemEval's authors, MemPalace, Hebb Mind): session recall. The
ranked turns become ranked sessions (each session at the rank of its best turn among the top 25 turns), and
``any@k`` is the share of questions with at least one gold session (a session holding an evidence turn) in
the top k sessions, ``all@k`` with every gold session there. ``index="user"`` stores only the turns not said
by the chat assistant (LongMemEval's own protocol); questions whose evidence is all in assistant turns then
measure nothing and are left out, as unknown evidence ids are.

A turn the store would refuse (its text normalises to nothing) is skipped and counted; a run given a
ledger file writes each sample there as it finishes and, rerun, measures only the samples not in it.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from memory import storage
from memory.clock import DAY, FakeClock
from memory.engine import MemoryEngine
from memory.protocols import Embedder
from memory.recall.retrieval import ALL_CHANNELS, Channel
from memory.safety import normalise_text
from memory.scopes import message_partition
from memory.storage.messages import NewMessage

from .ledger import Ledger
from .locomo import SampleTurn, evidence_ids, load_samples, turns
from .stores import check_db, scratch_store

KS = (1, 5, 10, 25)
SESSION_KS = (1, 5, 10)
INDEXES = ("all", "user")
METHODS: dict[str, frozenset[Channel]] = {
    "bm25": frozenset({Channel.FTS}),
    "vector": frozenset({Channel.VECTOR}),
    "hybrid": ALL_CHANNELS,
}
ASSISTANT = "assistant"  # LongMemEval's chat assistant: stored as the bot's own replies, as the bot stores its own
Record = dict[str, Any]  # one sample's results, as the ledger stores them (see ``measure.ledger``)


@dataclass(frozen=True, slots=True)
class SampleDone:
    """What progress is told as each sample is done."""

    index: int
    total: int
    sample_id: str
    questions: int
    skipped_turns: int
    seconds: float
    resumed: bool  # read back from the ledger, not measured again


SampleProgress = Callable[[SampleDone], None]


def storable(turn: SampleTurn) -> bool:
    """The store refuses text that normalises to nothing (LongMemEval has turns that are a lone zero-width
    space); such a turn carries no evidence, so the eval leaves it out and counts it instead of dying."""
    return bool(normalise_text(turn.text))


def _ingest(engine: MemoryEngine, sample_id: str, sample_turns: list[SampleTurn]) -> dict[str, str]:
    """Stores the turns; returns dia_id by message id."""
    messages = [
        NewMessage(
            platform="locomo",
            guild_id=sample_id,
            channel_id=f"session-{t.session}",
            author_id=t.speaker,
            author_name=t.speaker,
            role="assistant" if t.speaker == ASSISTANT else "user",
            content=t.text,
            created_at=t.at,
        )
        for t in sample_turns
    ]
    ids = engine.messages.add_many(messages)
    return dict(zip(ids, (t.dia_id for t in sample_turns), strict=True))


def evaluate_sample(
    sample: dict[str, Any],
    embedder: Embedder | None,
    workdir: Path,
    index: str = "all",
    db: str | None = None,
) -> Record:
    """Per question: category and, for each method, the evidence recall at each k and the session recall. The
    sample's store is a file in ``workdir``, or with ``db`` a new database on that PostgreSQL server, dropped after."""
    every = turns(sample)
    kept = [t for t in every if storable(t) and (index == "all" or t.speaker != ASSISTANT)]
    clock = FakeClock(max(t.at for t in every) + DAY)
    with (
        scratch_store(db, workdir, str(sample["sample_id"])) as where,
        MemoryEngine(where, embedder, clock) as engine,
    ):
        by_id = _ingest(engine, sample["sample_id"], kept)
        ask = partial(
            _recall,
            engine,
            (message_partition(sample["sample_id"], ""),),
            by_id,
            set(by_id.values()),
            _asker(kept),
        )
        questions = [row for qa in sample["qa"] if (row := ask(qa)) is not None]
    skipped = sum(not storable(t) for t in every)
    return {
        "sample_id": sample["sample_id"],
        "skipped_turns": skipped,
        "turns": len(kept),
        "questions": questions,
    }


def _asker(sample_turns: list[SampleTurn]) -> str | None:
    """Who asks the questions, as the bot knows who is talking: LongMemEval's are the conversation's ``user``
    (its speakers are ``user`` and ``assistant``); LoCoMo's come from outside the conversation (None)."""
    return "user" if any(t.speaker == "user" for t in sample_turns) else None


def _recall(
    engine: MemoryEngine,
    partitions: tuple[str, ...],
    by_id: dict[str, str],
    known: set[str],
    asker: str | None,
    qa: dict[str, Any],
) -> dict[str, Any] | None:
    """One question's recall per method; None when none of its evidence names a stored turn (it measures nothing)."""
    evidence = evidence_ids(qa.get("evidence", []), known)
    if not evidence:
        return None
    # embedded once, shared by the methods that use it
    vector = engine.embeddings.embed_query(qa["question"])
    recall, sessions, spent = {}, {}, {}
    for method, channels in METHODS.items():
        start = time.perf_counter()
        hits = engine.messages.search_partitions(
            partitions,
            qa["question"],
            top_k=max(KS),
            channels=channels,
            query_vector=vector if Channel.VECTOR in channels else None,
            asker=asker,
        )
        spent[method] = round(1000 * (time.perf_counter() - start), 3)
        ranked = [by_id[h.item.id] for h in hits]
        recall[method] = {
            f"R@{k}": len(set(ranked[:k]) & set(evidence)) / len(evidence) for k in KS
        }
        sessions[method] = session_recall(ranked, evidence)
    return {"category": int(qa["category"]), "recall": recall, "sessions": sessions, "ms": spent}


def session_of(dia_id: str) -> str:
    """'D12:3' -> 'D12': LoCoMo-format turn ids name their session first."""
    return dia_id.split(":", 1)[0]


def session_recall(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    """Whether any and whether all of the evidence's sessions are among the first k distinct sessions ranked."""
    order = list(dict.fromkeys(session_of(d) for d in ranked))
    gold = {session_of(d) for d in evidence}
    out = {}
    for k in SESSION_KS:
        top = set(order[:k])
        out[f"any@{k}"], out[f"all@{k}"] = float(bool(gold & top)), float(gold <= top)
    return out


def summarise(records: list[Record]) -> dict[str, Any]:
    rows = [q for record in records for q in record["questions"]]

    def mean(selected: list[dict[str, Any]], method: str) -> dict[str, float]:
        if not selected:
            return {f"R@{k}": 0.0 for k in KS}
        return {
            f"R@{k}": round(
                100 * sum(r["recall"][method][f"R@{k}"] for r in selected) / len(selected), 1
            )
            for k in KS
        }

    def sessions(selected: list[dict[str, Any]], method: str) -> dict[str, float]:
        # a ledger written before session recall existed
        selected = [r for r in selected if "sessions" in r]
        keys = [f"{kind}@{k}" for kind in ("any", "all") for k in SESSION_KS]
        if not selected:
            return {key: 0.0 for key in keys}
        return {
            key: round(100 * sum(r["sessions"][method][key] for r in selected) / len(selected), 1)
            for key in keys
        }

    categories = sorted({r["category"] for r in rows})
    main = [r for r in rows if r["category"] in (1, 2, 3, 4)]
    out = {}
    for method in METHODS:
        by_cat = {str(c): mean([r for r in rows if r["category"] == c], method) for c in categories}
        out[method] = {
            "cat1-4": mean(main, method),
            "cat5": mean([r for r in rows if r["category"] == 5], method),
            "sessions cat1-4": sessions(main, method),
            "by_category": by_cat,
            "search_ms": _spread(
                [r["ms"][method] for r in rows if "ms" in r]
            ),  # a ledger from before has none
        }
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[str(r["category"])] += 1
    return {
        "methods": out,
        "questions": dict(sorted(counts.items())),
        "samples": len(records),
        "skipped_turns": sum(record["skipped_turns"] for record in records),
    }


def _spread(times: list[float]) -> dict[str, float]:
    """p50 and p95 of one method's search times (ms), 0 for none."""
    if not times:
        return {"p50": 0.0, "p95": 0.0}
    p50, p95 = np.percentile(times, [50, 95])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2)}


def evaluate_locomo(
    path: str | Path,
    embedder: Embedder | None,
    *,
    limit: int | None = None,
    progress: SampleProgress | None = None,
    resume: Path | None = None,
    index: str = "all",
    db: str | None = None,
) -> dict[str, Any]:
    """The summary over the first ``limit`` samples (all by default). With ``resume`` (a JSON-lines file), each
    sample is appended there as it finishes, and samples already there are read back, not measured again.
    ``index`` is which turns are stored: ``all``, or ``user`` (every turn but the chat assistant's); ``db`` a
    PostgreSQL URL to store each sample in a database of its own on that server (SQLite files by default)."""
    if index not in INDEXES:
        raise ValueError(f"index must be one of {', '.join(INDEXES)}, not {index!r}")
    check_db(db)
    samples = load_samples(path)
    samples = samples[:limit] if limit else samples
    ledger = Ledger(resume, _ledger_key(embedder, index, db)) if resume else None
    done = ledger.finished() if ledger else {}
    records = []
    with _quiet(storage.__name__), tempfile.TemporaryDirectory(prefix="companion-eval-") as tmp:
        for number, sample in enumerate(samples, start=1):
            start, record = time.perf_counter(), done.get(sample["sample_id"])
            if record is None:
                record = evaluate_sample(sample, embedder, Path(tmp), index, db)
                if ledger:
                    ledger.append(record)
            records.append(record)
            if progress:
                progress(
                    SampleDone(
                        number,
                        len(samples),
                        str(sample["sample_id"]),
                        len(record["questions"]),
                        record["skipped_turns"],
                        time.perf_counter() - start,
                        sample["sample_id"] in done,
                    )
                )
    return summarise(records) | {"index": index, "engine": "postgresql" if db else "sqlite"}


def _ledger_key(embedder: Embedder | None, index: str, db: str | None = None) -> str | None:
    """What a resumed run must share with the records it reads back: the model, which turns were stored, and the
    engine (PostgreSQL ranks words its own way, so its records are not SQLite's)."""
    fingerprint = embedder.fingerprint if embedder else None
    key = fingerprint if index == "all" else f"{fingerprint or 'bm25'} index={index}"
    return key if db is None else f"{key or 'bm25'} engine=postgresql"


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Every sample opens a brand-new store, which logs each migration it applies at INFO: dozens of lines of
    noise per sample (on either engine: the storage package's loggers). Only for this run, they say warnings and worse."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(before)

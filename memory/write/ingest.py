"""File ingest (WRITE-7): text, Markdown and PDF files become memories with provenance to file and lines.

    read       ``memory.write.passages`` streams a file as passages (paragraphs under a heading, bounded size)
    split      a passage already ingested from this file (same words) is kept: its memories stay, only
               their line range is updated; the others are new (a forgotten passage's rows went with its
               memories, so it is new again, and its tombstone keeps it out: ``memory.write.tombstones``)
    prepare    with a model, each new passage becomes typed memories (``prompts/ingest.md``, parsed by
               ``memory.write.extraction.parse_list``); without one, each passage is one memory. Secrets are
               redacted first, and every memory passes the store's safety filters. No store access here,
               so a caller may run it off the store's thread (it waits on the model)
    store      the memories are written (in bulk without a model; through the write rules with one) and
               each passage's memories recorded in ``ingest_passages``
    finish     changed passages (aligned old against new by their hashes) supersede the memories of the
               passages they replace; the file's hash is recorded, so an unchanged file is skipped

Provenance names the resolved path with the line range, ``/notes/plan.md#L10-L24`` (a PDF adds its page:
``#p3:L5-L20``), and ``line`` is the first line. What was ingested is kept by ``memory.storage.ingest``.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import prompts

from ..engine import MemoryEngine
from ..errors import EmbeddingError, InvalidInput, Rejected
from ..models import (
    FactKind,
    JsonObject,
    MemoryType,
    NewMemory,
    Provenance,
    Scope,
    Source,
    Visibility,
)
from ..protocols import Completer
from ..safety import MAX_SUBJECT, check_memory, normalise_text, redact_secrets
from ..scopes import memory_partition
from ..storage.embeddings import ModelMismatch
from ..storage.ingest import IngestLog, PassageRow
from .extraction import BadAnswer, parse_date, parse_list
from .passages import BadFile, Passage, file_digest, read_passages
from .tombstones import unforgotten

log = logging.getLogger(__name__)
BATCH = 256  # passages read, prepared and stored together (one embedding call, one transaction)
MAX_PER_PASSAGE = 8  # typed memories the model may make of one passage
TAG = "ingested"


@dataclass(frozen=True, slots=True)
class IngestTarget:
    """Whose memory a file goes into: the same choices as ``companion memory add``."""

    scope: Scope
    scope_id: str
    visibility: Visibility = Visibility.PUBLIC

    def __post_init__(self) -> None:
        if not self.scope_id.strip():
            raise InvalidInput("name whose memory the file goes into (a scope id)")

    @property
    def partition(self) -> str:
        return memory_partition(self.scope, self.scope_id, self.visibility)


@dataclass(slots=True)
class FileReport:
    path: str
    status: str = "ingested"  # "ingested" | "unchanged" | "failed"
    passages: int = 0
    kept: int = 0  # passages already ingested with the same words
    memories: int = 0  # memories written
    superseded: int = 0  # older memories replaced by a changed passage's
    gone: int = 0  # passages no longer in the file (their memories are kept)
    rejected: list[str] = field(default_factory=list)  # why a passage or a memory was not stored
    error: str = ""

    def as_dict(self) -> JsonObject:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Prepared:
    """A new passage and what it becomes (empty: nothing, with the reasons in ``rejected``)."""

    seq: int
    passage: Passage
    memories: tuple[NewMemory, ...]
    rejected: tuple[str, ...] = ()


# -- one file -----------------------------------------------------------------------------------------------
class FileRun:
    """One file's ingest, step by step (``Ingester.ingest`` runs the steps in order)."""

    def __init__(
        self,
        engine: MemoryEngine,
        log_: IngestLog,
        path: Path,
        file_id: int,
        digest: str,
        size: int,
    ) -> None:
        self.engine, self.log, self.path, self.file_id = engine, log_, path, file_id
        self.digest, self.size = digest, size
        self.report = FileReport(str(path))
        old = log_.rows(file_id)
        self.old_order = _passages(old)  # [(digest, rows)] in the file's previous order
        self._unused: dict[str, list[int]] = {}
        for index, (digest_, _) in enumerate(self.old_order):
            self._unused.setdefault(digest_, []).append(index)
        self._kept: set[int] = set()
        self.new_order: list[str] = []
        self.rows: list[PassageRow] = []
        self._moved: list[tuple[str, Provenance]] = []
        self.retry_empty = False  # --force: a passage that gave nothing before is read again

    def passage_batches(self) -> Iterator[list[Passage]]:
        """The file's passages, ``BATCH`` at a time, read as they are asked for (off the store's
        thread is fine: it only reads the file).

        :raises BadFile: once the file turns out unreadable."""
        return batches(read_passages(self.path))

    def split(self, passages: list[Passage]) -> list[tuple[int, Passage]]:
        """The passages to prepare; the others were ingested before with the same words and are kept."""
        fresh = []
        for passage in passages:
            seq = len(self.new_order)
            self.new_order.append(passage.digest)
            self.report.passages += 1
            same = self._unused.get(passage.digest)
            if not same:
                fresh.append((seq, passage))
                continue
            index = same.pop(0)
            self._kept.add(index)
            if self.retry_empty and not any(row.memory_id for row in self.old_order[index][1]):
                fresh.append((seq, passage))
                continue
            self.report.kept += 1
            for row in self.old_order[index][1]:
                self.rows.append(
                    PassageRow(
                        seq, passage.digest, passage.page, passage.start, passage.end, row.memory_id
                    )
                )
                if row.memory_id and (row.start, row.end, row.page) != (
                    passage.start,
                    passage.end,
                    passage.page,
                ):
                    self._moved.append((row.memory_id, provenance(self.path, passage)))
        return fresh

    def store(self, prepared: list[Prepared], *, bulk: bool) -> None:
        """Write the prepared memories and record which passage each came from (the store's thread), in one
        transaction that first checks the file was not forgotten while the model read it (issue 33), and reads
        the tombstones again: a forget that landed meanwhile leaves nothing of the file learned back."""
        with self.engine.db.transaction():
            if not self.log.exists(self.file_id):
                raise BadFile(
                    f"{self.path} was forgotten while it was being read; nothing more of it is stored"
                )
            self._store(prepared, bulk=bulk)

    def _store(self, prepared: list[Prepared], *, bulk: bool) -> None:
        for memory_id, where in self._moved:
            self.engine.memory_rows.set_provenance(
                self.engine.memory_rows.get(memory_id).rid, where
            )
        self._moved = []
        prepared = [_unforgotten(self.engine, item) for item in prepared]
        ids = (
            _store_bulk(self.engine, prepared, self.report)
            if bulk
            else _store_each(self.engine, prepared, self.report)
        )
        new_rows = []
        for item, memory_ids in zip(prepared, ids, strict=True):
            self.report.rejected += item.rejected
            p = item.passage
            # a passage that gave nothing is still known
            made: list[str | None] = list(memory_ids) or [None]
            new_rows += [PassageRow(item.seq, p.digest, p.page, p.start, p.end, m) for m in made]
        self.report.memories += sum(len(i) for i in ids)
        with (
            self.engine.db.transaction()
        ):  # recorded now: a crash later does not store these passages twice
            self.log.add_rows(self.file_id, new_rows)
        self.rows += new_rows

    def failed(self, error: str) -> FileReport:
        """The report of a file that could not be read to its end: what was done before, and why."""
        done = self.report
        return FileReport(
            str(self.path), "failed", passages=done.passages, memories=done.memories, error=error
        )

    def finish(self) -> FileReport:
        """Changed passages supersede what they replace; the file's passages and hash are recorded."""
        firsts: dict[int, str] = {}
        for row in self.rows:
            if row.memory_id:
                firsts.setdefault(row.seq, row.memory_id)
        matcher = difflib.SequenceMatcher(
            None, [d for d, _ in self.old_order], self.new_order, autojunk=False
        )
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "delete":
                self.report.gone += sum(1 for i in range(i1, i2) if i not in self._kept)
            if op != "replace":
                continue
            # a passage that gave nothing (forgotten) replaces nothing
            made = [j for j in range(j1, j2) if j in firsts]
            for k in range(i1, i2):
                new_id = firsts[made[min(k - i1, len(made) - 1)]] if made else None
                old_ids = [r.memory_id for r in self.old_order[k][1] if r.memory_id]
                if k not in self._kept and new_id and old_ids:
                    self.engine.memories.supersede(new_id, old_ids)
                    self.report.superseded += len(old_ids)
        self.rows.sort(key=lambda r: r.seq)
        self.log.finish(self.file_id, self.rows, self.digest, self.size, len(self.new_order))
        return self.report


def _unforgotten(engine: MemoryEngine, item: Prepared) -> Prepared:
    """SEC-5: a forgotten passage read again (another part of its file changed) is not learned back; its row is
    still recorded (with no memory), so it counts as ingested and is not read again until its own words change."""
    kept = tuple(unforgotten(engine, list(item.memories)))
    if len(kept) == len(item.memories):
        return item
    reason = f"{item.passage.where}: forgotten before, not learned again"
    return replace(item, memories=kept, rejected=(*item.rejected, reason))


def _passages(rows: list[PassageRow]) -> list[tuple[str, list[PassageRow]]]:
    out: list[tuple[str, list[PassageRow]]] = []
    for row in rows:
        if out and out[-1][1][0].seq == row.seq:
            out[-1][1].append(row)
        else:
            out.append((row.digest, [row]))
    return out


def provenance(path: Path, passage: Passage) -> Provenance:
    return Provenance(file=f"{path}#{passage.where}", line=passage.start)


def _store_bulk(
    engine: MemoryEngine, prepared: list[Prepared], report: FileReport
) -> list[list[str]]:
    """One memory per passage, in one transaction, embedded in one call (hash-cached, like every write). The
    store's safety filters refuse a whole batch for one bad passage; then each is written alone, and the
    refused ones are reported."""
    items = [(p, m) for p in prepared for m in p.memories]
    vectors = _vectors(engine, [m.content for _, m in items])
    rows = [(m, vectors[i] if vectors is not None else None) for i, (_, m) in enumerate(items)]
    out: dict[int, list[str]] = {}
    try:
        ids: list[str | None] = list(engine.memories.insert_batch(rows))
    except Rejected:
        ids = [
            _one_of(engine, row, item.passage, report)
            for (item, _), row in zip(items, rows, strict=True)
        ]
    for (item, _), memory_id in zip(items, ids, strict=True):
        if memory_id is not None:
            out.setdefault(item.seq, []).append(memory_id)
    return [out.get(p.seq, []) for p in prepared]


def _one_of(
    engine: MemoryEngine, row: tuple[NewMemory, Any], passage: Passage, report: FileReport
) -> str | None:
    try:
        return engine.memories.insert_batch([row])[0]
    except Rejected as exc:
        report.rejected.append(f"{passage.where}: {exc}")
        return None


def _vectors(engine: MemoryEngine, texts: list[str]) -> Any:
    if not texts or not engine.embeddings.available:
        return None
    try:
        return engine.embeddings.embed(texts)
    except ModelMismatch:
        raise  # another vector space than the store's: refuse, as every write does
    except EmbeddingError:
        log.exception(
            "embedding the passages failed; they are stored for keyword search (reembed fixes it later)"
        )
        return None


def _store_each(
    engine: MemoryEngine, prepared: list[Prepared], report: FileReport
) -> list[list[str]]:
    """Typed memories go through the write rules: a fact already known is not stored twice."""
    out = []
    for item in prepared:
        ids = []
        for memory in item.memories:
            try:
                ids.append(engine.memories.add(memory).memory.id)
            except Rejected as exc:
                report.rejected.append(f"{item.passage.where}: {exc}")
        out.append(list(dict.fromkeys(ids)))
    return out


# -- turning passages into memories (no store access) --------------------------------------------------------
def plain_memories(path: Path, seq: int, passage: Passage, target: IngestTarget) -> Prepared:
    """``--no-llm``: the passage itself as one memory. The store's safety filters judge it when it is written
    (``_store_bulk``): run here too, they would double the cost of a large file. A passage holding a secret is
    refused, as ``memory add`` refuses it: a "[redacted]" memory keeps nothing worth recalling."""
    text = normalise_text(passage.text)
    if redact_secrets(text) != text:
        return Prepared(
            seq,
            passage,
            (),
            (f"{passage.where}: it holds a secret (a password, key or token); not stored",),
        )
    memory = _new(target, _subject(path, passage), text, provenance(path, passage))
    return Prepared(seq, passage, (memory,))


def typed_memories(
    path: Path, seq: int, passage: Passage, target: IngestTarget, complete: Completer
) -> Prepared:
    """The extraction model reads the passage and answers with typed memories (a bad answer is one reason)."""
    prompt = prompts.render(
        "ingest",
        file=path.name,
        where=passage.where,
        heading=passage.heading or "(none)",
        passage=json.dumps(passage.text, ensure_ascii=False),
    )
    try:
        candidates = parse_list(
            complete(
                "You extract memories from documents. Answer with JSON only.",
                prompt,
                temperature=0.0,
            )
        )
    except BadAnswer as exc:
        return Prepared(
            seq, passage, (), (f"{passage.where}: the model's answer was not usable ({exc})",)
        )
    memories, reasons = [], []
    for candidate in candidates[:MAX_PER_PASSAGE]:
        try:
            memories.append(_typed(candidate, path, passage, target))
        except (Rejected, TypeError, ValueError) as exc:
            reasons.append(f"{passage.where}: {exc}")
    return Prepared(seq, passage, tuple(memories), tuple(reasons))


def _typed(c: dict[str, Any], path: Path, passage: Passage, target: IngestTarget) -> NewMemory:
    kind = FactKind(c["kind"]) if c.get("kind") in FactKind._value2member_map_ else FactKind.OTHER
    mtype = (
        MemoryType(c["type"])
        if c.get("type") in MemoryType._value2member_map_
        else MemoryType.SEMANTIC
    )
    subject = _text(c.get("subject") or _subject(path, passage))
    content = _text(c.get("content"))
    if redact_secrets(subject) != subject or redact_secrets(content) != content:
        raise Rejected("it holds a secret (a password, key or token); not stored")
    subject, content = check_memory(subject, content, kind)
    tags = c.get("tags")
    tags = tags if isinstance(tags, list) else []
    typed = {
        "kind": kind,
        "type": mtype,
        "tags": tuple(str(t) for t in tags[:11]),
        "importance": c.get("importance"),
    }
    return _new(
        target,
        subject,
        content,
        provenance(path, passage),
        valid_from=parse_date(c.get("valid_from")),
        **typed,
    )


def _new(
    target: IngestTarget, subject: str, content: str, where: Provenance, **typed: Any
) -> NewMemory:
    try:
        importance = min(10.0, max(1.0, float(typed.pop("importance", None) or 5.0)))
    except (TypeError, ValueError):
        importance = 5.0
    return NewMemory(
        content=content,
        subject=subject,
        scope=target.scope,
        scope_id=target.scope_id,
        visibility=target.visibility,
        source=Source.INGEST,
        importance=importance,
        provenance=where,
        **{**typed, "tags": (TAG, *typed.get("tags", ()))},
    )


def _text(value: Any) -> str:
    if value is None or not isinstance(value, (str, int, float)):
        raise TypeError("a memory without text")
    return str(value)


def _subject(path: Path, passage: Passage) -> str:
    return (f"{path.name} › {passage.heading}" if passage.heading else path.name)[:MAX_SUBJECT]


def within(folder: Path, path: Path) -> bool:
    """Whether ``path``, every link on the way followed, is inside ``folder``. A folder walk keeps only such
    files: a link dropped into the folder must not make the bot read (and remember) a file from elsewhere."""
    try:
        return path.resolve(strict=True).is_relative_to(folder.resolve(strict=True))
    except (
        OSError,
        RuntimeError,
    ):  # a dangling link or a loop of links is not a file in the folder
        return False


# -- the whole of it ----------------------------------------------------------------------------------------
PassagesRead = Callable[[int], None]  # told how many passages of the current file have been read


class Ingester:
    """Files into one target's memory; with ``complete`` (the extraction model) passages become typed memories."""

    def __init__(
        self,
        engine: MemoryEngine,
        target: IngestTarget,
        complete: Completer | None = None,
        *,
        force: bool = False,
    ) -> None:
        """``force``: read a file again though it is unchanged, for the passages that gave nothing (a model that found
        nothing the first time); what was already learned from it is kept, not stored twice."""
        self.engine, self.target, self.complete, self.force = engine, target, complete, force
        self.log = engine.ingest_log

    def begin(self, path: Path) -> FileRun | FileReport:
        """The file's run, or its report when there is nothing to do (unchanged) or it cannot be read."""
        path = path.expanduser().resolve()
        try:
            digest, size = file_digest(path)
        except BadFile as exc:
            return FileReport(str(path), "failed", error=str(exc))
        found = self.log.known(str(path), self.target.partition)
        if found and found[1] == digest and not self.force:
            return FileReport(str(path), "unchanged")
        with self.engine.db.transaction():
            target = self.target
            file_id = self.log.open_file(
                str(path), target.partition, target.scope.value, target.scope_id, size
            )
        run = FileRun(self.engine, self.log, path, file_id, digest, size)
        run.retry_empty = self.force
        return run

    def prepare(self, run: FileRun, fresh: list[tuple[int, Passage]]) -> list[Prepared]:
        """New passages as memories; may run off the store's thread (it only calls the model)."""
        if self.complete is None:
            return [plain_memories(run.path, seq, p, self.target) for seq, p in fresh]
        return [typed_memories(run.path, seq, p, self.target, self.complete) for seq, p in fresh]

    def ingest(self, path: Path, progress: PassagesRead | None = None) -> FileReport:
        """One file, start to end, on the calling thread."""
        run = self.begin(path)
        if isinstance(run, FileReport):
            return run
        try:
            for batch in run.passage_batches():
                run.store(self.prepare(run, run.split(batch)), bulk=self.complete is None)
                if progress is not None:
                    progress(run.report.passages)
        except BadFile as exc:
            return run.failed(str(exc))
        return run.finish()


def batches(passages: Iterator[Passage]) -> Iterator[list[Passage]]:
    while batch := list(islice(passages, BATCH)):
        yield batch

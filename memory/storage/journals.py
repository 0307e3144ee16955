"""The Markdown layer (MAINT-6): journals and a snapshot people can read and keep in git.

    <journal dir>/                      default ``<store dir>/memory/``
        guild-discord-1/                a guild's lore and what people said in public there
            2026-11-22.md               append-only: one line per memory stored that day (UTC)
            MEMORY.md                   generated: the folder's live memories, grouped by type
        dm-discord-7/                   what a person said in DMs (and their portable facts)
        owner/                          the operator's own memory

A line reads ``- 14:02 [preference] Alice likes green tea <!-- m:<memory id> -->``. The database stays
the source of truth: these files are derived from it, declared in ``memory.upkeep.registry.FILE_REGISTRY``
and forgotten with the memories they carry. One folder per scope, decided by the memory's partition
(``memory.scopes``), so a guild's folder never holds a DM-private or an owner memory.

When a memory is deleted, the lines naming it are rewritten away and the snapshot is regenerated at
once: a temporary file replaces the old one (``os.replace``) and the old file's bytes are overwritten
before they are let go, so no copy of the forgotten words stays in the folder. A superseded memory's
line stays (history); only a deleted one goes. A snapshot is regenerated when its folder changed,
at most every ``SNAPSHOT_EVERY_S`` while memories keep arriving, and always on ``flush`` and forget.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ..models import Memory, MemoryType
from .memories import RecallFilters
from .private import create_private, private_folder

log = logging.getLogger(__name__)

SNAPSHOT = "MEMORY.md"
SNAPSHOT_LIMIT = (
    1_000  # memories listed in one MEMORY.md (most important first); the rest are counted
)
SNAPSHOT_EVERY_S = 2.0
LINE_CHARS = 500  # a journal line shows this much of a memory (the database has all of it)
_MARK = re.compile(r"<!-- m:([0-9A-Za-z-]+) -->\s*$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_WIPE_CHUNK = 1 << 16


class JournalError(OSError):
    """A journal or snapshot could not be rewritten (the forgotten words may still be in it)."""


class LiveMemories(Protocol):
    """What the journals read from the store: its partitions, and a partition set's live memories."""

    def partitions(self) -> tuple[str, ...]: ...

    def listing(
        self,
        partitions: tuple[str, ...] | None,
        filters: RecallFilters,
        order: str,
        limit: int,
        include_inactive: bool,
    ) -> list[Memory]: ...


def folder_of(partition_key: str) -> str:
    """The folder a partition's memories are journalled in (one per guild, per person's DMs, the owner)."""
    parts = partition_key.split("|")
    scope = parts[0]
    if scope == "guild":
        return "guild-" + safe_name(parts[1])
    if scope == "user" and len(parts) >= 4 and parts[2] == "public":
        # a public fact said in a server belongs to that server
        return "guild-" + safe_name(parts[3])
    if scope == "owner":
        return "owner"
    # private facts, and portable ones: only that person's DMs see them
    return "dm-" + safe_name(parts[1])


def safe_name(value: str) -> str:
    """A file-system-safe name for an id: "discord:1" -> "discord-1"; any other unusual character is replaced
    and a short hash added, so "../x" or "a/b" can neither leave the folder nor meet another id's folder."""
    plain = value.replace(":", "-")
    cleaned = _SAFE.sub("-", plain).strip(".") or "-"
    if cleaned != plain:
        cleaned += "-" + hashlib.sha1(value.encode()).hexdigest()[:8]
    return cleaned[:120]


def journal_line(memory: Memory) -> str:
    """One line: time (UTC), kind, the memory's words on one line, its id in an HTML comment."""
    moment = datetime.fromtimestamp(memory.created_at, UTC)
    return f"- {moment:%H:%M} [{memory.kind.value}] {_one_line(memory.content)} <!-- m:{memory.id} -->\n"


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    flat = flat if len(flat) <= LINE_CHARS else flat[: LINE_CHARS - 1] + "…"
    return flat.replace("<!--", "<! --").replace("-->", "-- >")  # the id marker is ours alone


class Journals:
    """The Markdown files beside a store; told of every write by ``MemoryStore`` (its ``journal`` hook)."""

    def __init__(self, root: str | Path, store: LiveMemories, now: Callable[[], float]) -> None:
        self.root = Path(root)
        self.store = store
        self.now = now
        self._dirty: set[str] = set()
        self._made: dict[str, float] = {}  # folder -> monotonic time its snapshot was last written
        self._lock = threading.RLock()

    # -- the store's hook ------------------------------------------------------------------------------
    def stored(self, memories: Iterable[Memory]) -> None:
        """New memories: a line each in their folder's journal of the day. A failure is logged, never raised:
        the memory is safe in the database, and the journal is only a view of it."""
        by_file: dict[Path, list[str]] = {}
        for memory in memories:
            by_file.setdefault(self._day_file(memory), []).append(journal_line(memory))
        with self._lock:
            try:
                for path, lines in by_file.items():
                    self._append(path, lines)
                    self._dirty.add(path.parent.name)
                self._snapshots(due_only=True)
            except OSError:
                log.exception(
                    "could not write the Markdown journal in %s; the memories are stored", self.root
                )

    def touched(self, partition_keys: Iterable[str]) -> None:
        """Memories of these partitions changed state (superseded): their snapshots are due."""
        with self._lock:
            self._dirty.update(folder_of(k) for k in partition_keys)
            self._snapshots(due_only=True)

    def changed(self, memory: Memory) -> None:
        """An edited memory: its line now says the new words (the old ones are not kept anywhere)."""
        with self._lock:
            self._rewrite(self._day_file(memory), {memory.id: journal_line(memory)})
            self._snapshot(folder_of(memory.partition_key))

    def removed(self, memories: Iterable[tuple[str, str, float]]) -> None:
        """Deleted memories, as (id, partition key, created_at): their lines go and the snapshots are remade."""
        by_file: dict[Path, dict[str, str | None]] = {}
        for memory_id, key, created_at in memories:
            by_file.setdefault(self.root / folder_of(key) / _day(created_at), {})[memory_id] = None
        with self._lock:
            for path, ids in by_file.items():
                self._rewrite(path, ids)
            for folder in {p.parent.name for p in by_file}:
                self._snapshot(folder)

    def forget(self, memory_ids: Iterable[str]) -> int:
        """Forgetting's sweep: every file under the folder loses the lines naming these ids, wherever they are
        (a /link may have moved a memory after its line was written), emptied files go, and the snapshots
        that named them are remade. Returns the number of files changed."""
        ids: dict[str, str | None] = dict.fromkeys(memory_ids)
        if not ids or not self.root.is_dir():
            return 0
        rewritten, stale = 0, set()
        with self._lock:
            for path in sorted(self.root.rglob("*.md")):
                if path.name == SNAPSHOT:
                    if _names_any(path, ids):
                        stale.add(path.parent.name)
                elif self._rewrite(path, ids):
                    rewritten += 1
                    stale.add(path.parent.name)
            for folder in sorted(stale):
                self._snapshot(folder)
        return rewritten + len(stale)

    def rebuild(self, batches: Iterable[list[Memory]]) -> int:
        """The journals made again from the store (after a restore, or by ``companion journals rebuild``): every
        journal and snapshot under the folder is wiped (a restored store's ids are not the old files' ids, so a
        line-by-line forget would never find those lines), then each memory the store holds, history included,
        gets its line back in the order it was written, and every snapshot is made. Returns the lines written."""
        with self._lock:
            self._wipe()
            written = 0
            for memories in batches:
                by_file: dict[Path, list[str]] = {}
                for memory in memories:
                    by_file.setdefault(self._day_file(memory), []).append(journal_line(memory))
                for path, lines in by_file.items():
                    self._append(path, lines)
                    self._dirty.add(path.parent.name)
                written += len(memories)
            self._snapshots(due_only=False)
        return written

    def _wipe(self) -> None:
        """Every journal and snapshot under the folder (not a dot-folder such as .git) goes, its bytes overwritten."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob("*.md")):
            if not any(part.startswith(".") for part in path.relative_to(self.root).parts[:-1]):
                replace_wiping(path, None)
                _remove_if_empty(path.parent)
        self._dirty.clear()

    def flush(self) -> None:
        """Regenerate every snapshot whose folder changed (the runtime's tick, and closing the store)."""
        with self._lock:
            self._snapshots(due_only=False)

    # -- files -----------------------------------------------------------------------------------------
    def _day_file(self, memory: Memory) -> Path:
        return self.root / folder_of(memory.partition_key) / _day(memory.created_at)

    def _append(self, path: Path, lines: list[str]) -> None:
        private_folder(path.parent)
        header = "" if path.exists() else f"# {path.stem}: {_title(path.parent.name)}\n\n"
        # 0600 before the first line (a plain open would follow the umask: 0644)
        create_private(path)
        with path.open("a", encoding="utf-8") as out:
            out.write(header + "".join(lines))

    def _rewrite(self, path: Path, lines: dict[str, str | None]) -> int:
        """Replace (text) or drop (None) the lines naming these ids; 1 if the file changed. Read line by line,
        so a large journal is never held whole; an emptied journal is removed, not left as a header."""
        if not path.is_file():
            return 0
        kept, changed, entries = [], False, 0
        with path.open(encoding="utf-8", errors="replace") as source:
            for line in source:
                mark = _MARK.search(line)
                if mark and mark.group(1) in lines:
                    changed = True
                    line = lines[mark.group(1)] or ""
                entries += bool(line and _MARK.search(line))
                if line:
                    kept.append(line)
        if not changed:
            return 0
        replace_wiping(path, "".join(kept) if entries else None)
        return 1

    def _snapshots(self, *, due_only: bool) -> None:
        for folder in sorted(self._dirty):
            if not due_only or time.monotonic() - self._made.get(folder, -1e9) >= SNAPSHOT_EVERY_S:
                self._snapshot(folder)

    def _snapshot(self, folder: str) -> None:
        """MEMORY.md of one folder from the database: its live memories, most important first, by type."""
        self._dirty.discard(folder)
        self._made[folder] = time.monotonic()
        partitions = tuple(k for k in self.store.partitions() if folder_of(k) == folder)
        memories = (
            self.store.listing(partitions, RecallFilters(), "important", SNAPSHOT_LIMIT + 1, False)
            if partitions
            else []
        )
        path = self.root / folder / SNAPSHOT
        if not memories:
            replace_wiping(path, None)
            _remove_if_empty(path.parent)
            # nothing left at all: no empty folder stays to say someone was here
            _remove_if_empty(self.root)
            return
        private_folder(path.parent)
        replace_wiping(path, "".join(_snapshot_text(folder, memories, self.now())))


def _snapshot_text(folder: str, memories: list[Memory], now: float) -> Iterator[str]:
    yield f"# Memory: {_title(folder)}\n\n"
    yield (
        f"_Generated {datetime.fromtimestamp(now, UTC):%Y-%m-%d %H:%M} UTC from the database, which is the source "
        "of truth: edits here are overwritten._\n"
    )
    shown = memories[:SNAPSHOT_LIMIT]
    for mtype in MemoryType:
        group = [m for m in shown if m.type is mtype]
        if group:
            yield f"\n## {mtype.value.capitalize()}\n\n"
            yield from (
                f"- [{m.kind.value}] {_one_line(m.content)} <!-- m:{m.id} -->\n" for m in group
            )
    if len(memories) > SNAPSHOT_LIMIT:
        yield f"\n_… and more: the {SNAPSHOT_LIMIT} most important are shown (`companion memory list` has them all)._\n"


def _names_any(path: Path, ids: dict[str, str | None]) -> bool:
    with path.open(encoding="utf-8", errors="replace") as source:
        return any(
            (mark := _MARK.search(line)) is not None and mark.group(1) in ids for line in source
        )


def _title(folder: str) -> str:
    kind, _, rest = folder.partition("-")
    return {"guild": f"server {rest}", "dm": f"direct messages with {rest}"}.get(kind, "the owner")


def _day(created_at: float) -> str:
    return f"{datetime.fromtimestamp(created_at, UTC):%Y-%m-%d}.md"


def replace_wiping(path: Path, text: str | None) -> None:
    """Atomically give ``path`` new contents (or remove it, for None), then overwrite the old file's bytes.

    The new text goes to a temporary file in the same folder, flushed to disk, then ``os.replace``d over
    the old one; readers see the old or the new file, never a half. The old file is held open across the
    replace and zeroed through that handle, so its blocks do not keep the forgotten words (on file systems
    that write in place; copy-on-write ones, and backups or git history, are beyond a program's reach).
    """
    old = _open_old(path)
    try:
        if text is None:
            if old is not None:
                path.unlink()
        else:
            _write_new(path, text)
        if old is not None:
            _zero(old)
    except OSError as exc:
        raise JournalError(f"could not rewrite {path}: {exc.strerror or exc}") from exc
    finally:
        if old is not None:
            os.close(old)


def _open_old(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None


def _write_new(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _zero(fd: int) -> None:
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    zeros = b"\0" * _WIPE_CHUNK
    for start in range(0, size, _WIPE_CHUNK):
        os.write(fd, zeros[: min(_WIPE_CHUNK, size - start)])
    os.fsync(fd)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (a journal remains), or already gone
        folder.rmdir()

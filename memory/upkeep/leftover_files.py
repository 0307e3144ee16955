"""The file surfaces of ``companion audit forget`` (``memory.upkeep.leftovers``): the bytes of
what is looked for in the store's own files and in every file the bot writes beside it.

    db file, wal, shm,   the store and each side file SQLite keeps beside it (a stray rollback
    rollback journal     journal too: a copy may hold the words)
    beside the store     every other regular file in the store's folder: the chat's log
                         (``companion chat`` logs beside the store, a failed turn's line with it),
                         a MEMORY.md, a history a tool wrote, the tombstones' key (random bytes)
    journals, exports,   every file under the folder
    backups
    data directory       (PostgreSQL) every file there, when this user may read it

Only regular files are read (a FIFO would block the audit, a device never ends; a link is not
followed out of the folder beside the store); bytes are compared without ASCII case.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..storage.journals import safe_name

CHUNK = 1 << 20
STORE_SIDES = (("wal", "-wal"), ("shm", "-shm"), ("rollback journal", "-journal"))


@dataclass(frozen=True, slots=True)
class FileHit:
    surface: str
    remaining: int | None  # None: the surface could not be read
    where: tuple[tuple[str, int], ...] = ()  # (table or file kind, count): never a word
    note: str = ""


def in_folder(
    name: str, folder: Path | None, needles: list[bytes], people: Iterable[str]
) -> FileHit:
    """Every regular file under ``folder``; for the journals, also the lines in a person's own
    folder."""
    if folder is None or not folder.is_dir():
        return FileHit(name, 0, note="no such folder")
    counts: dict[str, int] = {}
    for path in sorted(p for p in folder.rglob("*") if _regular(p)):
        if n := file_hits(path, needles):
            kind = path.suffix.lstrip(".") or "file"
            counts[kind] = counts.get(kind, 0) + n
    if name == "journals":
        for person in people:
            own = folder / ("dm-" + safe_name(person))
            lines = (
                sum(
                    p.read_text(encoding="utf-8", errors="replace").count("<!-- m:")
                    for p in own.glob("*.md")
                )
                if own.is_dir()
                else 0
            )
            if lines:
                counts["journal lines in their folder"] = lines
    return FileHit(name, sum(counts.values()), tuple(sorted(counts.items())))


def store_files(store: Path, needles: list[bytes]) -> list[FileHit]:
    """The store file and each of its side files (absent: 0, said so)."""
    found = [FileHit("db file", file_hits(store, needles))]
    for surface, side in STORE_SIDES:
        path = store.with_name(store.name + side)
        there = _regular(path)
        found.append(
            FileHit(
                surface,
                file_hits(path, needles) if there else 0,
                note="" if there else f"no {side.lstrip('-')} file",
            )
        )
    return found


def beside(folder: Path | None, store: Path | None, needles: list[bytes]) -> FileHit:
    """Every other regular file in the store's folder (not its subfolders: those are the journals,
    exports and backups surfaces), by kind ("log", "md", "file")."""
    if folder is None or not folder.is_dir():
        return FileHit("beside the store", 0, note="no such folder")
    own = set() if store is None else {store.name, *(store.name + side for _, side in STORE_SIDES)}
    counts: dict[str, int] = {}
    for path in sorted(folder.iterdir()):
        if path.name in own or not _regular(path, follow=False):
            continue
        if n := file_hits(path, needles):
            kind = path.suffix.lstrip(".") or "file"
            counts[kind] = counts.get(kind, 0) + n
    return FileHit("beside the store", sum(counts.values()), tuple(sorted(counts.items())))


def data_directory(where: Path, needles: list[bytes]) -> FileHit:
    """PostgreSQL's files, when this user may read them (the server's own user, or a shared
    volume)."""
    if not os.access(where, os.R_OK | os.X_OK):
        return FileHit("data directory", None, note=f"{where} is not readable by this user")
    counts: dict[str, int] = {}
    for path in (p for p in where.rglob("*") if _regular(p) and os.access(p, os.R_OK)):
        if n := file_hits(path, needles):
            part = path.relative_to(where).parts[0]
            counts[part] = counts.get(part, 0) + n
    return FileHit("data directory", sum(counts.values()), tuple(sorted(counts.items())))


def file_hits(path: Path, needles: list[bytes]) -> int:
    """Occurrences of the needles in a file, read in chunks (a store can be gigabytes), ASCII case
    ignored."""
    if not needles:
        return 0
    overlap = max(len(n) for n in needles) - 1
    total, tail = 0, b""
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            data = (tail + chunk).lower()
            # (a number touching a chunk's edge may count one off: 1 MB chunks)
            total += max(0, bytes_in(data, needles) - bytes_in(data[: len(tail)], needles))
            tail = data[-overlap:] if overlap else b""
    return total


def bytes_in(data: bytes, needles: list[bytes]) -> int:
    low = data.lower()
    return sum(_count(low, n) for n in needles)


def _count(data: bytes, needle: bytes) -> int:
    """Occurrences of ``needle``; a number only where no digit touches it: a platform's 19-digit
    message id holding "4417" is not a forgotten bib number 4417 (the audit reported such ids as
    leftovers)."""
    if not needle.isdigit():
        return data.count(needle)
    return len(re.findall(rb"(?<![0-9])" + re.escape(needle) + rb"(?![0-9])", data))


def _regular(path: Path, *, follow: bool = True) -> bool:
    """A regular file (a FIFO, socket or device is never opened: a read could block for ever)."""
    try:
        mode = (path.stat() if follow else path.lstat()).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode)

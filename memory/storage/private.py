"""What the bot writes to disk is its owner's alone (issue 31 item 11): every file 0600, every folder 0700.

The store, its -wal and -shm (SQLite gives them the store file's own mode), journals, exports, logs and backups
hold people's words; on a shared machine a 0644 store is everyone's to read. Each writer asks here:

    private_folder(path)   the folder, and any parent it has to make, created 0700 (existing ones are left:
                           a folder the operator chose, their home, /tmp, is theirs to set)
    private_file(path)     an existing file made 0600 (one made before this rule, or by a library)
    private_store(path)    the store file and its side files, made 0600 when opened
    create_private(path)   a new, empty file made 0600 before anything is written into it
    owner_only(umask)      the process umask set to 0077 for a command's length: the backstop for anything a
                           library creates on its own

``exposed(paths)`` lists what group or others may still read (``companion doctor`` reports it, with the fix).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

PRIVATE_FILE, PRIVATE_FOLDER, OWNER_ONLY_UMASK = 0o600, 0o700, 0o077
SIDE_FILES = ("-wal", "-shm", "-journal")


def private_folder(path: Path) -> Path:
    """``path`` as a folder: made 0700 with every missing parent (also 0700); an existing one is left as it is."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=PRIVATE_FOLDER)
        # mkdir's mode passes through the umask; the folder is ours, so set it
        _chmod(folder, PRIVATE_FOLDER)
    return path


def private_file(path: Path) -> None:
    """Make an existing file 0600 (nothing happens when it is missing, or not ours to change)."""
    if path.is_file():
        _chmod(path, PRIVATE_FILE)


def private_store(path: str | Path) -> None:
    """The SQLite store and whatever side files it has now, 0600."""
    store = Path(path)
    for candidate in (store, *(store.with_name(store.name + side) for side in SIDE_FILES)):
        private_file(candidate)


def create_private(path: Path) -> None:
    """An empty file at ``path`` (kept if it exists), 0600 before a byte is written into it."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE))
    _chmod(path, PRIVATE_FILE)


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """The process umask 0077 while the block runs (a command), the previous one after (tests run many)."""
    previous = os.umask(OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def exposed(paths: Iterable[Path]) -> list[Path]:
    """The paths among ``paths``, and under the folders among them, that group or others may access."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            continue
        found += [
            p for p in (path, *(path.rglob("*") if path.is_dir() else ())) if _open_to_others(p)
        ]
    return found


def _open_to_others(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not stat.S_ISLNK(mode) and bool(mode & 0o077)


def _chmod(path: Path, mode: int) -> None:
    with contextlib.suppress(
        PermissionError
    ):  # a file of another user's (a shared backup folder): theirs to set
        os.chmod(path, mode)

"""The export files ``/export`` writes for the console's person (SEC-3): one new file per export under
``exports/`` beside the store, readable by its owner only (0600: it holds private things), named after the
person, so forgetting that person (``/forget everything``, ``companion memory forget-person``, the
dashboard: ``memory.upkeep.forgetting.forget_everything``) deletes them too: an export is a copy of the
words, and "forgotten" means gone from every file.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ..engine import MemoryEngine

FOLDER = "exports"


def exports_of(engine: MemoryEngine) -> Path | None:
    """The folder beside the store; None for a store held in memory (nothing is written)."""
    return None if str(engine.path) == ":memory:" else Path(engine.path).parent / FOLDER


def write_export(folder: Path, person_id: str, text: str, now: float) -> Path:
    """A new file under ``folder/exports``, readable by its owner only (mode 0600: it holds private things)."""
    exports = folder / FOLDER
    exports.mkdir(mode=0o700, exist_ok=True)
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
    path = exports / f"{_stem(person_id)}{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = exports / f"{_stem(person_id)}{stamp}-{n}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text + "\n")
    return path


def forget_exports(engine: MemoryEngine, person_ids: list[str]) -> int:
    """Delete the export files of these people; their bytes are overwritten first, so a file system that
    keeps a freed block keeps zeros. Returns how many files went."""
    folder = exports_of(engine)
    if folder is None or not folder.is_dir():
        return 0
    gone = 0
    for person in dict.fromkeys(person_ids):
        for path in folder.glob(f"{_stem(person)}*.json"):
            _overwrite(path)
            path.unlink()
            gone += 1
    return gone


def _stem(person_id: str) -> str:
    """``export-<person>-``: the person id made safe for a file name (a glob character in it is replaced too)."""
    return f"export-{re.sub(r'[^A-Za-z0-9_.-]+', '-', person_id)}-"


def _overwrite(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.write(b"\0" * size)
        file.flush()
        os.fsync(file.fileno())

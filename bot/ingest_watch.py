"""The ingest folder (WRITE-7): files dropped into ``COMPANION_INGEST_DIR`` are ingested while the bot runs.

Every ``poll_s`` the folder is listed (sizes and modification times only). A file is taken once it looks
the same on two polls in a row, so one still being copied is not read half-written. ``memory.write.ingest``
skips a file whose path and hash it has already ingested, and supersedes what changed in one it knows,
so a restart, a touched file or a re-saved one does nothing twice.

A file is read by ``memory.Ingesting``: the store touched on the memory thread only, the file
read and the extraction model waited on on a worker thread, so replies are never stuck behind a
long document.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from memory import SUFFIXES, FileReport, Ingesting, within

from .counts import counted

log = logging.getLogger(__name__)
Signature = tuple[int, int]  # (size, mtime in ns)


class IngestWatch:
    def __init__(self, ingesting: Ingesting, folder: Path, poll_s: float) -> None:
        self.ingesting, self.folder, self.poll_s = ingesting, Path(folder), poll_s
        self._skip = ingesting.skipped  # the journals: memories read back as files
        self._seen: dict[Path, Signature] = {}
        self._done: dict[Path, Signature] = {}
        self.reports: list[
            FileReport
        ] = []  # what was ingested since start (the newest last), for logs and tests

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:  # a background-job edge: log and keep watching
                log.exception("ingest folder poll failed")
            await asyncio.sleep(self.poll_s)

    async def poll(self) -> list[FileReport]:
        """One look at the folder: the files that settled since the last look are ingested."""
        now = await asyncio.to_thread(self._scan)
        settled = [
            p for p, sig in now.items() if self._seen.get(p) == sig and self._done.get(p) != sig
        ]
        self._seen = now
        done = []
        for path in settled:
            report = await self._ingest(path)
            self._done[path] = now[path]
            if report.status != "unchanged":
                log.info("ingested %s: %s", path.name, _summary(report))
                done.append(report)
        self.reports += done
        return done

    def _scan(self) -> dict[Path, Signature]:
        if not self.folder.is_dir():
            return {}
        found = {}
        for path in sorted(self.folder.rglob("*")):
            if path.suffix.lower() in SUFFIXES and not self._ignored(path) and path.is_file():
                stat = path.stat()
                found[path] = (stat.st_size, stat.st_mtime_ns)
        return found

    def _ignored(self, path: Path) -> bool:
        """Hidden files, the journals, and links to files outside the folder (anyone who can drop a link in the
        folder could otherwise have any readable .md, .txt or .pdf of this machine remembered)."""
        if _hidden(path.relative_to(self.folder)) or not within(self.folder, path):
            return True
        return self._skip is not None and path.resolve().is_relative_to(self._skip)

    async def _ingest(self, path: Path) -> FileReport:
        if not within(
            self.folder, path
        ):  # swapped for a link to elsewhere since the scan: not read
            return FileReport(
                str(path), "failed", error="a link to a file outside the ingest folder"
            )
        try:
            return await self.ingesting.file(path)
        except Exception as exc:  # one bad file must not stop the folder (background-job edge)
            log.exception("ingesting %s failed", path)
            return FileReport(str(path), "failed", error=f"{type(exc).__name__}: {exc}")


def _hidden(relative: Path) -> bool:
    """Dot files and folders (editors' temporary copies among them) are not ingested."""
    return any(part.startswith((".", "~")) for part in relative.parts)


def _summary(report: FileReport) -> str:
    if report.status == "failed":
        return f"failed: {report.error}"
    return (
        f"{counted(report.passages, 'passage')}, {counted(report.memories, 'memory')} stored, "
        f"{report.kept} unchanged, {report.superseded} superseded"
    )
